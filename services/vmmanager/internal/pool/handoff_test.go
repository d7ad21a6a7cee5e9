package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// countingStore counts the pool's writes to a real store and fails
// HandOff while failHandOff is set.
type countingStore struct {
	Store
	mu          sync.Mutex
	calls       map[string]int
	failHandOff bool
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.calls {
		m[k] = v
	}
	return m
}

func (c *countingStore) SaveLease(l store.Lease, v store.VM) error {
	c.count("SaveLease")
	return c.Store.SaveLease(l, v)
}

func (c *countingStore) EndLease(id string, v store.VM) error {
	c.count("EndLease")
	return c.Store.EndLease(id, v)
}

func (c *countingStore) HandOff(id string, ended store.VM, l store.Lease, v store.VM) error {
	c.count("HandOff")
	c.mu.Lock()
	fail := c.failHandOff
	c.mu.Unlock()
	if fail {
		return errors.New("disk full")
	}
	return c.Store.HandOff(id, ended, l, v)
}

// TestReleaseHandsOffInOneCommit releases a lease while an acquirer waits:
// the end and the waiter's grant are one store transaction, watchers see
// the release before the grant, and a restart finds exactly the new lease.
// When that transaction fails, the end is persisted alone and the waiter
// is still served.
func TestReleaseHandsOffInOneCommit(t *testing.T) {
	tests := []struct {
		name        string
		spares      int
		reset       bool
		failHandOff bool
		sameVM      bool // the waiter gets the released VM
		wantWrites  map[string]int
		wantEvents  []string // reason and state, in order
	}{
		{"release without reset: the same VM", 0, false, false, true,
			map[string]int{"HandOff": 1},
			[]string{"lease released:ready", "lease acquired:leased"}},
		{"release with reset: a warm spare", 1, true, false, false,
			map[string]int{"HandOff": 1},
			[]string{"lease released:resetting", "lease acquired:leased"}},
		{"the joint write fails: the end alone, then the grant", 0, false, true, true,
			map[string]int{"HandOff": 1, "EndLease": 1, "SaveLease": 1},
			[]string{"lease released:ready", "lease acquired:leased"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs *countingStore
			f := newFixtureWrapped(t, 1, tt.spares, func(s Store) Store {
				cs = &countingStore{Store: s, calls: map[string]int{}}
				return cs
			})
			g, err := f.acquire(0)
			if err != nil {
				t.Fatal(err)
			}
			got := f.waiter()
			sub := f.hub.Subscribe(16)
			defer sub.Cancel()
			before := cs.snapshot()
			cs.mu.Lock()
			cs.failHandOff = tt.failHandOff
			cs.mu.Unlock()

			if err := f.p.Release(g.Lease.ID, g.Token, tt.reset); err != nil {
				t.Fatal(err)
			}
			var g2 Grant
			select {
			case g2 = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("waiter not served")
			}
			if same := g2.Lease.VMID == g.Lease.VMID; same != tt.sameVM {
				t.Errorf("waiter got vm %s, released vm %s; same = %v, want %v", g2.Lease.VMID, g.Lease.VMID, same, tt.sameVM)
			}
			after := cs.snapshot()
			for _, name := range []string{"HandOff", "EndLease", "SaveLease"} {
				if d := after[name] - before[name]; d != tt.wantWrites[name] {
					t.Errorf("%s calls during the release = %d, want %d", name, d, tt.wantWrites[name])
				}
			}
			var events []string
			for len(events) < len(tt.wantEvents) {
				select {
				case e := <-sub.C:
					if e.Reason == "lease released" || e.Reason == "lease acquired" {
						events = append(events, e.Reason+":"+e.VM.State.String())
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("events = %v, want %v", events, tt.wantEvents)
				}
			}
			for i := range tt.wantEvents {
				if events[i] != tt.wantEvents[i] {
					t.Errorf("events = %v, want %v", events, tt.wantEvents)
					break
				}
			}

			leases, err := f.st.Leases(context.Background(), "p")
			if err != nil {
				t.Fatal(err)
			}
			if len(leases) != 1 || leases[0].ID != g2.Lease.ID {
				t.Fatalf("stored leases = %+v, want only the waiter's %s", leases, g2.Lease.ID)
			}
			vms, err := f.st.VMs(context.Background(), "p")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vms {
				if v.ID == g2.Lease.VMID && v.State != StateLeased.String() {
					t.Errorf("stored state of the granted vm %s = %s, want leased", v.ID, v.State)
				}
				if tt.reset && v.ID == g.Lease.VMID && v.State == StateLeased.String() {
					t.Errorf("stored state of the released vm %s = leased", v.ID)
				}
			}
		})
	}
}
