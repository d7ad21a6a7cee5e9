package vmmanager

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
)

// startGuest runs a real desktopd without X on addr, as a guest "started
// elsewhere" for the static provider.
func startGuest(t *testing.T, desktopd, addr, home string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(desktopd, "--addr", addr, "--display", "none", "--home", home)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestStaticPool: existing guests reset by a guest command, a dead guest
// quarantined by the health check and replaced once it answers again.
func TestStaticPool(t *testing.T) {
	desktopd, _ := binaries(t)
	var eps []string
	var guests []*exec.Cmd
	var homes []string
	for i := 0; i < 2; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
		home := t.TempDir()
		guests = append(guests, startGuest(t, desktopd, addr, home))
		homes = append(homes, home)
		eps = append(eps, "http://"+addr)
	}
	env := daemontest.Env(t)
	spec := PoolSpec{
		Name: "lab", Provider: "static", Size: 2, HealthInterval: Duration(100 * time.Millisecond), BootTimeout: Duration(time.Minute),
		Static: &StaticSpec{Endpoints: eps, ResetCommand: []string{"sh", "-c", "rm -f dirt.txt"}},
	}
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, 2*time.Minute)
	acquire := func() *rolloutmeshv1.Lease {
		t.Helper()
		l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "lab", WaitTimeout: durationpb.New(30 * time.Second), Ttl: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := acquire()
	execute(t, l.Endpoint, "sh", "-c", "echo x > dirt.txt")
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "reset of the static guest", func() bool {
		vms, _ := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{})
		for _, v := range vms.GetVms() {
			if v.VmId == l.VmId {
				return v.State == rolloutmeshv1.VMState_VM_STATE_READY && v.Resets == 1
			}
		}
		return false
	})
	for _, h := range homes {
		if _, err := os.Stat(filepath.Join(h, "dirt.txt")); err == nil {
			t.Errorf("dirt.txt survived the reset command in %s", h)
		}
	}

	// Kill guest 0: the health check quarantines it; the replacement waits
	// for the endpoint and becomes ready when the guest is back.
	guests[0].Process.Kill()
	guests[0].Wait()
	waitUntil(t, 10*time.Second, "dead guest quarantined and replaced", func() bool {
		vms, _ := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{State: rolloutmeshv1.VMState_VM_STATE_PROVISIONING})
		return len(vms.GetVms()) == 1
	})
	startGuest(t, desktopd, strings.TrimPrefix(eps[0], "http://"), homes[0])
	waitUntil(t, 20*time.Second, "replacement ready", func() bool {
		vms, _ := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{State: rolloutmeshv1.VMState_VM_STATE_READY})
		return len(vms.GetVms()) == 2
	})
}

// TestRequestValidation: bad requests get InvalidArgument naming the field.
func TestRequestValidation(t *testing.T) {
	desktopd, _ := binaries(t)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	startGuest(t, desktopd, addr, t.TempDir())
	env := daemontest.Env(t)
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{{Name: "one", Provider: "static", Size: 1, Static: &StaticSpec{Endpoints: []string{"http://" + addr}}}}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, time.Minute)
	tests := []struct {
		name  string
		call  func() error
		code  codes.Code
		field string
	}{
		{"no pool", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{})
			return err
		}, codes.InvalidArgument, "pool"},
		{"ttl too short", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Ttl: durationpb.New(time.Millisecond)})
			return err
		}, codes.InvalidArgument, "ttl"},
		{"wait too long", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", WaitTimeout: durationpb.New(2 * time.Hour)})
			return err
		}, codes.InvalidArgument, "wait_timeout"},
		{"holder too long", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Holder: strings.Repeat("h", 300)})
			return err
		}, codes.InvalidArgument, "holder"},
		{"label key with capitals", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Labels: map[string]string{"Rollout": "r"}})
			return err
		}, codes.InvalidArgument, "labels"},
		{"label value too long", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Labels: map[string]string{"task": strings.Repeat("t", 300)}})
			return err
		}, codes.InvalidArgument, "labels"},
		{"renew with too many labels", func() error {
			many := map[string]string{}
			for i := range 17 {
				many[fmt.Sprintf("k%d", i)] = "v"
			}
			_, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: "lease-x", Token: "x", Labels: many})
			return err
		}, codes.InvalidArgument, "labels"},
		{"unknown pool", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "two"})
			return err
		}, codes.NotFound, "pool"},
		{"renew without id", func() error {
			_, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{Token: "x"})
			return err
		}, codes.InvalidArgument, "lease_id"},
		{"unknown lease", func() error {
			_, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: "lease-x", Token: "x"})
			return err
		}, codes.NotFound, "lease"},
		{"force release unknown", func() error {
			_, err := c.ForceRelease(ctx, &rolloutmeshv1.ForceReleaseRequest{LeaseId: "lease-x"})
			return err
		}, codes.NotFound, "lease"},
		{"get unknown lease", func() error {
			_, err := c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: "lease-x"})
			return err
		}, codes.NotFound, "lease"},
		{"renew unknown lease", func() error {
			_, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: "lease-x", Token: "x"})
			return err
		}, codes.NotFound, "lease"},
		{"list VMs of an unknown pool", func() error {
			_, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{Pool: "two"})
			return err
		}, codes.NotFound, "pool"},
		{"list leases of an unknown pool", func() error {
			_, err := c.ListLeases(ctx, &rolloutmeshv1.ListLeasesRequest{Pool: "two"})
			return err
		}, codes.NotFound, "pool"},
		{"holder prefix too long", func() error {
			_, err := c.ListLeases(ctx, &rolloutmeshv1.ListLeasesRequest{HolderPrefix: strings.Repeat("h", 300)})
			return err
		}, codes.InvalidArgument, "holder_prefix"},
		{"watch pool name too long", func() error {
			st, err := c.WatchPool(ctx, &rolloutmeshv1.WatchPoolRequest{Pool: strings.Repeat("p", 300)})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, codes.InvalidArgument, "pool"},
		{"negative ttl", func() error {
			_, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Ttl: &durationpb.Duration{Seconds: -5}})
			return err
		}, codes.InvalidArgument, "ttl"},
		{"ttl over a day", func() error {
			_, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: "lease-x", Token: "x", Ttl: &durationpb.Duration{Seconds: 1 << 40}})
			return err
		}, codes.InvalidArgument, "ttl"},
		{"bad state filter", func() error {
			_, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{State: 42})
			return err
		}, codes.InvalidArgument, "state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("got %v, want %v naming %q", err, tc.code, tc.field)
			}
		})
	}
	// No wait and no free VM: DeadlineExceeded at once.
	l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", WaitTimeout: durationpb.New(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one"}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("acquire without wait on a full pool: %v, want DeadlineExceeded", err)
	}
	got, err := c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: l.LeaseId})
	if err != nil || got.Token != "" {
		t.Errorf("GetLease = %v, %v; want the lease without token", got, err)
	}
}

// TestWatchPool: the initial state of every VM, then each change with its
// reason; a watch of an unknown pool is NotFound.
func TestWatchPool(t *testing.T) {
	desktopd, _ := binaries(t)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	startGuest(t, desktopd, addr, t.TempDir())
	env := daemontest.Env(t)
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{{Name: "one", Provider: "static", Size: 1, Static: &StaticSpec{Endpoints: []string{"http://" + addr}}}}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, time.Minute)
	waitUntil(t, 10*time.Second, "vm ready", func() bool {
		vms, _ := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{State: rolloutmeshv1.VMState_VM_STATE_READY})
		return len(vms.GetVms()) == 1
	})
	stream, err := c.WatchPool(ctx, &rolloutmeshv1.WatchPoolRequest{Pool: "one", IncludeInitial: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.Reason != "initial" || first.Vm.State != rolloutmeshv1.VMState_VM_STATE_READY {
		t.Errorf("first event = %v, want the initial ready VM", first)
	}
	l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Holder: "ep-7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		prev, state rolloutmeshv1.VMState
		reason      string
	}{
		{rolloutmeshv1.VMState_VM_STATE_READY, rolloutmeshv1.VMState_VM_STATE_LEASED, "lease acquired"},
		{rolloutmeshv1.VMState_VM_STATE_LEASED, rolloutmeshv1.VMState_VM_STATE_RESETTING, "lease released"},
		{rolloutmeshv1.VMState_VM_STATE_RESETTING, rolloutmeshv1.VMState_VM_STATE_READY, "reset done"},
	}
	for i, w := range want {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e.PreviousState != w.prev || e.Vm.State != w.state || e.Reason != w.reason {
			t.Errorf("event %d = %v → %v (%q), want %v → %v (%q)", i, e.PreviousState, e.Vm.State, e.Reason, w.prev, w.state, w.reason)
		}
		if i == 0 && e.Vm.Holder != "ep-7" {
			t.Errorf("leased VM holder = %q, want ep-7", e.Vm.Holder)
		}
	}
	bad, err := c.WatchPool(ctx, &rolloutmeshv1.WatchPoolRequest{Pool: "nope"})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("watch of unknown pool: %v, want NotFound", err)
	}
}
