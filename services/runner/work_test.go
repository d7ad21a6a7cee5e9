package runner_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

// testCoordinator is the server side of Coordinator.Work, driven by the
// test over a real gRPC stream.
type testCoordinator struct {
	rmv1.UnimplementedCoordinatorServer
	streams chan *coordStream
}

type coordStream struct {
	send func(*rmv1.WorkResponse) error
	recv chan *rmv1.WorkRequest
	end  chan struct{}
}

func (c *testCoordinator) Work(stream grpc.BidiStreamingServer[rmv1.WorkRequest, rmv1.WorkResponse]) error {
	cs := &coordStream{send: stream.Send, recv: make(chan *rmv1.WorkRequest, 100), end: make(chan struct{})}
	go func() {
		defer close(cs.recv)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			cs.recv <- m
		}
	}()
	c.streams <- cs
	select {
	case <-cs.end:
		return status.Error(codes.Unavailable, "coordinator going away")
	case <-stream.Context().Done():
		return nil
	}
}

func startCoordinator(t *testing.T) (*testCoordinator, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCoordinator{streams: make(chan *coordStream, 4)}
	s := grpc.NewServer()
	rmv1.RegisterCoordinatorServer(s, c)
	go s.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)
	return c, lis.Addr().String()
}

// expect reads the stream until a message satisfies ok.
func (cs *coordStream) expect(t *testing.T, what string, ok func(*rmv1.WorkRequest) bool) *rmv1.WorkRequest {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, open := <-cs.recv:
			if !open {
				t.Fatalf("stream closed while waiting for %s", what)
			}
			if ok(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s within 30s", what)
		}
	}
}

func (cs *coordStream) resultOf(t *testing.T, id string) *rmv1.Episode {
	t.Helper()
	return cs.expect(t, "result of "+id, func(m *rmv1.WorkRequest) bool {
		return m.GetResult().GetEpisode().GetEpisodeId() == id
	}).GetResult().GetEpisode()
}

func mathAssignment(id string) *rmv1.WorkResponse {
	return &rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Assignment{Assignment: &rmv1.Assignment{
		Episode: &rmv1.Episode{EpisodeId: id, RolloutId: "r1", GroupId: "g1", TaskId: "math-apples", Attempt: 1},
		Task: &rmv1.Task{Id: "math-apples", Domain: "math", EnvMode: "math", Answer: "252",
			Instruction: "A crate holds 12 boxes and each box holds 7 apples. How many apples are in 3 crates?"},
		Agent: &rmv1.AgentConfig{MaxTurns: 5, EvaluationMetric: "numeric_match"},
	}}}
}

// stuckAssignment is a desktop episode whose guest accepts connections and
// never answers, so it stays in setup until it is cancelled.
func stuckAssignment(t *testing.T, id string) *rmv1.WorkResponse {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return &rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Assignment{Assignment: &rmv1.Assignment{
		Episode: &rmv1.Episode{EpisodeId: id, RolloutId: "r1", Attempt: 1},
		Task:    &rmv1.Task{Id: "stuck", EnvMode: "desktop", Instruction: "wait", SpecJson: `{"id":"stuck","instruction":"wait","evaluator":{"func":"infeasible"}}`},
		Agent:   &rmv1.AgentConfig{MaxTurns: 1},
		Lease:   &rmv1.Lease{LeaseId: "l1", VmId: "vm1", Endpoint: "http://" + lis.Addr().String()},
	}}}
}

// TestWorkLoop drives a runner through a real Work stream: hello, credits,
// an episode and its result, heartbeats, an operator cancel through the
// Runner API, a broken stream and the reconnect, then the drain.
func TestWorkLoop(t *testing.T) {
	coord, coordAddr := startCoordinator(t)
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	storeAddr, _ := startStorage(t)
	env := daemontest.Env(t)
	svc, err := runner.NewWithConns(context.Background(), runner.Config{Slots: 2, RunnerID: "runner-a", CacheDir: t.TempDir()}, env,
		runner.Conns{Coordinator: conn(t, coordAddr), Gateway: conn(t, gw.Addr), Storage: conn(t, storeAddr)})
	if err != nil {
		t.Fatal(err)
	}
	api := rmv1.NewRunnerClient(conn(t, daemontest.Serve(t, env, svc)))
	ctx := ctxT(t, 2*time.Minute)

	cs := <-coord.streams
	hello := cs.expect(t, "hello", func(m *rmv1.WorkRequest) bool { return m.GetHello() != nil }).GetHello()
	if hello.GetRunnerId() != "runner-a" || hello.GetSlots() != 2 {
		t.Fatalf("hello = %v", hello)
	}
	if err := cs.send(&rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Welcome{Welcome: &rmv1.Welcome{RunnerId: "runner-a", HeartbeatInterval: durationpb.New(100 * time.Millisecond)}}}); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "credit of 2", func(m *rmv1.WorkRequest) bool { return m.GetCredit() != nil && m.GetCredit().GetFreeSlots() == 2 })

	// An episode runs and its result comes back, then the slot is free again.
	if err := cs.send(mathAssignment("e1")); err != nil {
		t.Fatal(err)
	}
	ep := cs.resultOf(t, "e1")
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 || ep.GetRunnerId() != "runner-a" {
		t.Fatalf("result = %v", ep)
	}
	cs.expect(t, "credit back to 2", func(m *rmv1.WorkRequest) bool { return m.GetCredit().GetFreeSlots() == 2 })
	cs.expect(t, "heartbeat", func(m *rmv1.WorkRequest) bool { return m.GetHeartbeat() != nil })

	// An operator cancels a stuck episode through the Runner API.
	if err := cs.send(stuckAssignment(t, "e2")); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "heartbeat with e2", func(m *rmv1.WorkRequest) bool {
		eps := m.GetHeartbeat().GetEpisodes()
		return len(eps) == 1 && eps[0].GetEpisodeId() == "e2" && eps[0].GetPhase() == "setup"
	})
	list, err := api.ListEpisodes(ctx, &rmv1.ListRunnerEpisodesRequest{})
	if err != nil || len(list.GetEpisodes()) != 1 || list.GetEpisodes()[0].GetVmId() != "vm1" {
		t.Fatalf("ListEpisodes = %v, %v", list, err)
	}
	if _, err := api.CancelEpisode(ctx, &rmv1.CancelEpisodeRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CancelEpisode without id: %v, want InvalidArgument", err)
	}
	if _, err := api.CancelEpisode(ctx, &rmv1.CancelEpisodeRequest{EpisodeId: strings.Repeat("e", 10000)}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "episode_id") {
		t.Errorf("CancelEpisode with a 10 KB id: %v, want InvalidArgument naming episode_id", err)
	}
	if _, err := api.CancelEpisode(ctx, &rmv1.CancelEpisodeRequest{EpisodeId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("CancelEpisode of an unknown episode: %v, want NotFound", err)
	}
	if _, err := api.CancelEpisode(ctx, &rmv1.CancelEpisodeRequest{EpisodeId: "e2", Reason: "operator"}); err != nil {
		t.Fatal(err)
	}
	if ep := cs.resultOf(t, "e2"); ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_ABORTED {
		t.Errorf("cancelled episode reported %s, want ABORTED", ep.GetStatus())
	}
	// A coordinator cancel works the same way.
	if err := cs.send(stuckAssignment(t, "e3")); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "heartbeat with e3", func(m *rmv1.WorkRequest) bool { return len(m.GetHeartbeat().GetEpisodes()) == 1 })
	if err := cs.send(&rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Cancel{Cancel: &rmv1.CancelAssignment{EpisodeId: "e3", Reason: "redundant"}}}); err != nil {
		t.Fatal(err)
	}
	if ep := cs.resultOf(t, "e3"); ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_ABORTED || ep.GetError() == "" {
		t.Errorf("cancelled episode reported %s %q, want ABORTED with the reason", ep.GetStatus(), ep.GetError())
	}

	// The stream breaks while an episode runs: the runner reconnects and
	// says the episode still runs.
	if err := cs.send(stuckAssignment(t, "e4")); err != nil {
		t.Fatal(err)
	}
	cs.expect(t, "heartbeat with e4", func(m *rmv1.WorkRequest) bool { return len(m.GetHeartbeat().GetEpisodes()) == 1 })
	close(cs.end)
	var cs2 *coordStream
	select {
	case cs2 = <-coord.streams:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	hello = cs2.expect(t, "hello after reconnect", func(m *rmv1.WorkRequest) bool { return m.GetHello() != nil }).GetHello()
	if ids := hello.GetRunningEpisodeIds(); len(ids) != 1 || ids[0] != "e4" {
		t.Errorf("running episodes in hello = %v, want [e4]", ids)
	}
	if err := cs2.send(&rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Welcome{Welcome: &rmv1.Welcome{RunnerId: "runner-a", HeartbeatInterval: durationpb.New(100 * time.Millisecond)}}}); err != nil {
		t.Fatal(err)
	}
	cs2.expect(t, "credit of 1", func(m *rmv1.WorkRequest) bool { return m.GetCredit() != nil && m.GetCredit().GetFreeSlots() == 1 })
	st, err := api.GetStatus(ctx, &rmv1.GetStatusRequest{})
	if err != nil || st.GetReconnects() < 1 || !st.GetConnected() || st.GetBusy() != 1 || st.GetEpisodesFinished() != 3 || st.GetEpisodesFailed() != 2 {
		t.Errorf("GetStatus = %v, %v", st, err)
	}

	// Drain: no new work, and what cannot finish in time is handed back.
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := svc.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	cs2.expect(t, "credit of 0", func(m *rmv1.WorkRequest) bool { return m.GetCredit() != nil && m.GetCredit().GetFreeSlots() == 0 })
	hb := cs2.expect(t, "hand-back of e4", func(m *rmv1.WorkRequest) bool { return m.GetHandBack() != nil }).GetHandBack()
	if hb.GetEpisodeId() != "e4" {
		t.Errorf("hand-back of %q, want e4", hb.GetEpisodeId())
	}
	if err := cs2.send(mathAssignment("e5")); err != nil {
		t.Fatal(err)
	}
	hb = cs2.expect(t, "hand-back of e5", func(m *rmv1.WorkRequest) bool { return m.GetHandBack() != nil }).GetHandBack()
	if hb.GetEpisodeId() != "e5" || hb.GetReason() != "runner draining" {
		t.Errorf("hand-back = %v, want e5 refused while draining", hb)
	}
	if st, err := api.GetStatus(ctx, &rmv1.GetStatusRequest{}); err != nil || !st.GetDraining() || st.GetBusy() != 0 {
		t.Errorf("GetStatus after drain = %v, %v", st, err)
	}
}

// TestStorageFailureIsNotDone: an episode whose trajectory storage did not
// acknowledge is not reported DONE (the coordinator would count an episode
// storage never got) but FAILED, so the coordinator runs it again. Found by
// the compose chaos test (cli/e2e) killing storage mid-rollout.
func TestStorageFailureIsNotDone(t *testing.T) {
	coord, coordAddr := startCoordinator(t)
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	// A gRPC server without the storage service: every append is refused.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	noStorage := grpc.NewServer()
	go noStorage.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(noStorage.Stop)
	env := daemontest.Env(t)
	svc, err := runner.NewWithConns(context.Background(), runner.Config{Slots: 1, RunnerID: "runner-s", CacheDir: t.TempDir()}, env,
		runner.Conns{Coordinator: conn(t, coordAddr), Gateway: conn(t, gw.Addr), Storage: conn(t, lis.Addr().String())})
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Serve(t, env, svc)

	cs := <-coord.streams
	cs.expect(t, "hello", func(m *rmv1.WorkRequest) bool { return m.GetHello() != nil })
	if err := cs.send(&rmv1.WorkResponse{Msg: &rmv1.WorkResponse_Welcome{Welcome: &rmv1.Welcome{RunnerId: "runner-s", HeartbeatInterval: durationpb.New(100 * time.Millisecond)}}}); err != nil {
		t.Fatal(err)
	}
	if err := cs.send(mathAssignment("e1")); err != nil {
		t.Fatal(err)
	}
	ep := cs.resultOf(t, "e1")
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "storage_unacked" {
		t.Fatalf("result %s %q (%s), want FAILED storage_unacked", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
	}
}
