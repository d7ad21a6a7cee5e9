package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAcquireForGoneCallerLeasesNothing: an acquire whose caller has
// already gone (its deadline passed in transit, it was cancelled) gets no
// VM. Granting one anyway would hold the VM, unseen by anyone, for the
// whole TTL (up to 24 h), since nobody has the token to release it.
func TestAcquireForGoneCallerLeasesNothing(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 1, 0)
			_, err := f.p.Acquire(tt.ctx(), AcquireRequest{Holder: "h", TTL: 24 * time.Hour})
			if !errors.Is(err, tt.want) {
				t.Errorf("Acquire = %v, want %v", err, tt.want)
			}
			if n := len(f.p.Leases("")); n != 0 {
				t.Errorf("%d leases for a caller that had gone, want 0", n)
			}
			if got := f.p.Stats().ByState[StateReady]; got != 1 {
				t.Errorf("%d ready VMs, want 1", got)
			}
		})
	}
}
