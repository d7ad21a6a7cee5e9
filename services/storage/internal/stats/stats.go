// Package stats summarises stored episodes: success rates per rollout,
// domain and model version, failure reasons, multi-run mean and deviation,
// and the per-task reward differences between two rollouts. It replaces the
// seed's show_result, experiment_result_stats and compare_exp_result scripts.
// The index aggregates; this package shapes the answer.
package stats

import (
	"math"
	"slices"
	"strconv"
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

type acc struct {
	episodes, done, successes, steps int64
	scoreSum                         float64
}

func (a *acc) add(b acc) {
	a.episodes += b.episodes
	a.done += b.done
	a.successes += b.successes
	a.steps += b.steps
	a.scoreSum += b.scoreSum
}

func (a *acc) row(key string) *pb.StatsRow {
	r := &pb.StatsRow{Key: key, Episodes: a.episodes, Done: a.done}
	if a.done > 0 {
		r.MeanScore = a.scoreSum / float64(a.done)
	}
	if a.episodes > 0 {
		r.SuccessRate = float64(a.successes) / float64(a.episodes)
		r.MeanSteps = float64(a.steps) / float64(a.episodes)
	}
	return r
}

// Rollout shapes one rollout's aggregates. A success is a DONE episode whose
// score reached the threshold the index was asked with; success rates are
// over all episodes, so failures count against the rollout.
func Rollout(id string, groups []index.StatusGroup, versions []index.VersionGroup) *pb.RolloutStats {
	// Sort here rather than trust the database's collation.
	groups = slices.Clone(groups)
	slices.SortStableFunc(groups, func(a, b index.StatusGroup) int { return strings.Compare(a.Domain, b.Domain) })
	out := &pb.RolloutStats{RolloutId: id, ByStatus: map[string]int64{}, FailureReasons: map[string]int64{}}
	var overall, domain acc
	flush := func(key string) {
		if domain.episodes > 0 {
			out.ByDomain = append(out.ByDomain, domain.row(key))
		}
		domain = acc{}
	}
	for i, g := range groups {
		if i > 0 && g.Domain != groups[i-1].Domain {
			flush(groups[i-1].Domain)
		}
		a := acc{episodes: g.Episodes, successes: g.Successes, steps: g.Steps, scoreSum: g.ScoreSum}
		if g.Status == pb.EpisodeStatus_EPISODE_STATUS_DONE {
			a.done = g.Episodes
		}
		overall.add(a)
		domain.add(a)
		out.ByStatus[g.Status.String()] += g.Episodes
		switch g.Status {
		case pb.EpisodeStatus_EPISODE_STATUS_FAILED, pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT,
			pb.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED, pb.EpisodeStatus_EPISODE_STATUS_ABORTED:
			reason := g.FailureReason
			if reason == "" {
				reason = "unknown"
			}
			out.FailureReasons[reason] += g.Episodes
		}
		out.Steps += g.Steps
	}
	if len(groups) > 0 {
		flush(groups[len(groups)-1].Domain)
	}
	out.Overall = overall.row("all")
	for _, v := range versions {
		a := acc{episodes: v.Episodes, done: v.Done, successes: v.Successes, steps: v.Steps, scoreSum: v.ScoreSum}
		out.ByModelVersion = append(out.ByModelVersion, a.row(strconv.FormatInt(v.Version, 10)))
	}
	return out
}

// Spread returns the mean and population standard deviation of the
// rollouts' overall success rates (the seed's multi-run statistics).
func Spread(rs []*pb.RolloutStats) (mean, stddev float64) {
	if len(rs) == 0 {
		return 0, 0
	}
	for _, r := range rs {
		mean += r.GetOverall().GetSuccessRate()
	}
	mean /= float64(len(rs))
	for _, r := range rs {
		d := r.GetOverall().GetSuccessRate() - mean
		stddev += d * d
	}
	return mean, math.Sqrt(stddev / float64(len(rs)))
}

// Compare lists the tasks whose mean reward over DONE episodes differs
// between base and other, including tasks finished in only one of them.
func Compare(base, other []index.TaskReward) *pb.CompareRolloutsResponse {
	resp := &pb.CompareRolloutsResponse{}
	cmp := func(a, b index.TaskReward) int {
		if c := strings.Compare(a.Domain, b.Domain); c != 0 {
			return c
		}
		return strings.Compare(a.TaskID, b.TaskID)
	}
	less := func(a, b index.TaskReward) bool { return cmp(a, b) < 0 }
	// Sort here rather than trust the database's collation.
	base, other = slices.Clone(base), slices.Clone(other)
	slices.SortFunc(base, cmp)
	slices.SortFunc(other, cmp)
	i, j := 0, 0
	for i < len(base) || j < len(other) {
		switch {
		case j == len(other) || (i < len(base) && less(base[i], other[j])):
			b := base[i].Mean
			resp.Diffs = append(resp.Diffs, &pb.TaskDiff{TaskId: base[i].TaskID, Domain: base[i].Domain, BaseReward: &b})
			i++
		case i == len(base) || less(other[j], base[i]):
			o := other[j].Mean
			resp.Diffs = append(resp.Diffs, &pb.TaskDiff{TaskId: other[j].TaskID, Domain: other[j].Domain, OtherReward: &o})
			j++
		default:
			b, o := base[i].Mean, other[j].Mean
			resp.CommonTasks++
			if b != o {
				if o > b {
					resp.Improved++
				} else {
					resp.Regressed++
				}
				resp.Diffs = append(resp.Diffs, &pb.TaskDiff{TaskId: base[i].TaskID, Domain: base[i].Domain, BaseReward: &b, OtherReward: &o})
			}
			i++
			j++
		}
	}
	return resp
}
