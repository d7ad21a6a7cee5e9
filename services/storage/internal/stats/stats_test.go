package stats

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

const (
	done   = pb.EpisodeStatus_EPISODE_STATUS_DONE
	failed = pb.EpisodeStatus_EPISODE_STATUS_FAILED
)

func TestRollout(t *testing.T) {
	groups := []index.StatusGroup{
		{Domain: "os", Status: done, Episodes: 2, Steps: 8, Successes: 1, ScoreSum: 1.6},
		{Domain: "chrome", Status: failed, FailureReason: "env_setup", Episodes: 1, Steps: 1},
		{Domain: "os", Status: failed, Episodes: 1, Steps: 3},
	}
	versions := []index.VersionGroup{{Version: 4, Episodes: 2, Done: 2, Steps: 8, Successes: 1, ScoreSum: 1.6}}
	got := Rollout("r", groups, versions)
	for _, tc := range []struct {
		name      string
		got, want *pb.StatsRow
	}{
		{"overall", got.GetOverall(), &pb.StatsRow{Key: "all", Episodes: 4, Done: 2, MeanScore: 0.8, SuccessRate: 0.25, MeanSteps: 3}},
		{"chrome", got.GetByDomain()[0], &pb.StatsRow{Key: "chrome", Episodes: 1, MeanSteps: 1}},
		{"os", got.GetByDomain()[1], &pb.StatsRow{Key: "os", Episodes: 3, Done: 2, MeanScore: 0.8, SuccessRate: 1.0 / 3, MeanSteps: 11.0 / 3}},
		{"version", got.GetByModelVersion()[0], &pb.StatsRow{Key: "4", Episodes: 2, Done: 2, MeanScore: 0.8, SuccessRate: 0.5, MeanSteps: 4}},
	} {
		if !proto.Equal(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if got.GetFailureReasons()["env_setup"] != 1 || got.GetFailureReasons()["unknown"] != 1 {
		t.Errorf("failure_reasons = %v, want env_setup:1 unknown:1", got.GetFailureReasons())
	}
	if got.GetSteps() != 12 {
		t.Errorf("steps = %d, want 12", got.GetSteps())
	}
}

func TestCompare(t *testing.T) {
	base := []index.TaskReward{{Domain: "os", TaskID: "a", Mean: 0.5}, {Domain: "os", TaskID: "b", Mean: 1}, {Domain: "chrome", TaskID: "z", Mean: 1}}
	other := []index.TaskReward{{Domain: "os", TaskID: "a", Mean: 0.5}, {Domain: "os", TaskID: "c", Mean: 1}, {Domain: "chrome", TaskID: "z", Mean: 0}}
	got := Compare(base, other)
	var keys []string
	for _, d := range got.GetDiffs() {
		keys = append(keys, d.GetDomain()+"/"+d.GetTaskId())
	}
	want := []string{"chrome/z", "os/b", "os/c"}
	if len(keys) != len(want) || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Errorf("diffs = %v, want %v", keys, want)
	}
	if got.GetCommonTasks() != 2 || got.GetImproved() != 0 || got.GetRegressed() != 1 {
		t.Errorf("common %d improved %d regressed %d, want 2 0 1", got.GetCommonTasks(), got.GetImproved(), got.GetRegressed())
	}
	if d := got.GetDiffs()[1]; d.OtherReward != nil || d.GetBaseReward() != 1 {
		t.Errorf("os/b = %v, want base 1 and no other", d)
	}
}

func TestSpread(t *testing.T) {
	rs := []*pb.RolloutStats{{Overall: &pb.StatsRow{SuccessRate: 0.2}}, {Overall: &pb.StatsRow{SuccessRate: 0.4}}}
	mean, sd := Spread(rs)
	if mean < 0.2999 || mean > 0.3001 || sd < 0.0999 || sd > 0.1001 {
		t.Errorf("Spread = %v, %v; want 0.3, 0.1", mean, sd)
	}
}
