package vmmanager

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func processPool(t *testing.T, name string, size int, desktopd string, noDisplay bool) PoolSpec {
	tmpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmpl, "template.txt"), []byte("clean"), 0o600); err != nil {
		t.Fatal(err)
	}
	return PoolSpec{
		Name: name, Provider: "process", Size: size, ScreenWidth: 1280, ScreenHeight: 720,
		ClientPassword: "password", BootTimeout: Duration(30 * time.Second),
		Process: &ProcessSpec{Desktopd: desktopd, HomeTemplate: tmpl, NoDisplay: noDisplay, BasePort: 15100, BaseDisplay: 140},
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func execute(t *testing.T, endpoint string, cmd ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": cmd, "shell": false})
	resp, err := http.Post(endpoint+"/execute", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Output     string `json:"output"`
		ReturnCode int    `json:"returncode"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return out.Output
}

// TestProcessPool is the acceptance path on real desktopd processes with
// their own Xvfb: two leases with working screenshots, a third acquire that
// blocks until a release, listings without secrets, wrong tokens refused, an
// unrenewed lease that expires (fake clock) and a VM that comes back reset.
func TestProcessPool(t *testing.T) {
	need(t, "Xvfb", haveBinary("Xvfb"))
	need(t, "openbox", haveBinary("openbox"))
	desktopd, _ := binaries(t)
	env := daemontest.Env(t)
	clk := clock.NewFake(time.Now())
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{processPool(t, "local", 2, desktopd, false)}, clk: clk}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, 2*time.Minute)

	acq := func(wait time.Duration) (*rolloutmeshv1.Lease, error) {
		return c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{
			Pool: "local", WaitTimeout: durationpb.New(wait), Ttl: durationpb.New(60 * time.Second), Holder: "episode-1",
		})
	}
	l1, err := acq(30 * time.Second)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	l2, err := acq(30 * time.Second)
	if err != nil {
		t.Fatalf("second acquire: %v", err)
	}
	for _, l := range []*rolloutmeshv1.Lease{l1, l2} {
		if l.Token == "" || l.ClientPassword != "password" || l.ScreenWidth != 1280 {
			t.Errorf("lease %s: token set %v password %q width %d, want a token, password and 1280", l.LeaseId, l.Token != "", l.ClientPassword, l.ScreenWidth)
		}
		code, png := get(t, l.Endpoint+"/screenshot")
		if code != 200 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s/screenshot: status %d, %d bytes; want a PNG", l.Endpoint, code, len(png))
		}
	}
	if l1.Endpoint == l2.Endpoint {
		t.Fatalf("both leases on %s", l1.Endpoint)
	}

	// The third acquire blocks until one is released.
	type res struct {
		l   *rolloutmeshv1.Lease
		err error
	}
	third := make(chan res, 1)
	go func() {
		l, err := acq(30 * time.Second)
		third <- res{l, err}
	}()
	select {
	case r := <-third:
		t.Fatalf("third acquire returned %v, %v while both VMs are leased", r.l, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	list, err := c.ListLeases(ctx, &rolloutmeshv1.ListLeasesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Leases) != 2 {
		t.Fatalf("ListLeases has %d leases, want 2", len(list.Leases))
	}
	for _, l := range list.Leases {
		if l.Token != "" || l.ClientPassword != "" || l.GuestToken != "" {
			t.Errorf("ListLeases leaks secrets: %v", l)
		}
		if l.Holder != "episode-1" {
			t.Errorf("holder = %q, want episode-1", l.Holder)
		}
	}
	if _, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: l1.LeaseId, Token: "nope"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("renew with wrong token: %v, want PermissionDenied", err)
	}
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l1.LeaseId}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "token") {
		t.Errorf("release without token: %v, want InvalidArgument naming token", err)
	}

	// Dirty l1's home, then release it: the waiter gets it only once reset.
	execute(t, l1.Endpoint, "sh", "-c", "echo dirty > dirt.txt")
	if out := execute(t, l1.Endpoint, "ls"); !strings.Contains(out, "dirt.txt") || !strings.Contains(out, "template.txt") {
		t.Fatalf("home before reset has %q, want dirt.txt and template.txt", out)
	}
	start := time.Now()
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l1.LeaseId, Token: l1.Token}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("release took %v; it must return before the reset", d)
	}
	r := <-third
	if r.err != nil {
		t.Fatalf("third acquire: %v", r.err)
	}
	if r.l.VmId != l1.VmId {
		t.Errorf("third lease on %s, want the released %s", r.l.VmId, l1.VmId)
	}
	if out := execute(t, r.l.Endpoint, "ls"); strings.Contains(out, "dirt.txt") || !strings.Contains(out, "template.txt") {
		t.Errorf("home after reset has %q, want template.txt only", out)
	}

	// l2 is never renewed: after its TTL it expires and its VM comes back reset.
	if _, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: r.l.LeaseId, Token: r.l.Token, Ttl: durationpb.New(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(61 * time.Second)
	if _, err := c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: l2.LeaseId}); status.Code(err) != codes.NotFound {
		t.Errorf("GetLease of expired lease: %v, want NotFound", err)
	}
	if _, err := c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: r.l.LeaseId}); err != nil {
		t.Errorf("GetLease of renewed lease: %v", err)
	}
	waitUntil(t, 30*time.Second, "expired VM back to ready", func() bool {
		vms, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{Pool: "local", State: rolloutmeshv1.VMState_VM_STATE_READY})
		return err == nil && len(vms.Vms) == 1 && vms.Vms[0].VmId == l2.VmId && vms.Vms[0].Resets == 1
	})
	pools, err := c.ListPools(ctx, &rolloutmeshv1.ListPoolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pools.Pools[0].VmsByState; got["ready"] != 1 || got["leased"] != 1 {
		t.Errorf("vms_by_state = %v, want ready 1 and leased 1", got)
	}
}

// TestKeepVMsOnExit: a clean shutdown with KeepVMsOnExit leaves the VMs
// running and the lease valid; the next start adopts both. Without it the
// shutdown stops every VM.
func TestKeepVMsOnExit(t *testing.T) {
	desktopd, _ := binaries(t)
	env := daemontest.Env(t)
	spec := processPool(t, "keep", 1, desktopd, true)
	spec.Process.BasePort = 15700
	ctx := ctxT(t, time.Minute)
	svc, err := New(ctx, Config{Pools: []PoolSpec{spec}, KeepVMsOnExit: true}, env)
	if err != nil {
		t.Fatal(err)
	}
	g, err := svc.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "keep", WaitTimeout: durationpb.New(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	vmsDir := filepath.Join(env.DataDir, "vms", "keep")
	before := desktopdPIDs(vmsDir)
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if after := desktopdPIDs(vmsDir); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("desktopd after a keeping shutdown: %v, want %v still running", after, before)
	}
	env.Registry = daemontest.Env(t).Registry
	svc, err = New(ctx, Config{Pools: []PoolSpec{spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: g.LeaseId, Token: g.Token}); err != nil {
		t.Errorf("renew after a keeping restart: %v", err)
	}
	if after := desktopdPIDs(vmsDir); len(after) != 1 || after[0] != before[0] {
		t.Errorf("desktopd after restart: %v, want the adopted %v", after, before)
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := desktopdPIDs(vmsDir); len(left) != 0 {
		t.Errorf("desktopd %v left after a stopping shutdown", left)
	}
}

// TestProcessPoolRelativeDataDir: with a relative data directory (the CLI's
// default), a guest's HOME must still be its own absolute home, the same one
// its programs start in; a relative one nested homes inside themselves and
// made files written through the terminal invisible to the evaluator.
func TestProcessPoolRelativeDataDir(t *testing.T) {
	desktopd, _ := binaries(t)
	t.Chdir(t.TempDir())
	env := daemontest.Env(t)
	env.DataDir = filepath.Join("rel", "data")
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{processPool(t, "rel", 1, desktopd, true)}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	lease, err := c.AcquireLease(ctxT(t, time.Minute), &rolloutmeshv1.AcquireLeaseRequest{
		Pool: "rel", WaitTimeout: durationpb.New(30 * time.Second), Ttl: durationpb.New(time.Minute),
	})
	if err != nil {
		t.Fatalf("AcquireLease: %v", err)
	}
	got := strings.Fields(execute(t, lease.GetEndpoint(), "sh", "-c", `echo "$HOME"; pwd`))
	if len(got) != 2 || !filepath.IsAbs(got[0]) || got[0] != got[1] || strings.Count(got[0], "rel/data") != 1 {
		t.Fatalf("guest HOME and working dir = %q, want one absolute home directory", got)
	}
	if _, err := os.Stat(filepath.Join(got[0], "template.txt")); err != nil {
		t.Errorf("home %s lacks the template: %v", got[0], err)
	}
}
