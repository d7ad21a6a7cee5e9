package pool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// prepMem is a memProvider that applies env overrides: prepare, when set,
// is its Prepare.
type prepMem struct {
	*memProvider
	prepare func(ctx context.Context, env EnvOverrides) error
}

func (m *prepMem) Prepare(ctx context.Context, id string, inst Instance, env EnvOverrides) error {
	return m.prepare(ctx, env)
}

// prepPool is a started pool of one VM over prepMem, with a fake clock.
func prepPool(t *testing.T, prepare func(ctx context.Context, env EnvOverrides) error) (*Pool, *prepMem, *clock.Fake) {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prov := &prepMem{memProvider: newMem(), prepare: prepare}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	spec := Spec{Name: "p", Provider: "mem", Size: 1, ResetTimeout: 5 * time.Minute, BootTimeout: 5 * time.Second}
	p := New(spec, Options{Provider: prov, Store: st, Clock: clk, Logger: zaptest.NewLogger(t)})
	p.Start()
	t.Cleanup(func() {
		p.Close(context.Background(), false)
		st.Close()
	})
	waitFor(t, "a ready VM", func() bool { return p.Stats().ByState[StateReady] == 1 })
	return p, prov, clk
}

// TestPrepareRefusalIsUnsupported: an override the provider refuses comes
// back as ErrUnsupported (FailedPrecondition at the gRPC boundary, with
// its message, not an Internal error), and the refused acquire leaves the
// VM as it was: no lease, ready, not reset.
func TestPrepareRefusalIsUnsupported(t *testing.T) {
	p, prov, _ := prepPool(t, func(ctx context.Context, env EnvOverrides) error {
		return fmt.Errorf("mem supports only the snapshot override: %w", ErrUnsupported)
	})
	_, err := p.Acquire(context.Background(), AcquireRequest{Holder: "h", TTL: time.Minute, Env: EnvOverrides{Proxy: true}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Acquire with a refused override = %v, want ErrUnsupported", err)
	}
	if n := len(p.Leases("")); n != 0 {
		t.Errorf("%d leases after a refused acquire, want 0", n)
	}
	if got := p.Stats().ByState[StateReady]; got != 1 {
		t.Errorf("%d ready VMs after a refused acquire, want 1 (not reset)", got)
	}
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if prov.resets != 0 {
		t.Errorf("a refused override reset the VM %d times, want 0", prov.resets)
	}
}

// TestLeaseDoesNotExpireWhilePrepared: the TTL starts when the holder
// gets the lease, not before the provider prepared the VM. A revert that
// takes longer than the TTL (a vmware snapshot, a one-minute TTL) must
// neither expire the lease nor reset the VM under Prepare's feet, and the
// acquirer gets a lease that is alive for its whole TTL.
func TestLeaseDoesNotExpireWhilePrepared(t *testing.T) {
	const ttl = time.Minute
	entered := make(chan struct{})
	release := make(chan struct{})
	p, _, clk := prepPool(t, func(ctx context.Context, env EnvOverrides) error {
		close(entered)
		<-release
		return nil
	})
	type result struct {
		g   Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := p.Acquire(context.Background(), AcquireRequest{Holder: "h", TTL: ttl, Env: EnvOverrides{Snapshot: "task"}})
		done <- result{g, err}
	}()
	<-entered
	clk.Advance(2 * ttl) // the revert takes two TTLs
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatalf("Acquire = %v", r.err)
	}
	if !p.HasLease(r.g.Lease.ID) {
		t.Fatalf("Acquire answered lease %s, which had already expired", r.g.Lease.ID)
	}
	if got, want := r.g.Lease.ExpireTime, clk.Now().Add(ttl); !got.Equal(want) {
		t.Errorf("lease expires at %v, want %v (a full TTL after the hand-off)", got, want)
	}
	if got := p.Stats().ByState[StateLeased]; got != 1 {
		t.Errorf("%d leased VMs after the hand-off, want 1", got)
	}
	if _, err := p.Renew(r.g.Lease.ID, r.g.Token, 0); err != nil {
		t.Errorf("renew of the new lease = %v", err)
	}
}
