package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"
)

// TestLabels: labels given at acquire show on the lease, renewals set and
// remove them, their number stays bounded, and they survive a restart.
func TestLabels(t *testing.T) {
	f := newFixture(t, 1, 0)
	g, err := f.p.Acquire(context.Background(), AcquireRequest{Holder: "ep-1", TTL: time.Minute,
		Labels: map[string]string{"rollout": "r-1", "task": "t-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"rollout": "r-1", "task": "t-1"}; !maps.Equal(g.Lease.Labels, want) {
		t.Errorf("labels at acquire = %v, want %v", g.Lease.Labels, want)
	}
	lv, err := f.p.RenewLabels(g.Lease.ID, g.Token, 0, map[string]string{"step": "3", "task": ""})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"rollout": "r-1", "step": "3"}; !maps.Equal(lv.Labels, want) {
		t.Errorf("labels after renewal = %v, want %v", lv.Labels, want)
	}
	many := map[string]string{}
	for i := range MaxLabels {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	if _, err := f.p.RenewLabels(g.Lease.ID, g.Token, 0, many); !errors.Is(err, ErrTooManyLabels) {
		t.Errorf("renewal to %d labels: %v, want ErrTooManyLabels", MaxLabels+2, err)
	}
	if got, _ := f.p.Lease(g.Lease.ID); !maps.Equal(got.Labels, lv.Labels) || got.Renewals != 1 {
		t.Errorf("a refused renewal changed the lease: labels %v renewals %d, want %v and 1", got.Labels, got.Renewals, lv.Labels)
	}

	f.restart()
	got, ok := f.p.Lease(g.Lease.ID)
	if !ok || !maps.Equal(got.Labels, lv.Labels) {
		t.Errorf("labels after restart = %v (lease found %v), want %v", got.Labels, ok, lv.Labels)
	}
}
