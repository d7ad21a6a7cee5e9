package coordinator_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
)

// fuzzServer is a real coordinator (SQLite, the real interceptor chain of
// daemon.Serve) on an in-process bufconn listener.
type fuzzServer struct {
	client pb.CoordinatorClient
	health healthpb.HealthClient
	calls  int
	stop   func()
}

func startFuzzServer(tb testing.TB) *fuzzServer {
	return startFuzzServerWith(tb, coordinator.Config{})
}

func startFuzzServerWith(tb testing.TB, cfg coordinator.Config) *fuzzServer {
	tb.Helper()
	// In memory where there is one: SQLite commits with synchronous=FULL,
	// and fsync on a shared disk would dominate the run.
	tmp := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		tmp = "/dev/shm"
	}
	dir, err := os.MkdirTemp(tmp, "fuzzcoordinator")
	if err != nil {
		tb.Fatal(err)
	}
	roots := filepath.Join(dir, "tasks")
	if err := os.MkdirAll(roots, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roots, "math.jsonl"), []byte(`{"id":"m","question":"1+1","answer":"2","env_mode":"math"}`+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry(), DataDir: filepath.Join(dir, "data")}
	cfg.TaskRoots = []string{roots}
	svc, err := coordinator.New(context.Background(), cfg, env)
	if err != nil {
		tb.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry, DrainTimeout: time.Second}, svc)
	}()
	cc, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	return &fuzzServer{
		client: pb.NewCoordinatorClient(cc), health: healthpb.NewHealthClient(cc),
		stop: func() {
			cc.Close()
			cancel()
			<-done
			os.RemoveAll(dir)
		},
	}
}

// call sends req with the typed client.
func (s *fuzzServer) call(ctx context.Context, req proto.Message) error {
	var err error
	switch r := req.(type) {
	case *pb.StartRolloutRequest:
		_, err = s.client.StartRollout(ctx, r)
	case *pb.GetRolloutRequest:
		_, err = s.client.GetRollout(ctx, r)
	case *pb.ListRolloutsRequest:
		_, err = s.client.ListRollouts(ctx, r)
	case *pb.CancelRolloutRequest:
		_, err = s.client.CancelRollout(ctx, r)
	case *pb.AddTasksRequest:
		_, err = s.client.AddTasks(ctx, r)
	case *pb.GetBatchRequest:
		_, err = s.client.GetBatch(ctx, r)
	case *pb.AckBatchRequest:
		_, err = s.client.AckBatch(ctx, r)
	case *pb.UpdateModelVersionRequest:
		_, err = s.client.UpdateModelVersion(ctx, r)
	case *pb.ListQueuedEpisodesRequest:
		_, err = s.client.ListQueuedEpisodes(ctx, r)
	}
	return err
}

// fuzzRequest builds a request of the RPC sel picks from data; ok is false
// when data is not a valid message of that type (malformed wire bytes are
// grpcserver's codec's to refuse, tested there).
func fuzzRequest(sel byte, data []byte) (method string, req proto.Message, ok bool) {
	methods := []struct {
		name string
		msg  proto.Message
	}{
		{"StartRollout", &pb.StartRolloutRequest{}},
		{"GetRollout", &pb.GetRolloutRequest{}},
		{"ListRollouts", &pb.ListRolloutsRequest{}},
		{"CancelRollout", &pb.CancelRolloutRequest{}},
		{"AddTasks", &pb.AddTasksRequest{}},
		{"GetBatch", &pb.GetBatchRequest{}},
		{"AckBatch", &pb.AckBatchRequest{}},
		{"UpdateModelVersion", &pb.UpdateModelVersionRequest{}},
		{"ListQueuedEpisodes", &pb.ListQueuedEpisodesRequest{}},
	}
	m := methods[int(sel)%len(methods)]
	if err := proto.Unmarshal(data, m.msg); err != nil {
		return "", nil, false
	}
	return m.name, m.msg, true
}

// shrink keeps valid-but-large requests cheap so that the fuzzer spends its
// time on validation, not on running big rollouts: sizes inside their
// accepted ranges are cut down, out-of-range ones are left for the
// validation to refuse; GetBatch waits 1ms, not up to an hour.
func shrink(req proto.Message) {
	switch r := req.(type) {
	case *pb.StartRolloutRequest:
		s := r.GetSpec()
		if s == nil {
			return
		}
		if s.NumEnvGroups > 8 && s.NumEnvGroups <= 1_000_000 {
			s.NumEnvGroups = 8
		}
		if s.GroupSize > 4 && s.GroupSize <= 1024 {
			s.GroupSize = 4
			s.GroupRedundancy = min(s.GroupRedundancy, 4)
		}
		for i, p := range s.NumGroupsPartition {
			if p > 4 && p <= 1_000_000 {
				s.NumGroupsPartition[i] = 4
			}
		}
	case *pb.GetBatchRequest:
		if d := r.Timeout.AsDuration(); r.Timeout == nil || (r.Timeout.IsValid() && d > 0 && d <= time.Hour) {
			r.Timeout = durationpb.New(time.Millisecond)
		}
	}
}

// FuzzCoordinatorRequests sends requests built from fuzz input to a real
// coordinator through the real interceptor chain: no input may crash it,
// get Internal or Unknown (a caller's mistake is never the server's), or
// leave it unhealthy.
func FuzzCoordinatorRequests(f *testing.F) {
	seeds := []proto.Message{
		&pb.StartRolloutRequest{RolloutId: "r1", Spec: &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "math", Domain: "math"}}, GroupSize: 2}},
		&pb.GetRolloutRequest{RolloutId: "r1", IncludeGroups: true},
		&pb.ListRolloutsRequest{State: pb.RolloutState_ROLLOUT_STATE_RUNNING},
		&pb.CancelRolloutRequest{RolloutId: "r1", Reason: "x"},
		&pb.AddTasksRequest{RolloutId: "r1", Tasks: []*pb.Task{{Id: "b", EnvMode: "math"}}},
		&pb.GetBatchRequest{RolloutId: "r1", BatchSize: 2},
		&pb.AckBatchRequest{RolloutId: "r1", BatchId: "b-1"},
		&pb.UpdateModelVersionRequest{Version: 9223372036854775807},
		&pb.ListQueuedEpisodesRequest{RolloutId: "nope"},
	}
	for i, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(i), b)
	}
	extra := []*pb.RolloutSpec{
		{TaskSource: "/dev/zero", EnvMode: "math"},
		{TaskSource: "math.jsonl", EnvMode: "math", Tags: []string{"math"}, NumGroupsPartition: []int32{2147483647}},
		{Tasks: []*pb.Task{{Id: "x", Domain: "../../tmp/x"}}, Agent: &pb.AgentConfig{ObservationType: "som"}},
	}
	for _, s := range extra {
		b, _ := proto.Marshal(&pb.StartRolloutRequest{Spec: s})
		f.Add(byte(0), b)
	}
	srv := startFuzzServer(f)
	f.Cleanup(func() { srv.stop() })
	f.Fuzz(func(t *testing.T, sel byte, data []byte) {
		method, req, ok := fuzzRequest(sel, data)
		if !ok {
			return
		}
		shrink(req)
		// A fresh coordinator now and then, so that what the accepted
		// requests built up does not slow the next ones down.
		if srv.calls++; srv.calls%2000 == 0 {
			srv.stop()
			srv = startFuzzServer(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.call(ctx, req)
		switch status.Code(err) {
		case codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.Unavailable:
			t.Fatalf("%s(%v) = %v", method, req, err)
		}
		// Healthy still: checked on every 16th call, which keeps 200,000
		// executions within two minutes on two cores.
		if srv.calls%16 == 0 {
			h, err := srv.health.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("unhealthy after %s(%v): %v, %v", method, req, h, err)
			}
		}
	})
}

// workRollout is the rollout FuzzWorkStream's runners get episodes of:
// its episode ids are workRollout-e0, -e1, ...
const workRollout = "fz"

func startWorkFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	// Episodes of a runner whose stream ends are requeued at once.
	srv := startFuzzServerWith(tb, coordinator.Config{AdoptGrace: -1})
	tasks := make([]*pb.Task, 64)
	for i := range tasks {
		tasks[i] = &pb.Task{Id: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)), EnvMode: "math"}
	}
	_, err := srv.client.StartRollout(context.Background(), &pb.StartRolloutRequest{RolloutId: workRollout,
		Spec: &pb.RolloutSpec{Tasks: tasks, GroupSize: 2, Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 1000}})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// splitMessages cuts data into WorkRequests, each prefixed by its length
// in one byte; a chunk that is not a valid message is skipped.
func splitMessages(data []byte) []*pb.WorkRequest {
	var out []*pb.WorkRequest
	for len(data) > 0 && len(out) < 32 {
		n := int(data[0])
		data = data[1:]
		n = min(n, len(data))
		m := &pb.WorkRequest{}
		if proto.Unmarshal(data[:n], m) == nil {
			out = append(out, m)
		}
		data = data[n:]
	}
	return out
}

// FuzzWorkStream plays a runner from fuzz input on a real Work stream: a
// hello, then credits, heartbeats, results and hand-backs for the episodes
// of a live rollout. Whatever it sends, the stream ends without Internal or
// Unknown once the runner closes its side, and the coordinator stays
// healthy.
func FuzzWorkStream(f *testing.F) {
	hello := func(h *pb.RunnerHello) []byte {
		b, _ := proto.Marshal(&pb.WorkRequest{Msg: &pb.WorkRequest_Hello{Hello: h}})
		return b
	}
	msgs := func(ms ...*pb.WorkRequest) []byte {
		var out []byte
		for _, m := range ms {
			b, _ := proto.Marshal(m)
			if len(b) > 255 {
				continue
			}
			out = append(append(out, byte(len(b))), b...)
		}
		return out
	}
	credit := &pb.WorkRequest{Msg: &pb.WorkRequest_Credit{Credit: &pb.Credit{FreeSlots: 4}}}
	result := func(id string, st pb.EpisodeStatus, score float64) *pb.WorkRequest {
		return &pb.WorkRequest{Msg: &pb.WorkRequest_Result{Result: &pb.EpisodeResult{Episode: &pb.Episode{EpisodeId: id, Status: st, Score: score}}}}
	}
	f.Add(hello(&pb.RunnerHello{RunnerId: "r1", Slots: 4, EnvModes: []string{"math"}}), msgs(credit,
		result(workRollout+"-e0", pb.EpisodeStatus_EPISODE_STATUS_DONE, 1),
		result(workRollout+"-e1", pb.EpisodeStatus_EPISODE_STATUS_FAILED, 0),
		&pb.WorkRequest{Msg: &pb.WorkRequest_HandBack{HandBack: &pb.HandBack{EpisodeId: workRollout + "-e2"}}},
		&pb.WorkRequest{Msg: &pb.WorkRequest_Heartbeat{Heartbeat: &pb.Heartbeat{}}}))
	f.Add(hello(&pb.RunnerHello{RunnerId: "r2", Slots: 1, RunningEpisodeIds: []string{workRollout + "-e3"}}), msgs(credit,
		result(workRollout+"-e3", pb.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED, 0), credit))
	f.Add(hello(&pb.RunnerHello{RunnerId: "r3", Slots: 4096}), msgs(
		&pb.WorkRequest{Msg: &pb.WorkRequest_Hello{Hello: &pb.RunnerHello{RunnerId: "r3", Slots: 1}}}))
	f.Add([]byte{}, []byte{})
	srv := startWorkFuzzServer(f)
	f.Cleanup(func() { srv.stop() })
	f.Fuzz(func(t *testing.T, helloBytes, data []byte) {
		first := &pb.WorkRequest{}
		if proto.Unmarshal(helloBytes, first) != nil {
			return
		}
		if srv.calls++; srv.calls%500 == 0 {
			srv.stop()
			srv = startWorkFuzzServer(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := srv.client.Work(ctx)
		if err != nil {
			t.Fatalf("open Work: %v", err)
		}
		_ = stream.Send(first)
		for _, m := range splitMessages(data) {
			if stream.Send(m) != nil {
				break // the coordinator ended the stream; Recv says why
			}
		}
		_ = stream.CloseSend()
		for {
			if _, err = stream.Recv(); err != nil {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		switch status.Code(err) {
		case codes.Internal, codes.Unknown, codes.DeadlineExceeded:
			t.Fatalf("Work(%v, %d messages) ended with %v", first, len(splitMessages(data)), err)
		}
		if srv.calls%16 == 0 {
			h, err := srv.health.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("unhealthy after a work stream: %v, %v", h, err)
			}
		}
	})
}
