package command

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// infraReasons are the failure reasons that say the mesh, not the agent,
// failed: the model server, the environment or its VM, a runner, storage,
// or the runner's configuration. An episode failing for one of them has no
// reward worth training on, so `rollout run` counts them against
// --fail-threshold. Agent failures (parse_error, a wrong answer, a
// deadline) and operator cancellations are not among them.
var infraReasons = map[string]bool{
	"model_error": true, "env_error": true, "env_setup": true, "env_step": true, "evaluation": true,
	"guest_unreachable": true, "lease_refused": true, "lease_lost": true,
	"runner_lost": true, "runner_error": true, "storage_unacked": true,
	"bad_config": true, "output": true,
}

// isInfra reports whether a failure reason (or "reason: detail") is an
// infrastructure failure.
func isInfra(reason string) bool {
	r, _, _ := strings.Cut(reason, ":")
	return infraReasons[strings.TrimSpace(r)]
}

// grpcPrefix is the gRPC wrapping of an error that crossed services, which
// says nothing to the person reading the summary.
var grpcPrefix = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// infraSummary is what failed for infrastructure reasons in one rollout.
type infraSummary struct {
	n       int64
	reasons map[string]int64
	// example is one such failure's reason and error, as a runner or the
	// coordinator reported it ("model_error: ... connection refused").
	example string
}

// infraFailures adds up the rollout's infrastructure failures: those the
// runners reported to storage, and those only the coordinator saw (an
// episode no VM could be leased for never reaches a runner).
func infraFailures(ctx context.Context, coord pb.CoordinatorClient, store pb.StorageClient, id string, stats *pb.GetStatsResponse) (infraSummary, error) {
	s := infraSummary{reasons: map[string]int64{}}
	stored := map[string]bool{}
	for _, rs := range stats.GetRollouts() {
		for reason, n := range rs.GetFailureReasons() {
			stored[reason] = true
			if isInfra(reason) {
				s.n += n
				s.reasons[reason] += n
			}
		}
	}
	if s.n > 0 {
		if err := s.findExample(ctx, store, id); err != nil {
			return s, err
		}
	}
	ro, err := coord.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id, IncludeGroups: true})
	if err != nil {
		return s, fmt.Errorf("get rollout: %w", err)
	}
	for _, g := range ro.GetGroups() {
		msg := g.GetError()
		reason, _, _ := strings.Cut(msg, ":")
		if g.GetFailed() == 0 || !isInfra(reason) || stored[reason] {
			continue
		}
		s.n += int64(g.GetFailed())
		s.reasons[reason] += int64(g.GetFailed())
		if s.example == "" {
			s.example = grpcPrefix.ReplaceAllString(msg, "")
		}
	}
	return s, nil
}

// findExample takes the error of the first stored episode that failed for
// an infrastructure reason.
func (s *infraSummary) findExample(ctx context.Context, store pb.StorageClient, id string) error {
	for token := ""; ; {
		page, err := store.ListEpisodes(ctx, &pb.ListEpisodesRequest{
			RolloutId: id, Status: pb.EpisodeStatus_EPISODE_STATUS_FAILED, PageSize: 1000, PageToken: token})
		if err != nil {
			return fmt.Errorf("list failed episodes: %w", err)
		}
		for _, ep := range page.GetEpisodes() {
			if isInfra(ep.GetFailureReason()) {
				s.example = ep.GetFailureReason()
				if ep.GetError() != "" {
					s.example += ": " + grpcPrefix.ReplaceAllString(ep.GetError(), "")
				}
				return nil
			}
		}
		if token = page.GetNextPageToken(); token == "" {
			return nil
		}
	}
}

// over reports whether the failures exceed threshold, a fraction of total:
// 0 allows none, 1 any number.
func (s infraSummary) over(total int64, threshold float64) bool {
	if s.n == 0 || threshold >= 1 {
		return false
	}
	return total == 0 || float64(s.n) > threshold*float64(total)
}

// write prints the failures under the summary, the reason first.
func (s infraSummary) write(w io.Writer, total int64) {
	if s.n == 0 {
		return
	}
	reasons := make([]string, 0, len(s.reasons))
	for r := range s.reasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, s.reasons[r])
	}
	fmt.Fprintf(w, "INFRASTRUCTURE FAILURES: %d of %d episodes (%s), so their rewards say nothing about the model\n",
		s.n, total, strings.Join(parts, ", "))
	if s.example != "" {
		fmt.Fprintf(w, "  for example: %s\n", s.example)
	}
}
