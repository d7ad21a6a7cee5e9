package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func tasks(specs ...string) []*pb.Task {
	var out []*pb.Task
	for i, s := range specs {
		out = append(out, &pb.Task{Id: fmt.Sprint("t", i), Domain: s, EnvMode: "math"})
	}
	return out
}

func TestPlanGroups(t *testing.T) {
	ts := tasks("a", "a", "b", "c")
	tests := []struct {
		name string
		spec *pb.RolloutSpec
		want string
	}{
		{"one group per task", &pb.RolloutSpec{}, "[0 1 2 3]"},
		{"cycle through tasks", &pb.RolloutSpec{NumEnvGroups: 6}, "[0 1 2 3 0 1]"},
		{"partition by tag", &pb.RolloutSpec{Tags: []string{"a", "c"}, NumGroupsPartition: []int32{3, 2}, NumEnvGroups: 5}, "[0 1 0 3 3]"},
		{"even split", &pb.RolloutSpec{Tags: []string{"a", "b"}, NumEnvGroups: 5}, "[0 1 0 2 2]"},
		{"tags without a count", &pb.RolloutSpec{Tags: []string{"a", "b"}}, "[0 1 2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planGroups(tt.spec, ts)
			if err != nil {
				t.Fatalf("planGroups: %v", err)
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("planGroups = %v, want %s", got, tt.want)
			}
		})
	}
}

// TestPlanGroupsBounded: tags without a group count select one group per
// tagged task and tag; more than MaxGroups of them are refused before a
// plan of that size is made.
func TestPlanGroupsBounded(t *testing.T) {
	many := make([]*pb.Task, 200_000)
	for i := range many {
		many[i] = &pb.Task{Id: fmt.Sprint("t", i), Domain: "a"}
	}
	tests := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string // "" when accepted
	}{
		{"five tags", &pb.RolloutSpec{Tags: []string{"a", "a", "a", "a", "a"}}, ""},
		{"six tags", &pb.RolloutSpec{Tags: []string{"a", "a", "a", "a", "a", "a"}}, "spec.tags"},
		{"six tags with a count", &pb.RolloutSpec{Tags: []string{"a", "a", "a", "a", "a", "a"}, NumEnvGroups: 12}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := planGroups(tt.spec, many)
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("planGroups: %v", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Fatalf("planGroups = %d groups, %v; want an error naming %s", len(plan), err, tt.field)
			}
		})
	}
}

func TestNormalizeSpecDefaults(t *testing.T) {
	spec := &pb.RolloutSpec{Tasks: tasks("a")}
	if _, err := normalizeSpec(context.Background(), spec, false, nil); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%d %d %v %d %v %s %s %v %v", spec.GroupSize, spec.MaxAttempts, spec.OnGroupFailure, spec.Priority, spec.Mode,
		spec.EnvMode, spec.VmPool, spec.EpisodeTimeout.AsDuration(), spec.PollInterval.AsDuration())
	want := "1 3 GROUP_FAILURE_POLICY_REGENERATE 1 ROLLOUT_MODE_SYNC desktop default 1h0m0s 10s"
	if got != want {
		t.Errorf("defaults = %q, want %q", got, want)
	}
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name                               string
		mode                               pb.RolloutMode
		staleness, batch                   int32
		started, consumed, retired, groups int
		version                            int64
		want                               bool
	}{
		{"sync first batch", pb.RolloutMode_ROLLOUT_MODE_SYNC, 0, 4, 1, 0, 0, 0, 0, true},
		{"sync batch started", pb.RolloutMode_ROLLOUT_MODE_SYNC, 0, 4, 2, 0, 0, 0, 0, false},
		{"sync after ack", pb.RolloutMode_ROLLOUT_MODE_SYNC, 0, 4, 2, 2, 0, 0, 0, true},
		{"sync failed group frees room", pb.RolloutMode_ROLLOUT_MODE_SYNC, 0, 4, 2, 0, 1, 0, 0, true},
		{"async within bound", pb.RolloutMode_ROLLOUT_MODE_ASYNC, 1, 4, 3, 0, 0, 0, 0, true},
		{"async at bound", pb.RolloutMode_ROLLOUT_MODE_ASYNC, 1, 4, 4, 4, 0, 0, 0, false},
		{"async new version", pb.RolloutMode_ROLLOUT_MODE_ASYNC, 1, 4, 4, 0, 0, 0, 1, true},
		{"async dropped groups", pb.RolloutMode_ROLLOUT_MODE_ASYNC, 0, 4, 2, 0, 1, 0, 0, true},
		{"async dropped not enough", pb.RolloutMode_ROLLOUT_MODE_ASYNC, 0, 4, 3, 0, 1, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Engine{modelVersion: tt.version}
			r := &rollout{spec: &pb.RolloutSpec{Mode: tt.mode, MaxStaleness: tt.staleness, GroupSize: 2, BatchSize: tt.batch},
				startedGroups: tt.started, consumed: tt.consumed, retired: tt.retired}
			if got := e.admitLocked(r); got != tt.want {
				t.Errorf("admit = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestZeroVariance(t *testing.T) {
	ep := func(score float64) *episode { return &episode{result: &pb.Episode{Score: score}} }
	tests := []struct {
		scores []float64
		want   bool
	}{
		{[]float64{1, 1, 1}, true},
		{[]float64{0, 0}, true},
		{[]float64{0, 1}, false},
		{[]float64{0.5}, false}, // a group of one carries no comparison either way
	}
	for _, tt := range tests {
		var eps []*episode
		for _, s := range tt.scores {
			eps = append(eps, ep(s))
		}
		if got := zeroVariance(eps); got != tt.want {
			t.Errorf("zeroVariance(%v) = %v, want %v", tt.scores, got, tt.want)
		}
	}
}
