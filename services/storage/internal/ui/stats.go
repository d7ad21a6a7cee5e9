package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// A rollout's statistics aggregate all its episodes (a few hundred
// milliseconds for 100,000 of them) while a page shows them for seconds and
// live pages ask again every 5: they are kept briefly, so that the viewers
// of one rollout share one aggregation.
const (
	statsTTLRunning  = 2 * time.Second
	statsTTLFinished = 15 * time.Second
	statsCacheMax    = 256
)

type statsEntry struct {
	resp *pb.GetStatsResponse
	at   time.Time
	ttl  time.Duration
}

type statsCache struct {
	mu sync.Mutex
	m  map[string]statsEntry
}

// rolloutStats returns the statistics of one rollout, from the cache when
// fresh. Errors (NotFound) are not kept. The aggregation is shared by the
// viewers asking at the same time and is cached even when they have all
// gone (see shared).
func (h *Handler) rolloutStats(ctx context.Context, id string) (*pb.GetStatsResponse, error) {
	h.stats.mu.Lock()
	e, ok := h.stats.m[id]
	h.stats.mu.Unlock()
	if ok && h.now().Sub(e.at) < e.ttl {
		return e.resp, nil
	}
	v, err := h.shared(ctx, "stats/"+id, func(ctx context.Context) (any, error) {
		resp, err := h.reads.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{id}})
		if err != nil {
			return nil, err
		}
		if len(resp.GetRollouts()) != 1 {
			return nil, fmt.Errorf("statistics of rollout %s: %d rollouts in the answer, want 1", id, len(resp.GetRollouts()))
		}
		h.keepStats(id, resp)
		return resp, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*pb.GetStatsResponse), nil
}

// keepStats caches a rollout's statistics: briefly while it runs.
func (h *Handler) keepStats(id string, resp *pb.GetStatsResponse) {
	now := h.now()
	ttl := statsTTLFinished
	for st, n := range resp.GetRollouts()[0].GetByStatus() {
		if n > 0 && (st == "EPISODE_STATUS_RUNNING" || st == "EPISODE_STATUS_QUEUED" || st == "EPISODE_STATUS_UNSPECIFIED") {
			ttl = statsTTLRunning
		}
	}
	h.stats.mu.Lock()
	defer h.stats.mu.Unlock()
	if len(h.stats.m) >= statsCacheMax {
		for k, old := range h.stats.m {
			if now.Sub(old.at) >= old.ttl || len(h.stats.m) >= statsCacheMax {
				delete(h.stats.m, k)
			}
		}
	}
	h.stats.m[id] = statsEntry{resp: resp, at: now, ttl: ttl}
}
