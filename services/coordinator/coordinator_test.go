package coordinator_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// harness runs a real coordinator on a loopback port.
type harness struct {
	t      *testing.T
	env    daemon.Env
	cfg    coordinator.Config
	addr   string
	cc     *grpc.ClientConn
	client pb.CoordinatorClient
	stop   func()
}

func newHarness(t *testing.T, cfg coordinator.Config) *harness {
	t.Helper()
	h := &harness{t: t, env: daemontest.Env(t), cfg: cfg}
	h.start()
	t.Cleanup(h.shutdown)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	if h.cfg.SweepInterval == 0 {
		h.cfg.SweepInterval = 20 * time.Millisecond
	}
	if h.cfg.AdoptGrace == 0 {
		h.cfg.AdoptGrace = 100 * time.Millisecond
	}
	// A fresh registry per start: a restarted service registers again.
	h.env.Registry = daemon.NewRegistry()
	svc, err := coordinator.New(context.Background(), h.cfg, h.env)
	if err != nil {
		h.t.Fatalf("coordinator.New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	env := h.env
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry, DrainTimeout: 2 * time.Second}, svc)
	}()
	h.addr = lis.Addr().String()
	h.cc, err = grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.client = pb.NewCoordinatorClient(h.cc)
	h.stop = func() {
		h.cc.Close()
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("serve: %v", err)
		}
	}
}

func (h *harness) shutdown() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

func (h *harness) restart() {
	h.shutdown()
	h.start()
}

func (h *harness) runner(opts simrunner.Options) *simrunner.Runner {
	h.t.Helper()
	r, err := simrunner.Start(h.cc, opts)
	if err != nil {
		h.t.Fatalf("start runner %s: %v", opts.ID, err)
	}
	h.t.Cleanup(r.Stop)
	return r
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mathTasks(n int) []*pb.Task {
	out := make([]*pb.Task, n)
	for i := range out {
		out[i] = &pb.Task{Id: fmt.Sprintf("task-%d", i), Domain: "math", Instruction: fmt.Sprintf("%d+%d", i, i), Answer: fmt.Sprint(2 * i), EnvMode: "math"}
	}
	return out
}

// drain pulls batches until the rollout is done, acking each, and returns
// the groups in hand-out order.
func drain(t *testing.T, c pb.CoordinatorClient, id string, batchSize int32) []*pb.EpisodeGroup {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	var all []*pb.EpisodeGroup
	for {
		resp, err := c.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: id, BatchSize: batchSize, Timeout: durationpb.New(10 * time.Second)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			return all
		}
		if resp.BatchId == "" {
			t.Fatalf("GetBatch timed out with %d groups so far", len(all))
		}
		all = append(all, resp.Groups...)
		if _, err := c.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: id, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
}

func TestRolloutEndToEnd(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	score := func(a *pb.Assignment) float64 { return float64(a.Episode.Seed%2) * 0.5 }
	h.runner(simrunner.Options{ID: "r1", Slots: 3, Score: score})
	h.runner(simrunner.Options{ID: "r2", Slots: 3, Score: score})
	ctx := ctxT(t, 30*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Name: "e2e", Tasks: mathTasks(8), GroupSize: 4, BatchSize: 8, Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 100,
	}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	if got, want := ro.Progress.GroupsTotal, int64(8); got != want {
		t.Errorf("groups_total = %d, want %d", got, want)
	}
	var batches [][]*pb.EpisodeGroup
	for {
		resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 8, Timeout: durationpb.New(10 * time.Second)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			break
		}
		if got, want := len(resp.Groups), 2; got != want {
			t.Fatalf("batch has %d groups, want %d", got, want)
		}
		for _, g := range resp.Groups {
			if got, want := len(g.Episodes), 4; got != want {
				t.Errorf("group %s has %d episodes, want %d", g.GroupId, got, want)
			}
			for _, ep := range g.Episodes {
				if ep.Status != pb.EpisodeStatus_EPISODE_STATUS_DONE || ep.GroupId != g.GroupId || ep.TaskId != g.TaskId {
					t.Errorf("episode %s: status %v group %s task %s, want DONE in %s/%s", ep.EpisodeId, ep.Status, ep.GroupId, ep.TaskId, g.GroupId, g.TaskId)
				}
			}
		}
		batches = append(batches, resp.Groups)
		if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
	if got, want := len(batches), 4; got != want {
		t.Fatalf("got %d batches, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, b := range batches {
		for _, g := range b {
			if seen[g.GroupId] {
				t.Errorf("group %s handed out twice", g.GroupId)
			}
			seen[g.GroupId] = true
		}
	}
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
	if err != nil {
		t.Fatalf("GetRollout: %v", err)
	}
	p := got.Progress
	if got.State != pb.RolloutState_ROLLOUT_STATE_FINISHED || p.Done != 32 || p.GroupsConsumed != 8 || p.Queued != 0 || p.Running != 0 {
		t.Errorf("rollout %v progress %+v, want FINISHED with 32 done and 8 groups consumed", got.State, p)
	}
	for _, g := range got.Groups {
		if g.State != "consumed" || g.Done != 4 {
			t.Errorf("group %s: state %s done %d, want consumed/4", g.GroupId, g.State, g.Done)
		}
	}
}

func TestStartRolloutValidation(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 10*time.Second)
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		{"no tasks", &pb.RolloutSpec{}, "spec.tasks"},
		{"group size", &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2000}, "spec.group_size"},
		{"negative group size", &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: -1}, "spec.group_size"},
		{"redundancy", &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2, GroupRedundancy: 3}, "spec.group_redundancy"},
		{"priority", &pb.RolloutSpec{Tasks: mathTasks(1), Priority: 101}, "spec.priority"},
		{"batch size", &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 4, BatchSize: 6}, "spec.batch_size"},
		{"bad task id", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a b", EnvMode: "math"}}}, "spec.tasks[0].id"},
		{"duplicate task", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "math"}, {Id: "a", EnvMode: "math"}}}, "spec.tasks[1].id"},
		{"launch-wide per task", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "math", EnvConfig: &pb.EnvConfig{Extra: map[string]string{"action_space": "pyautogui"}}}}}, "spec.tasks[0].env_config.extra.action_space"},
		{"desktop without vmmanager", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a"}}}, "spec.tasks[0].env_mode"},
		{"env mode", &pb.RolloutSpec{Tasks: mathTasks(1), EnvMode: "quantum"}, "spec.env_mode"},
		{"unknown tag", &pb.RolloutSpec{Tasks: mathTasks(2), Tags: []string{"nope"}, NumEnvGroups: 2}, "spec.tags[0]"},
		{"partition sum", &pb.RolloutSpec{Tasks: mathTasks(2), Tags: []string{"math"}, NumGroupsPartition: []int32{3}, NumEnvGroups: 2}, "spec.num_groups_partition"},
		{"action space", &pb.RolloutSpec{Tasks: mathTasks(1), Agent: &pb.AgentConfig{ActionSpace: "telepathy"}}, "spec.agent.action_space"},
		{"staleness", &pb.RolloutSpec{Tasks: mathTasks(1), MaxStaleness: -1}, "spec.max_staleness"},
		{"timeout", &pb.RolloutSpec{Tasks: mathTasks(1), EpisodeTimeout: durationpb.New(time.Millisecond)}, "spec.episode_timeout"},
		{"service without source", &pb.RolloutSpec{Tasks: mathTasks(1), Service: true}, "spec.task_source"},
		{"missing source file", &pb.RolloutSpec{TaskSource: "/nonexistent/tasks.jsonl"}, "spec.task_source"},
		{"too many episodes", &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 1024, NumEnvGroups: 1_000_000}, "spec.num_env_groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: tt.spec})
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("StartRollout code = %v (%v), want InvalidArgument", got, err)
			}
			if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, tt.field+":") {
				t.Errorf("message %q does not name field %q", msg, tt.field)
			}
		})
	}
	_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Errorf("StartRollout without spec: code %v, want InvalidArgument", got)
	}
	list, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{})
	if err != nil {
		t.Fatalf("ListRollouts: %v", err)
	}
	if len(list.Rollouts) != 0 {
		t.Errorf("rejected rollouts left %d rollouts behind", len(list.Rollouts))
	}
	// Nothing was written either: a restart finds no rollout.
	h.restart()
	list, err = h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{})
	if err != nil {
		t.Fatalf("ListRollouts after restart: %v", err)
	}
	if len(list.Rollouts) != 0 {
		t.Errorf("rejected rollouts were persisted: %d after restart", len(list.Rollouts))
	}
}

func TestRequestErrors(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 10*time.Second)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "fixed", Spec: &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	again, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "fixed", Spec: &pb.RolloutSpec{Tasks: mathTasks(5)}})
	if err != nil || again.RolloutId != ro.RolloutId || again.NumTasks != 1 {
		t.Errorf("idempotent StartRollout = %v, %v; want the existing rollout", again, err)
	}
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"get unknown", func() error {
			_, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: "nope"})
			return err
		}, codes.NotFound},
		{"get no id", func() error {
			_, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{})
			return err
		}, codes.InvalidArgument},
		{"batch size not multiple", func() error {
			_, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: "fixed", BatchSize: 3})
			return err
		}, codes.InvalidArgument},
		{"ack unknown batch", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: "fixed", BatchId: "b-x"})
			return err
		}, codes.NotFound},
		{"trajectories without storage", func() error {
			_, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: "fixed", IncludeTrajectories: true})
			return err
		}, codes.FailedPrecondition},
		{"version not increasing", func() error {
			_, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 0})
			return err
		}, codes.InvalidArgument},
		{"gateway not configured", func() error {
			_, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 1, UpdateGateway: true})
			return err
		}, codes.FailedPrecondition},
		{"add duplicate task", func() error {
			_, err := h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: "fixed", Tasks: mathTasks(1)})
			return err
		}, codes.InvalidArgument},
		{"batch times out empty", func() error {
			resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: "fixed", BatchSize: 2, Timeout: durationpb.New(50 * time.Millisecond)})
			if err == nil && resp.BatchId != "" {
				return fmt.Errorf("got batch %s with no runner", resp.BatchId)
			}
			return err
		}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != tt.want {
				t.Errorf("code = %v, want %v", got, tt.want)
			}
		})
	}
}

// groupsStarted counts distinct groups a runner has been assigned.
func groupsStarted(as []*pb.Assignment) int {
	g := map[string]bool{}
	for _, a := range as {
		g[a.Episode.GroupId] = true
	}
	return len(g)
}

func TestRunnerDeathRequeues(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	dying := h.runner(simrunner.Options{ID: "dying", Slots: 4, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(2), GroupSize: 2}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	if err := dying.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 4 }); err != nil {
		t.Fatalf("dying runner got %d assignments: %v", len(dying.Assigned()), err)
	}
	dying.Stop()
	healthy := h.runner(simrunner.Options{ID: "healthy", Slots: 4})
	groups := drain(t, h.client, ro.RolloutId, 2)
	if got, want := len(groups), 2; got != want {
		t.Fatalf("got %d groups, want %d", got, want)
	}
	for _, g := range groups {
		for _, ep := range g.Episodes {
			if ep.Attempt != 2 || ep.RunnerId != "healthy" {
				t.Errorf("episode %s: attempt %d runner %s, want attempt 2 on healthy", ep.EpisodeId, ep.Attempt, ep.RunnerId)
			}
		}
	}
	if got := len(healthy.Assigned()); got != 4 {
		t.Errorf("healthy runner ran %d episodes, want 4", got)
	}
	r, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if r.Progress.Requeued != 4 || r.Progress.Done != 4 {
		t.Errorf("progress %+v, want 4 requeued and 4 done", r.Progress)
	}
}

func TestReconnectReadopts(t *testing.T) {
	h := newHarness(t, coordinator.Config{AdoptGrace: time.Minute})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 2, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 2 }); err != nil {
		t.Fatal(err)
	}
	ids := []string{r.Assigned()[0].Episode.EpisodeId, r.Assigned()[1].Episode.EpisodeId}
	// The stream breaks; the runner comes back still running one episode
	// (and one it no longer has an assignment for is not claimed).
	r.Stop()
	back := h.runner(simrunner.Options{ID: "r", Slots: 2, Hold: true, Running: []string{ids[0], ro.RolloutId + "-e99"}})
	if got := back.Welcome().CancelEpisodeIds; len(got) != 1 || got[0] != ro.RolloutId+"-e99" {
		t.Errorf("welcome cancels %v, want only the unknown episode", got)
	}
	// The unclaimed episode is requeued after the grace... which is a
	// minute here, so finish the claimed one and hand the other back.
	if err := back.Complete(ids[0], pb.EpisodeStatus_EPISODE_STATUS_DONE, 1); err != nil {
		t.Fatal(err)
	}
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	for got.Progress.Done == 0 && ctx.Err() == nil { // the result commits
		time.Sleep(5 * time.Millisecond)
		got, _ = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	}
	q, _ := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{RolloutId: ro.RolloutId})
	if len(q.Episodes) != 1 || q.Episodes[0].Episode.EpisodeId != ids[1] || q.Episodes[0].RunnerId != "" {
		t.Fatalf("live episodes %v, want only the orphaned %s", q.Episodes, ids[1])
	}
	if got.Progress.Done != 1 || got.Progress.Requeued != 0 || got.Progress.Running != 1 {
		t.Errorf("progress %+v, want 1 done (re-adopted, attempt 1) and 1 still waiting for its runner", got.Progress)
	}
	// The other one finished while the stream was down; its result arrives
	// on the new stream and counts.
	if err := back.Complete(ids[1], pb.EpisodeStatus_EPISODE_STATUS_DONE, 0); err != nil {
		t.Fatal(err)
	}
	groups := drain(t, h.client, ro.RolloutId, 2)
	if len(groups) != 1 {
		t.Fatalf("got %d groups, want 1", len(groups))
	}
	for _, ep := range groups[0].Episodes {
		if ep.Attempt != 1 {
			t.Errorf("episode %s attempt %d, want 1 (never rerun)", ep.EpisodeId, ep.Attempt)
		}
	}
	if got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId}); got.Progress.Requeued != 0 || got.Progress.Done != 2 {
		t.Errorf("progress %+v, want 2 done and nothing requeued", got.Progress)
	}
}

func TestSilentRunnerDropped(t *testing.T) {
	h := newHarness(t, coordinator.Config{HeartbeatInterval: time.Hour, HeartbeatTimeout: 300 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	// Heartbeats far slower than the timeout: the coordinator must drop it.
	silent := h.runner(simrunner.Options{ID: "silent", Slots: 1, Hold: true, Heartbeat: time.Hour})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	select {
	case <-silent.Done():
	case <-ctx.Done():
		t.Fatal("silent runner was never dropped")
	}
	if got := status.Code(silent.Err()); got != codes.Unavailable {
		t.Errorf("silent runner's stream ended with %v, want Unavailable", silent.Err())
	}
	h.runner(simrunner.Options{ID: "alive", Slots: 1, Heartbeat: 50 * time.Millisecond})
	groups := drain(t, h.client, ro.RolloutId, 1)
	if len(groups) != 1 || groups[0].Episodes[0].Attempt != 2 {
		t.Errorf("groups %v, want one group with attempt 2", groups)
	}
}

func TestFailuresAndRegeneration(t *testing.T) {
	tests := []struct {
		name       string
		policy     pb.GroupFailurePolicy
		wantGroups int
		wantFailed int64
	}{
		{"regenerate", pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REGENERATE, 2, 0},
		{"report", pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REPORT, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, coordinator.Config{})
			ctx := ctxT(t, 30*time.Second)
			// Task 0's first episode (seq 0) fails on every attempt.
			h.runner(simrunner.Options{ID: "r", Slots: 4, Status: func(a *pb.Assignment) pb.EpisodeStatus {
				if strings.HasSuffix(a.Episode.EpisodeId, "-e0") {
					return pb.EpisodeStatus_EPISODE_STATUS_FAILED
				}
				return pb.EpisodeStatus_EPISODE_STATUS_DONE
			}})
			ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
				Tasks: mathTasks(2), GroupSize: 2, MaxAttempts: 2, OnGroupFailure: tt.policy}})
			if err != nil {
				t.Fatalf("StartRollout: %v", err)
			}
			groups := drain(t, h.client, ro.RolloutId, 2)
			if len(groups) != tt.wantGroups {
				t.Fatalf("got %d groups, want %d", len(groups), tt.wantGroups)
			}
			for _, g := range groups {
				if len(g.Episodes) != 2 {
					t.Errorf("group %s handed out with %d episodes", g.GroupId, len(g.Episodes))
				}
				for _, ep := range g.Episodes {
					if strings.HasSuffix(ep.EpisodeId, "-e0") {
						t.Errorf("failed episode %s handed out", ep.EpisodeId)
					}
				}
			}
			r, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
			if r.Progress.GroupsFailed != tt.wantFailed || r.Progress.Failed != 1 {
				t.Errorf("progress %+v, want %d failed groups and 1 failed episode", r.Progress, tt.wantFailed)
			}
			// The failure shows in the metrics by its reason.
			families, err := h.env.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var failed float64
			for _, f := range families {
				if f.GetName() != "coordinator_rollout_failed_episodes" {
					continue
				}
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["rollout"] == ro.RolloutId && labels["reason"] == "simulated" {
						failed = m.GetGauge().GetValue()
					}
				}
			}
			if failed != 1 {
				t.Errorf("coordinator_rollout_failed_episodes{reason=simulated} = %v, want 1", failed)
			}
		})
	}
}

func TestGroupRedundancy(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	// The straggler is whichever episode reaches the runner third.
	r := h.runner(simrunner.Options{ID: "r", Slots: 3, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2, GroupRedundancy: 1}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 3 }); err != nil {
		t.Fatalf("want 3 assignments (group_size 2 + 1 redundant): %v", err)
	}
	as := r.Assigned()
	for _, a := range as[:2] {
		if err := r.Complete(a.Episode.EpisodeId, pb.EpisodeStatus_EPISODE_STATUS_DONE, 1); err != nil {
			t.Fatal(err)
		}
	}
	straggler := as[2].Episode.EpisodeId
	if err := r.WaitFor(ctx, func(_ []*pb.Assignment, _ []*pb.Episode, cs []*pb.CancelAssignment) bool { return len(cs) == 1 }); err != nil {
		t.Fatalf("straggler not cancelled: %v", err)
	}
	if c := r.Cancels()[0]; c.EpisodeId != straggler || c.Reason != "redundant" {
		t.Errorf("cancel = %v, want %s redundant", c, straggler)
	}
	groups := drain(t, h.client, ro.RolloutId, 2)
	if len(groups) != 1 || len(groups[0].Episodes) != 2 {
		t.Fatalf("groups = %v, want one group of 2", groups)
	}
	// A late result from the straggler counts for nothing.
	_ = r.Complete(straggler, pb.EpisodeStatus_EPISODE_STATUS_DONE, 1)
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if got.Progress.Done != 2 || got.Progress.Aborted != 1 {
		t.Errorf("progress %+v, want 2 done, 1 aborted", got.Progress)
	}
}

func TestSyncAdmission(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 16})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Tasks: mathTasks(6), GroupSize: 2, BatchSize: 4, Mode: pb.RolloutMode_ROLLOUT_MODE_SYNC}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	for step := 1; step <= 3; step++ {
		if err := r.WaitFor(ctx, func(_ []*pb.Assignment, res []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(res) == 4*step }); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		// The batch is ready; nothing new may start until it is consumed.
		time.Sleep(100 * time.Millisecond)
		if got, want := groupsStarted(r.Assigned()), 2*step; got != want {
			t.Fatalf("step %d: %d groups started before the batch was consumed, want %d", step, got, want)
		}
		resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 4, Timeout: durationpb.New(5 * time.Second)})
		if err != nil || len(resp.Groups) != 2 {
			t.Fatalf("step %d: GetBatch = %v, %v", step, resp, err)
		}
		if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAsyncStalenessGate(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 16})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Tasks: mathTasks(10), GroupSize: 1, BatchSize: 2, Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 1}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	// (max_staleness + 0 versions + 1) × 2 groups may start at version 0.
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, res []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(res) == 4 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := len(r.Assigned()); got != 4 {
		t.Fatalf("%d episodes started at version 0, want 4", got)
	}
	// Consuming does not open admission in async mode; a new version does.
	resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := len(r.Assigned()); got != 4 {
		t.Fatalf("%d episodes started after an ack without a new version, want 4", got)
	}
	up, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 1})
	if err != nil || up.PreviousVersion != 0 || up.Version != 1 {
		t.Fatalf("UpdateModelVersion = %v, %v", up, err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, res []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(res) == 6 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	as := r.Assigned()
	if got := len(as); got != 6 {
		t.Fatalf("%d episodes started at version 1, want 6", got)
	}
	if v := as[5].ModelVersion; v != 1 {
		t.Errorf("assignment model version %d, want 1", v)
	}
	// drop_stale at version 2: the version-0 episodes are 2 behind (> 1),
	// the version-1 ones are within the bound.
	if _, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 2}); err != nil {
		t.Fatal(err)
	}
	resp, err = h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2, DropStale: true, Timeout: durationpb.New(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.DroppedGroups != 2 {
		t.Errorf("dropped %d stale groups, want 2", resp.DroppedGroups)
	}
	for _, g := range resp.Groups {
		if v := g.Episodes[0].ModelVersions; len(v) != 1 || v[0] < 1 {
			t.Errorf("stale group %s handed out (versions %v)", g.GroupId, v)
		}
	}
}

func TestBatchRedeliveryAndAck(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 4, Score: func(a *pb.Assignment) float64 {
		return float64(a.Episode.Seed) // group 0 all 0 (zero variance), group 1 all 1
	}})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(3), GroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2, AckTimeout: durationpb.New(time.Second)})
	if err != nil || first.BatchId == "" {
		t.Fatalf("GetBatch = %v, %v", first, err)
	}
	// Not acked: after the ack timeout the same group comes back.
	again, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 6, Timeout: durationpb.New(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(r *pb.GetBatchResponse) []string {
		var out []string
		for _, g := range r.Groups {
			out = append(out, g.GroupId)
		}
		sort.Strings(out)
		return out
	}
	if got := ids(again); len(got) != 3 || !contains(got, first.Groups[0].GroupId) {
		t.Fatalf("second batch %v does not bring back %s", got, first.Groups[0].GroupId)
	}
	if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: first.BatchId}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ack of an expired, re-handed batch: %v, want FailedPrecondition", err)
	}
	if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: again.BatchId}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: again.BatchId}); err != nil {
		t.Errorf("second ack: %v, want OK", err)
	}
	done, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, Timeout: durationpb.New(time.Second)})
	if err != nil || !done.RolloutDone || len(done.Groups) != 0 {
		t.Errorf("after everything was acked GetBatch = %v, %v; want rollout_done", done, err)
	}
}

func TestDropZeroVariance(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 4, Score: func(a *pb.Assignment) float64 {
		if a.Episode.Seed == 0 {
			return 1 // group 0: every episode 1, no GRPO signal
		}
		return float64(len(a.Episode.EpisodeId) % 2) // mixed
	}})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), NumEnvGroups: 1, GroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2, DropZeroVariance: true, Timeout: durationpb.New(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.DroppedGroups != 1 || len(resp.Groups) != 0 || !resp.RolloutDone {
		t.Errorf("GetBatch = %v, want the zero-variance group dropped and the rollout done", resp)
	}
	r, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
	if r.Groups[0].State != "dropped" {
		t.Errorf("group state %s, want dropped", r.Groups[0].State)
	}
}

func TestCancelRollout(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 2, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(4)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 2 }); err != nil {
		t.Fatal(err)
	}
	got, err := h.client.CancelRollout(ctx, &pb.CancelRolloutRequest{RolloutId: ro.RolloutId, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != pb.RolloutState_ROLLOUT_STATE_CANCELLED || got.Progress.Aborted != 4 || got.Progress.Running != 0 || got.Progress.Queued != 0 {
		t.Errorf("after cancel: %v %+v, want CANCELLED with 4 aborted", got.State, got.Progress)
	}
	if err := r.WaitFor(ctx, func(_ []*pb.Assignment, _ []*pb.Episode, cs []*pb.CancelAssignment) bool { return len(cs) == 2 }); err != nil {
		t.Errorf("runner got %d cancellations, want 2", len(r.Cancels()))
	}
	q, _ := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{RolloutId: ro.RolloutId})
	if len(q.Episodes) != 0 {
		t.Errorf("%d live episodes after cancel", len(q.Episodes))
	}
	b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, Timeout: durationpb.New(time.Second)})
	if err != nil || !b.RolloutDone {
		t.Errorf("GetBatch after cancel = %v, %v; want rollout_done", b, err)
	}
}

func TestFairSharePriority(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	lo, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(40), Priority: 1}})
	if err != nil {
		t.Fatal(err)
	}
	hi, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(40), Priority: 3}})
	if err != nil {
		t.Fatal(err)
	}
	r := h.runner(simrunner.Options{ID: "r", Slots: 20, Hold: true})
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 20 }); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, a := range r.Assigned() {
		n[a.Episode.RolloutId]++
	}
	if n[hi.RolloutId] != 15 || n[lo.RolloutId] != 5 {
		t.Errorf("slots: high priority %d, low %d; want 15 and 5", n[hi.RolloutId], n[lo.RolloutId])
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
