package vmmanager

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestStressGRPC: 16 acquirers on 3 real desktopd VMs (no X, so resets are
// quick process restarts) through gRPC. A watcher checks continuously, from
// ListLeases and from the acquirers' own bookkeeping, that no VM is ever
// held by two leases. (FIFO order is checked in internal/pool's TestStress,
// where queue tickets are visible.)
func TestStressGRPC(t *testing.T) {
	desktopd, _ := binaries(t)
	env := daemontest.Env(t)
	spec := processPool(t, "stress", 3, desktopd, true)
	spec.Process.BasePort = 15500
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, 2*time.Minute)
	var (
		mu      sync.Mutex
		holding = map[string]string{}
		served  atomic.Int64
	)
	deadline := time.Now().Add(4 * time.Second)
	stop := make(chan struct{})
	watched := make(chan int)
	go func() {
		n := 0
		defer func() { watched <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			list, err := c.ListLeases(ctx, &rolloutmeshv1.ListLeasesRequest{Pool: "stress"})
			if err != nil {
				t.Errorf("ListLeases: %v", err)
				return
			}
			seen := map[string]bool{}
			for _, l := range list.Leases {
				if seen[l.VmId] {
					t.Errorf("vm %s in two live leases", l.VmId)
				}
				seen[l.VmId] = true
			}
			if len(list.Leases) > 3 {
				t.Errorf("%d live leases on a pool of 3", len(list.Leases))
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "stress", WaitTimeout: durationpb.New(30 * time.Second), Ttl: durationpb.New(time.Minute), Holder: fmt.Sprint("w", i)})
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				mu.Lock()
				if other, ok := holding[l.VmId]; ok {
					t.Errorf("vm %s granted to %s while held by %s", l.VmId, l.LeaseId, other)
				}
				holding[l.VmId] = l.LeaseId
				mu.Unlock()
				time.Sleep(time.Duration(i%4) * time.Millisecond)
				mu.Lock()
				delete(holding, l.VmId)
				mu.Unlock()
				reset := i%2 == 0
				if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token, Reset_: &reset}); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	checks := <-watched
	if served.Load() < 50 || checks < 20 {
		t.Errorf("%d leases served, %d watcher checks: too little to mean anything", served.Load(), checks)
	}
	t.Logf("%d leases served, %d watcher checks", served.Load(), checks)
	vms, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{Pool: "stress"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vms.Vms) != 3 {
		t.Errorf("%d VMs after the stress, want 3", len(vms.Vms))
	}
}
