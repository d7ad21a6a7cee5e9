package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// TestAPIPoolWarmSpareEvicted drives vmmanager's pool with warm spares: a
// pool of 2 with 1 warm spare keeps 3 pods. While one VM is leased, the pod
// of an idle one is evicted by the kubelet; the pool's health check (every
// second here) finds it through the watch, quarantines the VM, deletes the
// evicted pod and boots a new VM on a new pod, so the pool is back to 3.
// The lease held over the eviction keeps working, and both lease slots
// serve leases afterwards.
func TestAPIPoolWarmSpareEvicted(t *testing.T) {
	s := newSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prov := s.provider(t, ctx, "desk", "inst1", "desk")
	hub := pool.NewHub()
	events := hub.Subscribe(1024)
	defer events.Cancel()
	pl := newPoolHub(t, st, prov, 2, 1, s.log, hub)
	pl.Start()
	defer pl.Close(context.Background(), false)
	waitReady(t, pl, 3)
	if n := len(s.pods(t, LabelPool+"=desk")); n != 3 {
		t.Fatalf("%d pods for a pool of 2 with 1 warm spare, want 3", n)
	}

	held, err := pl.Acquire(ctx, pool.AcquireRequest{Holder: "h1", TTL: 5 * time.Minute, Wait: time.Minute})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	var idle pool.VMView
	for _, v := range pl.VMs() {
		if v.State == pool.StateReady {
			idle = v
			break
		}
	}
	if idle.ID == "" {
		t.Fatalf("no idle VM besides the leased one: %+v", pl.VMs())
	}
	if got := podOf(t, s, idle.ID); got != idle.Ref {
		t.Fatalf("VM %s is on pod %q, the pool says %s", idle.ID, got, idle.Ref)
	}
	if err := s.kube.evict(ctx, idle.Ref); err != nil {
		t.Fatal(err)
	}

	// Quarantined with the eviction as the cause, then gone.
	deadline := time.After(30 * time.Second)
	quarantined := false
	for !quarantined {
		select {
		case e, ok := <-events.C:
			if !ok {
				t.Fatal("event subscription overflowed")
			}
			if e.VM.ID == idle.ID && e.VM.State == pool.StateQuarantined {
				quarantined = true
				if !strings.Contains(e.VM.LastError, "evicted") {
					t.Errorf("quarantine cause = %q, want the eviction", e.VM.LastError)
				}
			}
		case <-deadline:
			t.Fatalf("VM %s with an evicted pod not quarantined after 30s: %+v", idle.ID, pl.VMs())
		}
	}
	eventually(t, 90*time.Second, "the evicted VM replaced", func() error {
		ready, leased := 0, 0
		for _, v := range pl.VMs() {
			if v.ID == idle.ID {
				return fmt.Errorf("VM %s still in the pool (%s)", v.ID, v.State)
			}
			switch v.State {
			case pool.StateReady:
				ready++
			case pool.StateLeased:
				leased++
			}
		}
		if ready != 2 || leased != 1 {
			return fmt.Errorf("%d ready and %d leased, want 2 and 1", ready, leased)
		}
		return nil
	})
	if _, err := env.cli.CoreV1().Pods(s.ns).Get(ctx, idle.Ref, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("evicted pod %s: err = %v, want NotFound (deleted with its VM)", idle.Ref, err)
	}
	if n := len(s.pods(t, LabelPool+"=desk")); n != 3 {
		t.Errorf("%d pods after the replacement, want 3", n)
	}

	// The lease held over the eviction still works.
	if _, err := pl.Renew(held.Lease.ID, held.Token, time.Minute); err != nil {
		t.Errorf("renew of the lease held over the eviction: %v", err)
	}
	if _, err := guestClient().Execute(ctx, held.Lease.Endpoint, "", []string{"true"}); err != nil {
		t.Errorf("guest of the lease held over the eviction: %v", err)
	}
	// Both slots serve leases: a second one now, and after the first is
	// released with a reset, a third, from the spare.
	second, err := pl.Acquire(ctx, pool.AcquireRequest{Holder: "h2", TTL: time.Minute, Wait: time.Minute})
	if err != nil {
		t.Fatalf("Acquire after the replacement: %v", err)
	}
	if err := pl.Release(held.Lease.ID, held.Token, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	third, err := pl.Acquire(ctx, pool.AcquireRequest{Holder: "h3", TTL: time.Minute, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire while a VM resets (the warm spare should serve it): %v", err)
	}
	for _, g := range []pool.Grant{second, third} {
		if _, err := guestClient().Execute(ctx, g.Lease.Endpoint, "", []string{"true"}); err != nil {
			t.Errorf("guest of lease %s: %v", g.Lease.ID, err)
		}
		if err := pl.Release(g.Lease.ID, g.Token, true); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	waitReady(t, pl, 3)
	var errs []error
	for _, v := range pl.VMs() {
		if err := prov.Check(ctx, pool.Instance{Ref: v.Ref, Endpoint: v.Endpoint, Data: map[string]string{}}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("a VM fails its check at the end: %v", err)
	}
}
