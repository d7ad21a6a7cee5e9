package coordinator_test

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/envflag"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// healthy checks that the coordinator still answers after bad input.
func (h *harness) healthy(t *testing.T) {
	t.Helper()
	ctx := ctxT(t, 5*time.Second)
	resp, err := grpc_health_v1.NewHealthClient(h.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || resp.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health after bad input: %v, %v", resp, err)
	}
	if _, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{}); err != nil {
		t.Fatalf("ListRollouts after bad input: %v", err)
	}
}

// TestTaskSourceConfined: task_source reads only inside the task roots,
// refuses devices and FIFOs at once, and its errors never quote a file
// (issue #16 items 1 and 2).
func TestTaskSourceConfined(t *testing.T) {
	outside := t.TempDir()
	shadow := filepath.Join(outside, "shadow")
	if err := os.WriteFile(shadow, []byte("root:$6$SECRETHASH:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "math.jsonl"), []byte(`{"id":"a","question":"1+1","answer":"2","env_mode":"math"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("root:$6$SECRETHASH\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadow, filepath.Join(root, "escape.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(root, "zero.jsonl")); err != nil {
		t.Fatal(err)
	}
	// /dev is a root too, so that /dev/zero is refused for what it is, not
	// only for where it is.
	h := newHarness(t, coordinator.Config{TaskRoots: []string{root, "/dev"}})
	tests := []struct{ name, source string }{
		{"device", "/dev/zero"},
		{"fifo", "fifo.jsonl"},
		{"symlink to a device", "zero.jsonl"},
		{"outside the roots", shadow},
		{"dot-dot out of a root", filepath.Join(root, "..", filepath.Base(outside), "shadow")},
		{"relative dot-dot", "../" + filepath.Base(outside) + "/shadow"},
		{"symlink out of a root", "escape.jsonl"},
		{"not a task file", "notes.txt"},
		{"etc shadow", "/etc/shadow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxT(t, 10*time.Second)
			start := time.Now()
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: tt.source, EnvMode: "math"}})
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("StartRollout(%s) code = %v (%v), want InvalidArgument", tt.source, got, err)
			}
			msg := status.Convert(err).Message()
			if !strings.HasPrefix(msg, "spec.task_source:") {
				t.Errorf("message %q does not name spec.task_source", msg)
			}
			if strings.Contains(msg, "SECRET") || strings.Contains(msg, "$6$") || strings.Contains(msg, "'r'") {
				t.Errorf("message quotes file content: %q", msg)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v", d)
			}
		})
	}
	h.healthy(t)
	ctx := ctxT(t, 10*time.Second)
	for _, ok := range []string{"math.jsonl", filepath.Join(root, "math.jsonl")} {
		if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: ok, EnvMode: "math"}}); err != nil {
			t.Errorf("StartRollout(%s) inside the root: %v", ok, err)
		}
	}
}

// TestTaskRootFlag: --task-root repeats, and its environment form lists
// several roots in one value.
func TestTaskRootFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"repeated flag", []string{"--task-root", "/a", "--task-root", "/b"}, "", "/a,/b"},
		{"environment list", nil, "/a,/b:/c", "/a,/b,/c"},
		{"flag wins over environment", []string{"--task-root", "/x"}, "/a", "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg coordinator.Config
			fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) {
				if k == "ROLLOUTMESH_TASK_ROOT" && tt.env != "" {
					return tt.env, true
				}
				return "", false
			}
			if err := envflag.Apply(fs, "ROLLOUTMESH_", lookup); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cfg.TaskRoots, ","); got != tt.want {
				t.Errorf("TaskRoots = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := coordinator.New(t.Context(), coordinator.Config{TaskRoots: []string{filepath.Join(t.TempDir(), "missing")}}, daemontest.Env(t)); err == nil {
		t.Error("New with a missing task root succeeded")
	}
}

// TestUnknownIDsNotFound: every RPC naming a rollout or batch that does not
// exist answers NotFound, never an empty success (issue #16 item 8).
func TestUnknownIDsNotFound(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 10*time.Second)
	if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "known", Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"GetRollout", func() error {
			_, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: "nope"})
			return err
		}},
		{"CancelRollout", func() error {
			_, err := h.client.CancelRollout(ctx, &pb.CancelRolloutRequest{RolloutId: "nope"})
			return err
		}},
		{"AddTasks", func() error {
			_, err := h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: "nope", Tasks: mathTasks(1)})
			return err
		}},
		{"GetBatch", func() error {
			_, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: "nope"})
			return err
		}},
		{"AckBatch unknown rollout", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: "nope", BatchId: "b-1"})
			return err
		}},
		{"AckBatch unknown batch", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: "known", BatchId: "b-1"})
			return err
		}},
		{"ListQueuedEpisodes", func() error {
			_, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{RolloutId: "nope"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != codes.NotFound {
				t.Errorf("code = %v, want NotFound", got)
			}
		})
	}
	all, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{})
	if err != nil || len(all.Episodes) != 1 {
		t.Errorf("ListQueuedEpisodes(all) = %v, %v; want the known rollout's one episode", all, err)
	}
}

// TestModelVersionBounds: a version far ahead or beyond JSON's exact range
// is refused, so one call cannot block later updates; reset sets a lower
// version explicitly (issue #16 item 6).
func TestModelVersionBounds(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 10*time.Second)
	update := func(v int64, reset bool) (*pb.UpdateModelVersionResponse, error) {
		return h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: v, Reset_: reset})
	}
	steps := []struct {
		name    string
		version int64
		reset   bool
		want    codes.Code
		prev    int64
	}{
		{"max int64", math.MaxInt64, false, codes.InvalidArgument, 0},
		{"2^53", 1 << 53, false, codes.InvalidArgument, 0},
		{"max int64 with reset", math.MaxInt64, true, codes.InvalidArgument, 0},
		{"negative", -1, false, codes.InvalidArgument, 0},
		{"more than a step ahead", 1_000_001, false, codes.InvalidArgument, 0},
		{"one step ahead", 1_000_000, false, codes.OK, 0},
		{"normal update after the refusals", 1_000_005, false, codes.OK, 1_000_000},
		{"lower without reset", 7, false, codes.InvalidArgument, 0},
		{"lower with reset", 7, true, codes.OK, 1_000_005},
		{"normal update after the reset", 8, false, codes.OK, 7},
		{"top of the range with reset", 1<<53 - 1, true, codes.OK, 8},
		{"reset back", 3, true, codes.OK, 1<<53 - 1},
	}
	for _, st := range steps {
		resp, err := update(st.version, st.reset)
		if got := status.Code(err); got != st.want {
			t.Fatalf("%s: UpdateModelVersion(%d, reset %v) code = %v (%v), want %v", st.name, st.version, st.reset, got, err, st.want)
		}
		if err != nil {
			if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "version:") {
				t.Errorf("%s: message %q does not name the field", st.name, msg)
			}
			continue
		}
		if resp.Version != st.version || resp.PreviousVersion != st.prev {
			t.Errorf("%s: got version %d (previous %d), want %d (previous %d)", st.name, resp.Version, resp.PreviousVersion, st.version, st.prev)
		}
	}
	// The reset is durable.
	h.restart()
	if resp, err := update(4, false); err != nil || resp.PreviousVersion != 3 {
		t.Errorf("after restart: UpdateModelVersion(4) = %v, %v; want previous version 3", resp, err)
	}
}

// TestIntegerBounds: every integer a caller sets is bounded, the error
// naming the field; none of them costs the coordinator memory or health
// (issue #16 item 6).
func TestIntegerBounds(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	f := func(v float64) *float64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	agent := func(a *pb.AgentConfig) *pb.RolloutSpec { return &pb.RolloutSpec{Tasks: mathTasks(1), Agent: a} }
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		// Without the bound, planGroups allocated a slot for each of 2^31
		// groups before any other check.
		{"partition huge", &pb.RolloutSpec{Tasks: mathTasks(1), Tags: []string{"math"}, NumGroupsPartition: []int32{math.MaxInt32}}, "spec.num_groups_partition[0]"},
		{"partition sum", &pb.RolloutSpec{Tasks: mathTasks(1), Tags: []string{"math", "math"}, NumGroupsPartition: []int32{900_000, 900_000}}, "spec.num_groups_partition"},
		{"partition negative", &pb.RolloutSpec{Tasks: mathTasks(1), Tags: []string{"math"}, NumGroupsPartition: []int32{-1}}, "spec.num_groups_partition[0]"},
		{"num_env_groups", &pb.RolloutSpec{Tasks: mathTasks(1), NumEnvGroups: math.MaxInt32}, "spec.num_env_groups"},
		{"max_attempts", &pb.RolloutSpec{Tasks: mathTasks(1), MaxAttempts: math.MaxInt32}, "spec.max_attempts"},
		{"batch_size", &pb.RolloutSpec{Tasks: mathTasks(1), BatchSize: -1}, "spec.batch_size"},
		{"priority", &pb.RolloutSpec{Tasks: mathTasks(1), Priority: -5}, "spec.priority"},
		{"poll_interval invalid", &pb.RolloutSpec{Tasks: mathTasks(1), PollInterval: &durationpb.Duration{Seconds: 5, Nanos: -1}}, "spec.poll_interval"},
		{"episode_timeout huge", &pb.RolloutSpec{Tasks: mathTasks(1), EpisodeTimeout: &durationpb.Duration{Seconds: math.MaxInt64}}, "spec.episode_timeout"},
		{"max_turns", agent(&pb.AgentConfig{MaxTurns: math.MaxInt32}), "spec.agent.max_turns"},
		{"history_images", agent(&pb.AgentConfig{HistoryImages: -1}), "spec.agent.history_images"},
		{"top_logprobs", agent(&pb.AgentConfig{TopLogprobs: 21}), "spec.agent.top_logprobs"},
		{"screen_width", agent(&pb.AgentConfig{ScreenWidth: math.MaxInt32}), "spec.agent.screen_width"},
		{"sleep_after_execution", agent(&pb.AgentConfig{SleepAfterExecution: durationpb.New(time.Hour)}), "spec.agent.sleep_after_execution"},
		{"temperature", agent(&pb.AgentConfig{Sampling: &pb.SamplingParams{Temperature: f(math.NaN())}}), "spec.agent.sampling.temperature"},
		{"top_p", agent(&pb.AgentConfig{Sampling: &pb.SamplingParams{TopP: f(0)}}), "spec.agent.sampling.top_p"},
		{"max_tokens", agent(&pb.AgentConfig{Sampling: &pb.SamplingParams{MaxTokens: i32(-5)}}), "spec.agent.sampling.max_tokens"},
		{"n", agent(&pb.AgentConfig{Sampling: &pb.SamplingParams{N: 1000}}), "spec.agent.sampling.n"},
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
	h.healthy(t)
}

// TestRegenerationCapped: with REGENERATE, a task that always fails runs
// max_attempts times per episode it needs, not again and again, and one
// that can never run (UNSUPPORTED) runs once; the failed group reports
// its last failure (issue #16 item 7).
func TestRegenerationCapped(t *testing.T) {
	cases := []struct {
		name     string
		status   pb.EpisodeStatus
		wantRuns int
		wantLast string
	}{
		{"always failing", pb.EpisodeStatus_EPISODE_STATUS_FAILED, 3, "-e0 attempt 3"},
		{"unsupported", pb.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED, 1, "-e0 attempt 1"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, coordinator.Config{})
			ctx := ctxT(t, 30*time.Second)
			r := h.runner(simrunner.Options{ID: "r", Slots: 2, Status: func(*pb.Assignment) pb.EpisodeStatus { return tt.status }})
			ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
				Tasks: mathTasks(1), OnGroupFailure: pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REGENERATE}})
			if err != nil {
				t.Fatal(err)
			}
			if got := drain(t, h.client, ro.RolloutId, 1); len(got) != 0 {
				t.Fatalf("failed group handed out: %v", got)
			}
			if runs := len(r.Assigned()); runs != tt.wantRuns {
				t.Errorf("the task ran %d times, want %d", runs, tt.wantRuns)
			}
			got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
			if err != nil {
				t.Fatal(err)
			}
			if got.Progress.GroupsFailed != 1 || len(got.Groups) != 1 {
				t.Fatalf("progress %+v, want the one group failed", got.Progress)
			}
			if g := got.Groups[0]; g.State != "failed" || !strings.HasPrefix(g.Error, "simulated: ") || !strings.HasSuffix(g.Error, tt.wantLast) {
				t.Errorf("group %s %q, want failed with the last failure (...%s)", g.State, g.Error, tt.wantLast)
			}
		})
	}
}

// TestStartRolloutRefusesUnrunnable: what every episode would fail on later
// is refused at StartRollout, naming the field (issue #16 item 7; pools and
// overrides are in TestLeasesWithRealVMManager, which has a vmmanager).
func TestStartRolloutRefusesUnrunnable(t *testing.T) {
	// A vmmanager that is never reached: desktop specs pass the VM check,
	// and the pool check is skipped for an unreachable vmmanager.
	h := newHarness(t, coordinator.Config{VMManager: "127.0.0.1:1"})
	ctx := ctxT(t, 30*time.Second)
	desktop := []*pb.Task{{Id: "d", EnvMode: "desktop"}}
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		{"domain escapes", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "math", Domain: "../../../../tmp/x"}}}, "spec.tasks[0].domain"},
		{"domain with a slash", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "math", Domain: "a/b"}}}, "spec.tasks[0].domain"},
		{"id dot-dot", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "..", EnvMode: "math"}}}, "spec.tasks[0].id"},
		{"som", &pb.RolloutSpec{Tasks: desktop, Agent: &pb.AgentConfig{ObservationType: "som"}}, "spec.agent.observation_type"},
		{"tool_calls on a desktop", &pb.RolloutSpec{Tasks: desktop, Agent: &pb.AgentConfig{ActionSpace: "tool_calls"}}, "spec.agent.action_space"},
		{"launch-wide in the rollout's env_config", &pb.RolloutSpec{Tasks: desktop, EnvConfig: &pb.EnvConfig{Extra: map[string]string{"observation_type": "som"}}}, "spec.env_config.extra.observation_type"},
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
	for _, id := range []string{"..", ".", "a..b"} {
		_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: id, Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "rollout_id:") {
			t.Errorf("StartRollout(rollout_id %q) = %v, want InvalidArgument naming rollout_id", id, err)
		}
	}
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId, Tasks: []*pb.Task{{Id: "b", EnvMode: "math", Domain: ".."}}})
	if got := status.Code(err); got != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "tasks[0].domain:") {
		t.Errorf("AddTasks with domain ..: %v, want InvalidArgument naming tasks[0].domain", err)
	}
}

// TestBadResultFailsAttempt: a runner reporting a NaN score (or another
// out-of-range field) fails the attempt; nothing of it reaches a batch.
func TestBadResultFailsAttempt(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 2, Score: func(*pb.Assignment) float64 { return math.NaN() }})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Tasks: mathTasks(1), MaxAttempts: 2, OnGroupFailure: pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REPORT}})
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, h.client, ro.RolloutId, 1); len(got) != 0 {
		t.Fatalf("a NaN reward was handed out: %v", got)
	}
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Groups[0]; g.State != "failed" || g.Error != "bad_result: result.score: must be a finite number" {
		t.Errorf("group %s %q, want failed with bad_result", g.State, g.Error)
	}
	h.healthy(t)
}

// TestListPaging: the list RPCs answer in bounded pages, so that one call
// cannot render millions of episodes; their page sizes and tokens are
// checked like any other field.
func TestListPaging(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 20*time.Second)
	for i := 0; i < 5; i++ {
		if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(6)}}); err != nil {
			t.Fatal(err)
		}
	}
	var rollouts []string
	for token := ""; ; {
		resp, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Rollouts) > 2 {
			t.Fatalf("page of %d rollouts, want at most 2", len(resp.Rollouts))
		}
		for _, r := range resp.Rollouts {
			rollouts = append(rollouts, r.RolloutId)
		}
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if len(rollouts) != 5 {
		t.Errorf("paged through %d rollouts, want 5", len(rollouts))
	}
	seen := map[string]bool{}
	for token := ""; ; {
		resp, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{PageSize: 7, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Episodes) > 7 {
			t.Fatalf("page of %d episodes, want at most 7", len(resp.Episodes))
		}
		for _, q := range resp.Episodes {
			if seen[q.Episode.EpisodeId] {
				t.Errorf("episode %s on two pages", q.Episode.EpisodeId)
			}
			seen[q.Episode.EpisodeId] = true
		}
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != 30 {
		t.Errorf("paged through %d episodes, want 30", len(seen))
	}
	bad := []struct {
		name  string
		call  func() error
		field string
	}{
		{"rollouts page_size", func() error {
			_, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{PageSize: 1001})
			return err
		}, "page_size"},
		{"rollouts page_token", func() error {
			_, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{PageToken: "x"})
			return err
		}, "page_token"},
		{"episodes page_size", func() error {
			_, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{PageSize: -1})
			return err
		}, "page_size"},
		{"episodes page_token", func() error {
			_, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{PageToken: "-5"})
			return err
		}, "page_token"},
	}
	for _, tt := range bad {
		err := tt.call()
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tt.field+":") {
			t.Errorf("%s: %v, want InvalidArgument naming %s", tt.name, err, tt.field)
		}
	}
}

// TestGetRolloutGroupsBounded: include_groups lists at most 10,000 groups (an answer within gRPC clients' default 4 MiB limit);
// a bigger rollout is refused instead of rendering an over-limit answer.
func TestGetRolloutGroupsBounded(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, time.Minute)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), NumEnvGroups: 10_001}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId, IncludeGroups: true})
	if status.Code(err) != codes.FailedPrecondition || !strings.HasPrefix(status.Convert(err).Message(), "include_groups:") {
		t.Errorf("GetRollout(include_groups) of 10,001 groups = %v, want FailedPrecondition naming include_groups", err)
	}
	if got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId}); err != nil || got.Progress.GroupsTotal != 10_001 {
		t.Errorf("GetRollout without groups = %v, %v", got.GetProgress(), err)
	}
}

// TestListPagesFitDefaultLimit: a page stops before it outgrows what a
// gRPC client takes by default (4 MiB), however large the items are.
func TestListPagesFitDefaultLimit(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	tasks := mathTasks(8)
	for _, task := range tasks {
		task.Instruction = strings.Repeat("x", 1<<20-1)
	}
	if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: tasks}}); err != nil {
		t.Fatal(err)
	}
	n, pages := 0, 0
	for token := ""; ; pages++ {
		resp, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{PageToken: token})
		if err != nil {
			t.Fatalf("ListQueuedEpisodes page %d: %v", pages, err)
		}
		n += len(resp.Episodes)
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if n != 8 || pages < 2 {
		t.Errorf("%d episodes in %d pages, want 8 in several", n, pages+1)
	}
}

// TestHelloBounds: a runner's hello is bounded like any request.
func TestHelloBounds(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	tests := []struct {
		name  string
		hello *pb.RunnerHello
		field string
	}{
		{"env_modes", &pb.RunnerHello{RunnerId: "r", Slots: 1, EnvModes: strings.Split(strings.Repeat("math,", 17), ",")[:17]}, "hello.env_modes"},
		{"address", &pb.RunnerHello{RunnerId: "r", Slots: 1, Address: strings.Repeat("a", 257)}, "hello.address"},
		{"version", &pb.RunnerHello{RunnerId: "r", Slots: 1, Version: strings.Repeat("v", 257)}, "hello.version"},
		{"slots", &pb.RunnerHello{RunnerId: "r", Slots: 4097}, "hello.slots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := h.client.Work(ctxT(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Hello{Hello: tt.hello}}); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tt.field+":") {
				t.Errorf("Work(hello) = %v, want InvalidArgument naming %s", err, tt.field)
			}
		})
	}
}
