// Tests of the bounds a careless or hostile caller (a trainer, a runner, a
// task file) meets beyond hardening_test.go's: what it may set, what an
// error quotes of it, and what the coordinator refuses before it could
// crash or store what it cannot read back.

package coordinator_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// wantField checks that err is code with a message naming field.
func wantField(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
	if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, field+":") {
		t.Errorf("message %.200q does not name field %q", msg, field)
	}
}

// rolloutCount is how many rollouts the coordinator holds.
func rolloutCount(t *testing.T, c pb.CoordinatorClient) int {
	t.Helper()
	resp, err := c.ListRollouts(ctxT(t, 10*time.Second), &pb.ListRolloutsRequest{})
	if err != nil {
		t.Fatalf("ListRollouts: %v", err)
	}
	return len(resp.Rollouts)
}

// TestEchoedInputBounded: an error about a caller's value never quotes
// all of it, however long it is.
func TestEchoedInputBounded(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name  string
		call  func() error
		field string
	}{
		{"batch_id", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: huge})
			return err
		}, "batch_id"},
		{"action_space", func() error {
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), Agent: &pb.AgentConfig{ActionSpace: huge}}})
			return err
		}, "spec.agent.action_space"},
		{"observation_type", func() error {
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), Agent: &pb.AgentConfig{ObservationType: huge}}})
			return err
		}, "spec.agent.observation_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			wantField(t, err, codes.InvalidArgument, tt.field)
			if got := len(status.Convert(err).Message()); got > 512 {
				t.Errorf("message of %d bytes echoes the input", got)
			}
		})
	}
}

// TestSpecStringsBounded: every string of a spec and of an inline task is
// bounded, whether or not the field is used; a refused request creates
// nothing.
func TestSpecStringsBounded(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	long := func(n int) string { return strings.Repeat("a", n) }
	task := func(mod func(*pb.Task)) []*pb.Task {
		ts := mathTasks(1)
		mod(ts[0])
		return ts
	}
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		// With inline tasks task_source and task_index are not read, but
		// they are stored and returned with the spec on every GetRollout.
		{"task_index", &pb.RolloutSpec{Tasks: mathTasks(1), TaskIndex: long(5 << 20)}, "spec.task_index"},
		{"task_source unused", &pb.RolloutSpec{Tasks: mathTasks(1), TaskSource: long(5 << 20)}, "spec.task_source"},
		{"answer", &pb.RolloutSpec{Tasks: task(func(t *pb.Task) { t.Answer = long(1<<20 + 1) })}, "spec.tasks[0].answer"},
		{"tag too long", &pb.RolloutSpec{Tasks: task(func(t *pb.Task) { t.Tags = []string{"ok", long(257)} })}, "spec.tasks[0].tags[1]"},
		{"tag empty", &pb.RolloutSpec{Tasks: task(func(t *pb.Task) { t.Tags = []string{""} })}, "spec.tasks[0].tags[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: tt.spec})
			wantField(t, err, codes.InvalidArgument, tt.field)
		})
	}
	if n := rolloutCount(t, h.client); n != 0 {
		t.Errorf("%d rollouts after refusals, want none", n)
	}
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId, Tasks: []*pb.Task{{Id: "b", EnvMode: "math", Answer: long(1<<20 + 1)}}})
	wantField(t, err, codes.InvalidArgument, "tasks[0].answer")
}

// TestEnvConfigWithinVMManagerBounds: an env_config override is sent to
// vmmanager with every lease of a desktop episode, so what vmmanager
// refuses (more than 32 extras, an entry over 1 KiB, a snapshot name over
// 128 bytes) is refused at StartRollout, not lease after lease.
func TestEnvConfigWithinVMManagerBounds(t *testing.T) {
	// Never reached: the pool check is skipped, the VM check passes.
	h := newHarness(t, coordinator.Config{VMManager: "127.0.0.1:1"})
	ctx := ctxT(t, 30*time.Second)
	extras := func(prefix string, n int) map[string]string {
		m := map[string]string{}
		for i := 0; i < n; i++ {
			m[prefix+strings.Repeat("k", i+1)] = "v"
		}
		return m
	}
	desktop := func(ec *pb.EnvConfig) []*pb.Task {
		return []*pb.Task{{Id: "d", EnvMode: "desktop", Instruction: "open a terminal", EnvConfig: ec}}
	}
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		{"snapshot", &pb.RolloutSpec{Tasks: desktop(&pb.EnvConfig{Snapshot: strings.Repeat("s", 129)})}, "spec.tasks[0].env_config.snapshot"},
		{"rollout snapshot", &pb.RolloutSpec{Tasks: desktop(nil), EnvConfig: &pb.EnvConfig{Snapshot: strings.Repeat("s", 129)}}, "spec.env_config.snapshot"},
		{"33 extras", &pb.RolloutSpec{Tasks: desktop(&pb.EnvConfig{Extra: extras("a", 33)})}, "spec.tasks[0].env_config.extra"},
		{"entry over 1 KiB", &pb.RolloutSpec{Tasks: desktop(&pb.EnvConfig{Extra: map[string]string{"k": strings.Repeat("v", 1024)}})}, "spec.tasks[0].env_config.extra"},
		{"merged extras", &pb.RolloutSpec{Tasks: desktop(&pb.EnvConfig{Extra: extras("t", 20)}), EnvConfig: &pb.EnvConfig{Extra: extras("r", 20)}}, "spec.tasks[0].env_config.extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: tt.spec})
			wantField(t, err, codes.InvalidArgument, tt.field)
		})
	}
	// At the bounds: accepted.
	ok := &pb.RolloutSpec{Tasks: desktop(&pb.EnvConfig{Snapshot: strings.Repeat("s", 128), Extra: extras("t", 16)}), EnvConfig: &pb.EnvConfig{Extra: extras("r", 16)}}
	if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: ok}); err != nil {
		t.Errorf("StartRollout at the bounds: %v", err)
	}
}

// TestAddTasksCheckedLikeStart: AddTasks refuses a task StartRollout would
// have refused in the same rollout (a desktop task for a tool_calls agent),
// and adds nothing.
func TestAddTasksCheckedLikeStart(t *testing.T) {
	h := newHarness(t, coordinator.Config{VMManager: "127.0.0.1:1"})
	ctx := ctxT(t, 30*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Tasks: mathTasks(1), Agent: &pb.AgentConfig{ActionSpace: "tool_calls"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId, Tasks: []*pb.Task{
		{Id: "m", EnvMode: "math", Instruction: "1+1"}, {Id: "d", EnvMode: "desktop", Instruction: "open a terminal"}}})
	wantField(t, err, codes.InvalidArgument, "tasks[1].env_mode")
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil || got.NumTasks != 1 {
		t.Errorf("GetRollout = %v tasks, %v; want the refused AddTasks to add none", got.GetNumTasks(), err)
	}
}

// TestServicePollChecksTasks: a task that appears in a service rollout's
// source is checked as StartRollout checks its tasks: a desktop task on a
// coordinator without vmmanager is skipped (it used to be added and to
// crash the coordinator when a runner took it), and polling goes on.
func TestServicePollChecksTasks(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	src := filepath.Join(h.env.DataDir, "tasks", "tasks.jsonl")
	if err := os.WriteFile(src, []byte(`{"id":"a","question":"1+1","env_mode":"math"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.runner(simrunner.Options{ID: "r", Slots: 4})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: src, EnvMode: "math", Service: true,
		PollInterval: durationpb.New(time.Second), Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte(`{"id":"a","question":"1+1","env_mode":"math"}`+"\n"+
		`{"id":"d","instruction":"open a terminal","env_mode":"desktop"}`+"\n"+
		`{"id":"c","question":"2+2","env_mode":"math"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got *pb.Rollout
	for got.GetNumTasks() < 2 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		got, err = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatalf("GetRollout: %v", err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // a further poll, and a dispatch
	got, err = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, g := range got.Groups {
		tasks = append(tasks, g.TaskId)
	}
	if strings.Join(tasks, ",") != "a,c" || got.State != pb.RolloutState_ROLLOUT_STATE_RUNNING {
		t.Errorf("rollout %v with groups for tasks %v, want RUNNING with a,c", got.State, tasks)
	}
	h.healthy(t)
}

// blockingGateway answers UpdateWeights once release is closed.
type blockingGateway struct {
	pb.ModelGatewayClient
	called  chan int64
	release chan struct{}
}

func (g *blockingGateway) UpdateWeights(ctx context.Context, in *pb.UpdateWeightsRequest, _ ...grpc.CallOption) (*pb.UpdateWeightsResponse, error) {
	g.called <- in.Version
	<-g.release
	return &pb.UpdateWeightsResponse{}, nil
}

// TestUpdateModelVersionSerialized: while one update waits for the
// gateway, another cannot slip in and make the first one's recording
// fail after the gateway already loaded its weights.
func TestUpdateModelVersionSerialized(t *testing.T) {
	gw := &blockingGateway{called: make(chan int64, 2), release: make(chan struct{})}
	h := newHarness(t, coordinator.Config{GatewayClient: gw})
	ctx := ctxT(t, 20*time.Second)
	type result struct {
		resp *pb.UpdateModelVersionResponse
		err  error
	}
	var wg sync.WaitGroup
	update := func(req *pb.UpdateModelVersionRequest, out *result) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.resp, out.err = h.client.UpdateModelVersion(ctx, req)
		}()
	}
	var withGateway, plain result
	update(&pb.UpdateModelVersionRequest{Version: 5, UpdateGateway: true, Source: "/ckpt/5"}, &withGateway)
	if v := <-gw.called; v != 5 {
		t.Fatalf("gateway asked for version %d, want 5", v)
	}
	update(&pb.UpdateModelVersionRequest{Version: 10}, &plain)
	time.Sleep(300 * time.Millisecond)
	close(gw.release)
	wg.Wait()
	if withGateway.err != nil {
		t.Errorf("update 5 with the gateway: %v (the gateway loaded version 5 but the coordinator did not record it)", withGateway.err)
	}
	if plain.err != nil || plain.resp.PreviousVersion != 5 {
		t.Errorf("update 10 = %v, %v; want it after 5 (previous version 5)", plain.resp, plain.err)
	}
}

// TestCancelReasonStorable: a reason PostgreSQL cannot store in a text
// column (a NUL byte) is refused before the rollout changes, instead of
// failing the group commit it joins.
func TestCancelReasonStorable(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.CancelRollout(ctx, &pb.CancelRolloutRequest{RolloutId: ro.RolloutId, Reason: "bad\x00reason"})
	wantField(t, err, codes.InvalidArgument, "reason")
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil || got.State != pb.RolloutState_ROLLOUT_STATE_RUNNING {
		t.Errorf("after a refused cancel: %v, %v; want RUNNING", got.GetState(), err)
	}
}

// TestTaskFileInvalidUTF8: a task file with bytes that are not UTF-8 is
// refused at StartRollout. encoding/json accepts them, but the task's
// spec_json could then not be marshalled: not stored, and every
// assignment of it broke its runner's Work stream.
func TestTaskFileInvalidUTF8(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	src := filepath.Join(h.env.DataDir, "tasks", "bad.jsonl")
	if err := os.WriteFile(src, []byte(`{"id":"a","question":"1+1","env_mode":"math"}`+"\n"+
		`{"id":"b","question":"2+2","env_mode":"math","note":"caf`+"\xe9"+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: src, EnvMode: "math"}})
	wantField(t, err, codes.InvalidArgument, "spec.task_source")
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "line 2") || !strings.Contains(msg, "UTF-8") {
		t.Errorf("message %q does not say line 2 is not UTF-8", msg)
	}
	if n := rolloutCount(t, h.client); n != 0 {
		t.Errorf("%d rollouts after the refusal, want none", n)
	}
}

// TestPollErrorValidUTF8: a service rollout failed by its task source
// keeps an error that can be sent (a file name that is not UTF-8 in it
// made every ListRollouts answer unmarshallable), and its episodes are
// aborted as a cancelled rollout's are.
func TestPollErrorValidUTF8(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	dir := filepath.Join(h.env.DataDir, "tasks", "svc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(`{"id":"a","question":"1+1","env_mode":"math"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: dir, EnvMode: "math", Service: true,
		PollInterval: durationpb.New(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b\xff.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got *pb.Rollout
	for got.GetState() != pb.RolloutState_ROLLOUT_STATE_FAILED && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		got, err = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatalf("GetRollout: %v", err)
		}
	}
	if !strings.Contains(got.GetError(), "task source unreadable") {
		t.Errorf("rollout %v error %q, want FAILED for its task source", got.GetState(), got.GetError())
	}
	// Its episodes end with it: none stays queued (holding a place, and a
	// VM lease for a desktop task) for a rollout that will never finish.
	if p := got.GetProgress(); p.GetQueued() != 0 || p.GetRunning() != 0 || p.GetAborted() == 0 {
		t.Errorf("failed rollout's progress %v, want its episodes aborted", p)
	}
	h.healthy(t)
}

// bigStorage answers GetEpisode with about size bytes of steps.
type bigStorage struct {
	pb.StorageClient
	size  int
	mu    sync.Mutex
	calls int
}

func (s *bigStorage) GetEpisode(ctx context.Context, in *pb.GetEpisodeRequest, _ ...grpc.CallOption) (*pb.GetEpisodeResponse, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return &pb.GetEpisodeResponse{Steps: []*pb.Step{{EpisodeId: in.EpisodeId, Error: strings.Repeat("x", s.size)}}}, nil
}

// TestTrajectoriesBounded: include_trajectories stops gathering steps once
// the answer could no longer be sent (64 MiB), with an error naming the
// field, instead of holding every episode's steps in memory first; the
// batch's groups go back at once, not after its ack timeout.
func TestTrajectoriesBounded(t *testing.T) {
	st := &bigStorage{size: 10 << 20}
	h := newHarness(t, coordinator.Config{StorageClient: st})
	ctx := ctxT(t, 60*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 4})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(20)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 20, IncludeTrajectories: true,
		Timeout: durationpb.New(20 * time.Second), AckTimeout: durationpb.New(time.Hour)})
	wantField(t, err, codes.FailedPrecondition, "include_trajectories")
	if st.calls > 7 {
		t.Errorf("storage asked for %d episodes of 10 MiB, want it to stop past 64 MiB", st.calls)
	}
	// Smaller batches fit at once: the refused batch, which its caller
	// never saw and cannot ack, holds none of the 20 groups for its hour.
	b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2, IncludeTrajectories: true,
		Timeout: durationpb.New(5 * time.Second)}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil || len(b.Groups) != 2 || len(b.Groups[0].Trajectories) != 1 {
		t.Errorf("GetBatch of 2 after the refusal = %d groups, %v; want 2 groups with their steps", len(b.GetGroups()), err)
	}
}

// TestDesktopWithoutVMManagerAfterRestart: desktop episodes restored by a
// coordinator restarted without --vmmanager wait for one instead of
// crashing the coordinator when a runner takes them.
func TestDesktopWithoutVMManagerAfterRestart(t *testing.T) {
	h := newHarness(t, coordinator.Config{VMManager: "127.0.0.1:1"})
	ctx := ctxT(t, 30*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: []*pb.Task{
		{Id: "d", EnvMode: "desktop", Instruction: "open a terminal"}, {Id: "m", EnvMode: "math", Instruction: "1+1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.VMManager = ""
	h.restart()
	r := h.runner(simrunner.Options{ID: "r", Slots: 2})
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 1 }); err != nil {
		t.Fatalf("math episode not assigned: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // further dispatch rounds
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil || got.Progress.Queued != 1 {
		t.Errorf("GetRollout = %v, %v; want the desktop episode still queued", got.GetProgress(), err)
	}
	if a := r.Assigned(); a[0].Task.Id != "m" {
		t.Errorf("assigned task %s, want m", a[0].Task.Id)
	}
	h.healthy(t)
}

// TestResultFieldsBounded: every field of a runner's result that is stored
// and handed out in batches is bounded; a result past a bound fails its
// attempt (bad_result) instead of reaching a batch.
func TestResultFieldsBounded(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	stream, err := h.client.Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *pb.WorkRequest) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.WorkRequest{Msg: &pb.WorkRequest_Hello{Hello: &pb.RunnerHello{RunnerId: "raw", Slots: 1}}})
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("welcome: %v", err)
	}
	labels := map[string]string{}
	for i := 0; i < 65; i++ {
		labels[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name  string
		mod   func(*pb.Episode)
		field string
	}{
		{"labels", func(e *pb.Episode) { e.Labels = labels }, "labels"},
		{"label value", func(e *pb.Episode) { e.Labels = map[string]string{"k": strings.Repeat("v", 1025)} }, "labels"},
		{"instruction", func(e *pb.Episode) { e.Instruction = strings.Repeat("x", 1<<20+1) }, "instruction"},
		{"task_id", func(e *pb.Episode) { e.TaskId = strings.Repeat("x", 257) }, "task_id"},
		{"recording inline", func(e *pb.Episode) { e.Recording = &pb.BlobRef{MediaType: "video/mp4", Data: make([]byte, 2<<20)} }, "recording"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "res-" + strings.ReplaceAll(tt.name, " ", "-")
			if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: id, Spec: &pb.RolloutSpec{
				Tasks: mathTasks(1), MaxAttempts: 1, OnGroupFailure: pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REPORT}}); err != nil {
				t.Fatal(err)
			}
			send(&pb.WorkRequest{Msg: &pb.WorkRequest_Credit{Credit: &pb.Credit{FreeSlots: 1}}})
			var a *pb.Assignment
			for a == nil {
				m, err := stream.Recv()
				if err != nil {
					t.Fatalf("assignment %d: %v", i, err)
				}
				a = m.GetAssignment()
			}
			res := &pb.Episode{EpisodeId: a.Episode.EpisodeId, Attempt: a.Episode.Attempt, Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1}
			tt.mod(res)
			send(&pb.WorkRequest{Msg: &pb.WorkRequest_Result{Result: &pb.EpisodeResult{Episode: res}}})
			var got *pb.Rollout
			for got.GetState() != pb.RolloutState_ROLLOUT_STATE_FINISHED && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				got, err = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id, IncludeGroups: true})
				if err != nil {
					t.Fatal(err)
				}
			}
			if g := got.Groups[0]; g.State != "failed" || !strings.HasPrefix(g.Error, "bad_result: result."+tt.field+":") {
				t.Errorf("group %s %.100q, want failed with bad_result naming result.%s", g.State, g.Error, tt.field)
			}
		})
	}
}

// TestBatchAnswerBounded: a batch whose answer would pass the 64 MiB a
// message may carry is refused before it is reserved, naming batch_size,
// and its groups come in smaller batches. It used to be reserved and then
// fail to send (ResourceExhausted), its groups out of reach until the ack
// timeout brought them back to fail again.
func TestBatchAnswerBounded(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 60*time.Second)
	// A field this coordinator does not know (a newer runner's) is handed
	// out as it came, so nothing can be shed to make the batch fit.
	unknown := protowire.AppendBytes(protowire.AppendTag(nil, 1000, protowire.BytesType), make([]byte, 1<<20))
	r := h.runner(simrunner.Options{ID: "r", Slots: 8, Finish: func(_ *pb.Assignment, ep *pb.Episode) {
		ep.ProtoReflect().SetUnknown(unknown)
	}})
	const n = 70
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(n), GroupSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(ctx, func(_ []*pb.Assignment, res []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(res) == n }); err != nil {
		t.Fatal(err)
	}
	big := grpc.MaxCallRecvMsgSize(64 << 20)
	_, err = h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: n, Timeout: durationpb.New(10 * time.Second)}, big)
	wantField(t, err, codes.FailedPrecondition, "batch_size")
	if got := trimmedGroups(t, h); got != 0 {
		t.Errorf("coordinator_batch_groups_trimmed_total = %v after a refused batch, want 0", got)
	}
	got := 0
	for got < n {
		b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: int32(min(32, n-got)), Timeout: durationpb.New(time.Second)}, big)
		if err != nil || len(b.Groups) == 0 {
			t.Fatalf("GetBatch after %d of %d groups = %d groups, %v; want the rest in smaller batches", got, n, len(b.GetGroups()), err)
		}
		if u := b.Groups[0].Episodes[0].ProtoReflect().GetUnknown(); len(u) != len(unknown) {
			t.Errorf("episode handed out with %d bytes of unknown fields, want %d", len(u), len(unknown))
		}
		got += len(b.Groups)
		if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: b.BatchId}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchShedsFieldsToFit: a batch that would pass the 64 MiB an answer
// carries only because of fields storage also keeps goes out without them,
// named in omitted_fields, rather than being refused: refused, a group too
// large alone would wait at the head of the queue and fail every GetBatch.
func TestBatchShedsFieldsToFit(t *testing.T) {
	tests := []struct {
		name      string
		groupSize int32
		groups    int
		finish    func(ep *pb.Episode)
		want      []string
	}{
		{"final answers, many groups", 1, 70, func(ep *pb.Episode) { ep.FinalAnswer = strings.Repeat("x", 1<<20) },
			[]string{"system_prompt", "instruction", "evaluator_details_json", "final_answer"}},
		{"one group alone too large", 80, 1, func(ep *pb.Episode) {
			ep.SystemPrompt = strings.Repeat("p", 900<<10)
			ep.FinalAnswer = "42"
		}, []string{"system_prompt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, coordinator.Config{})
			ctx := ctxT(t, 60*time.Second)
			r := h.runner(simrunner.Options{ID: "r", Slots: 8, Finish: func(_ *pb.Assignment, ep *pb.Episode) { tt.finish(ep) }})
			n := int(tt.groupSize) * tt.groups
			ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
				Tasks: mathTasks(tt.groups), GroupSize: tt.groupSize, BatchSize: int32(n)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.WaitFor(ctx, func(_ []*pb.Assignment, res []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(res) == n }); err != nil {
				t.Fatal(err)
			}
			b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: int32(n), Timeout: durationpb.New(10 * time.Second)},
				grpc.MaxCallRecvMsgSize(64<<20))
			if err != nil {
				t.Fatalf("GetBatch of %d groups: %v; want them without the fields storage keeps", tt.groups, err)
			}
			if len(b.Groups) != tt.groups {
				t.Fatalf("GetBatch = %d groups, want %d", len(b.Groups), tt.groups)
			}
			for _, g := range b.Groups {
				if !slices.Equal(g.OmittedFields, tt.want) {
					t.Errorf("group %s omitted_fields = %v, want %v", g.GroupId, g.OmittedFields, tt.want)
				}
				for _, ep := range g.Episodes {
					if ep.Status != pb.EpisodeStatus_EPISODE_STATUS_DONE || ep.TaskId == "" || ep.EpisodeId == "" {
						t.Errorf("episode %q of task %q handed out as %v, want the fields that were not omitted kept", ep.EpisodeId, ep.TaskId, ep.Status)
					}
					if ep.SystemPrompt != "" || (slices.Contains(tt.want, "final_answer") && ep.FinalAnswer != "") {
						t.Errorf("episode %s kept an omitted field", ep.EpisodeId)
					}
					if !slices.Contains(tt.want, "final_answer") && ep.FinalAnswer != "42" {
						t.Errorf("episode %s final_answer = %q, want it kept", ep.EpisodeId, ep.FinalAnswer)
					}
				}
			}
			if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: b.BatchId}); err != nil {
				t.Fatal(err)
			}
			// Operators see it without reading batches.
			if got := trimmedGroups(t, h); got != float64(tt.groups) {
				t.Errorf("coordinator_batch_groups_trimmed_total = %v, want %d", got, tt.groups)
			}
		})
	}
}

// trimmedGroups reads coordinator_batch_groups_trimmed_total.
func trimmedGroups(t *testing.T, h *harness) float64 {
	t.Helper()
	families, err := h.env.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "coordinator_batch_groups_trimmed_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("coordinator_batch_groups_trimmed_total not registered")
	return 0
}
