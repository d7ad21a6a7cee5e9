package coordinator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestEpisodeDeadline(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// Heartbeats run on real time; keep the fake jumps from looking like
	// silence.
	h := newHarness(t, coordinator.Config{Clock: clk, HeartbeatTimeout: time.Hour})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 1, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), MaxAttempts: 2,
		EpisodeTimeout: durationpb.New(time.Minute), OnGroupFailure: pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REPORT}})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == attempt }); err != nil {
			t.Fatalf("attempt %d not assigned: %v", attempt, err)
		}
		a := r.Assigned()[attempt-1]
		if a.Episode.Attempt != int32(attempt) || !a.Deadline.AsTime().Equal(clk.Now().Add(time.Minute)) {
			t.Errorf("assignment attempt %d deadline %v, want attempt %d due %v", a.Episode.Attempt, a.Deadline.AsTime(), attempt, clk.Now().Add(time.Minute))
		}
		clk.Advance(61 * time.Second)
		if err := r.WaitFor(ctx, func(_ []*pb.Assignment, _ []*pb.Episode, cs []*pb.CancelAssignment) bool { return len(cs) == attempt }); err != nil {
			t.Fatalf("attempt %d not cancelled at its deadline: %v", attempt, err)
		}
		if c := r.Cancels()[attempt-1]; c.Reason != "deadline" {
			t.Errorf("cancel reason %q, want deadline", c.Reason)
		}
	}
	if b := drain(t, h.client, ro.RolloutId, 1); len(b) != 0 {
		t.Errorf("timed-out group handed out: %v", b)
	}
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if got.Progress.Failed != 1 || got.Progress.Requeued != 1 || got.Progress.GroupsFailed != 1 {
		t.Errorf("progress %+v, want 1 requeue then 1 failed episode and group", got.Progress)
	}
}

func TestServiceModePollsTaskSource(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	// In the default task root, the data directory's tasks/.
	src := filepath.Join(h.env.DataDir, "tasks", "tasks.jsonl")
	if err := os.WriteFile(src, []byte("{\"id\":\"a\",\"question\":\"1+1\",\"answer\":\"2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.runner(simrunner.Options{ID: "r", Slots: 2})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		TaskSource: src, EnvMode: "math", Service: true, PollInterval: durationpb.New(time.Second), GroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	take := func() *pb.EpisodeGroup {
		t.Helper()
		b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 2, Timeout: durationpb.New(10 * time.Second)})
		if err != nil || len(b.Groups) != 1 {
			t.Fatalf("GetBatch = %v, %v; want one group", b, err)
		}
		if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: b.BatchId}); err != nil {
			t.Fatal(err)
		}
		return b.Groups[0]
	}
	if g := take(); g.TaskId != "a" {
		t.Errorf("first group's task %s, want a", g.TaskId)
	}
	// New lines appear in the source: the rollout picks them up.
	if err := os.WriteFile(src, []byte("{\"id\":\"a\"}\n{\"id\":\"b\",\"question\":\"2+2\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g := take(); g.TaskId != "b" {
		t.Errorf("second group's task %s, want b", g.TaskId)
	}
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if got.State != pb.RolloutState_ROLLOUT_STATE_RUNNING || got.NumTasks != 2 {
		t.Errorf("service rollout %v with %d tasks, want RUNNING with 2", got.State, got.NumTasks)
	}
	// Service mode survives a restart and keeps polling.
	h.restart()
	h.runner(simrunner.Options{ID: "r", Slots: 2})
	if err := os.WriteFile(src, []byte("{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g := take(); g.TaskId != "c" {
		t.Errorf("group after restart: task %s, want c", g.TaskId)
	}
}

func TestAddTasks(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "r", Slots: 2, Hold: true})
	// Async: in sync mode the added group would wait for the first batch's
	// ack (batch_size defaults to the groups at start).
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), GroupSize: 2,
		Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10}})
	if err != nil {
		t.Fatal(err)
	}
	add, err := h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId, Tasks: []*pb.Task{{Id: "extra", EnvMode: "math"}}})
	if err != nil || add.Groups != 1 || add.Episodes != 2 {
		t.Fatalf("AddTasks = %v, %v; want 1 group of 2", add, err)
	}
	for len(r.Assigned()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	for _, a := range r.Assigned() {
		_ = r.Complete(a.Episode.EpisodeId, pb.EpisodeStatus_EPISODE_STATUS_DONE, 1)
	}
	for len(r.Assigned()) < 4 {
		time.Sleep(5 * time.Millisecond)
	}
	for _, a := range r.Assigned()[2:] {
		_ = r.Complete(a.Episode.EpisodeId, pb.EpisodeStatus_EPISODE_STATUS_DONE, 0)
	}
	groups := drain(t, h.client, ro.RolloutId, 2)
	if len(groups) != 2 || groups[1].TaskId != "extra" {
		t.Errorf("groups %v, want task-0 then extra", groups)
	}
	if _, err := h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId, Tasks: []*pb.Task{{Id: "late", EnvMode: "math"}}}); err == nil {
		t.Error("AddTasks to a finished rollout succeeded")
	}
}

func TestHandBackKeepsAttempt(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	r := h.runner(simrunner.Options{ID: "draining", Slots: 1, Hold: true})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := r.HandBack(r.Assigned()[0].Episode.EpisodeId); err != nil {
		t.Fatal(err)
	}
	// The same runner gets it back (its only free slot), same attempt.
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 2 }); err != nil {
		t.Fatal(err)
	}
	if a := r.Assigned()[1]; a.Episode.Attempt != 1 {
		t.Errorf("handed-back episode reassigned with attempt %d, want 1", a.Episode.Attempt)
	}
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if got.Progress.Requeued != 0 || got.Progress.Running != 1 {
		t.Errorf("progress %+v, want it running again and not counted as requeued", got.Progress)
	}
}

func TestMetricsAndProgress(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 4, Delay: func(*pb.Assignment) time.Duration { return 10 * time.Millisecond },
		Score: func(a *pb.Assignment) float64 { return float64(a.Episode.Seed % 2) }})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(4), GroupSize: 2}})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, h.client, ro.RolloutId, 8)
	got, _ := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if p := got.Progress; p.SuccessRate != 0.5 || p.EpisodesPerMinute <= 0 || got.EndTime == nil {
		t.Errorf("progress %+v end %v: want success rate 0.5, a throughput and an end time", p, got.EndTime)
	}
	families, err := h.env.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				values[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				values[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				values[key] = float64(m.Histogram.GetSampleCount())
				values[key+"/sum"] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.GetBucket() {
					values[fmt.Sprintf("%s/le=%g", key, b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	id := ro.RolloutId
	tests := []struct {
		name string
		want float64
	}{
		{"coordinator_episodes/done", 8},
		{"coordinator_episodes/queued", 0},
		{"coordinator_queue_depth", 0},
		{"coordinator_runners", 1},
		{"coordinator_episodes_done_total", 8},
		{"coordinator_dispatch_latency_seconds", 8},
		{"coordinator_batch_wait_seconds", 1},
		{"coordinator_batch_episode_staleness_versions", 8},
		{"coordinator_batch_groups_trimmed_total", 0},
		// Per rollout: half the episodes score 1, half 0, 5 steps each.
		{"coordinator_rollout_episodes/" + id + "/done", 8},
		{"coordinator_rollout_episodes/" + id + "/failed", 0},
		{"coordinator_rollout_success_rate/" + id, 0.5},
		{"coordinator_rollout_score/" + id, 8},
		{"coordinator_rollout_score/" + id + "/sum", 4},
		{"coordinator_rollout_score/" + id + "/le=0", 4},
		{"coordinator_rollout_score/" + id + "/le=0.9", 4},
		{"coordinator_rollout_score/" + id + "/le=1", 8},
		{"coordinator_rollout_steps_per_episode/" + id, 8},
		{"coordinator_rollout_steps_per_episode/" + id + "/le=3", 0},
		{"coordinator_rollout_steps_per_episode/" + id + "/le=5", 8},
	}
	for _, tt := range tests {
		if got, ok := values[tt.name]; !ok || got != tt.want {
			t.Errorf("%s = %v (present %v), want %v", tt.name, got, ok, tt.want)
		}
	}
}

// TestTokenDataOnByDefault: a rollout records token ids and logprobs unless
// its spec turns them off, since a trainer needs them.
func TestTokenDataOnByDefault(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	off := false
	tests := []struct {
		name           string
		agent          *pb.AgentConfig
		wantLP, wantID bool
	}{
		{"no agent", nil, true, true},
		{"agent without them", &pb.AgentConfig{MaxTurns: 3}, true, true},
		{"logprobs off", &pb.AgentConfig{Logprobs: &off}, false, true},
		{"both off", &pb.AgentConfig{Logprobs: &off, ReturnTokenIds: &off}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), Agent: tt.agent}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
			if err != nil {
				t.Fatal(err)
			}
			a := got.GetSpec().GetAgent()
			if a.GetLogprobs() != tt.wantLP || a.GetReturnTokenIds() != tt.wantID {
				t.Errorf("agent logprobs %v, return_token_ids %v; want %v, %v", a.GetLogprobs(), a.GetReturnTokenIds(), tt.wantLP, tt.wantID)
			}
		})
	}
}
