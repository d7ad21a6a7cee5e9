package ui

import (
	"context"
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
// fresh. Errors (NotFound) are not kept.
func (h *Handler) rolloutStats(ctx context.Context, id string) (*pb.GetStatsResponse, error) {
	now := h.now()
	h.stats.mu.Lock()
	e, ok := h.stats.m[id]
	h.stats.mu.Unlock()
	if ok && now.Sub(e.at) < e.ttl {
		return e.resp, nil
	}
	v, err, _ := h.flight.Do("stats/"+id, func() (any, error) {
		return h.reads.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{id}})
	})
	if err != nil {
		return nil, err
	}
	resp := v.(*pb.GetStatsResponse)
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
	return resp, nil
}
