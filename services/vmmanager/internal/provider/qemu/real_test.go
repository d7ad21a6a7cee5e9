package qemu

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/procinfo"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// These tests boot the desktop guest image of deploy/guest/build-qcow2.sh
// (.cache/guest/desktop.qcow2, or $ROLLOUTMESH_QEMU_IMAGE) under real QEMU,
// software emulation unless /dev/kvm works. They skip on a machine without
// qemu-system-x86_64, qemu-img or the image, and fail under CI.

// bootTimeout bounds a boot to a healthy guest on a busy 2-core machine.
const bootTimeout = 6 * time.Minute

func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required under CI but missing", what)
	}
	t.Skipf("%s missing; install it to run this test (it fails under CI)", what)
}

// testImage finds the built guest image.
func testImage(t *testing.T) string {
	t.Helper()
	for _, b := range []string{"qemu-system-x86_64", "qemu-img"} {
		_, err := exec.LookPath(b)
		need(t, b+" (Debian: qemu-system-x86, qemu-utils)", err == nil)
	}
	img := os.Getenv("ROLLOUTMESH_QEMU_IMAGE")
	if img == "" {
		dir, _ := os.Getwd()
		for ; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
				break
			}
		}
		img = filepath.Join(dir, ".cache", "guest", "desktop.qcow2")
	}
	_, err := os.Stat(img)
	need(t, "the guest image "+img+" (make guest-qcow2)", err == nil)
	return img
}

// shortDir is a state directory short enough for unix socket paths
// (t.TempDir's names are long).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "qm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// poolSpec is a validated qemu pool of the test image.
func poolSpec(t *testing.T, img string) config.Pool {
	t.Helper()
	pools := []config.Pool{{Name: "q", Provider: config.ProviderQEMU, Size: 1, ScreenWidth: 1024, ScreenHeight: 768,
		MemoryMB: 768, QEMU: &config.QEMU{Image: img}}}
	if err := config.Validate(pools); err != nil {
		t.Fatal(err)
	}
	return pools[0]
}

func newProvider(t *testing.T, spec config.Pool, dir string, log *zap.Logger) *Provider {
	t.Helper()
	p, err := New(Options{Config: *spec.QEMU, Snapshot: spec.SnapshotName, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB,
		ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func execute(t *testing.T, endpoint string, script string) (string, error) {
	t.Helper()
	return executeAs(t, endpoint, "", script)
}

// executeAs runs a shell script in the guest with a bearer token.
func executeAs(t *testing.T, endpoint, token, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A fresh connection per request, as a lease holder after a reset
	// needs: a connection kept alive from before a restore is dead.
	g := guest.Client{HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	return g.Execute(ctx, endpoint, token, []string{"sh", "-c", script})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// guestClockSkew is guest time minus host time.
func guestClockSkew(t *testing.T, endpoint, token string) time.Duration {
	t.Helper()
	before := time.Now()
	out, err := executeAs(t, endpoint, token, "date +%s.%N")
	if err != nil {
		t.Fatalf("date in guest: %v", err)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil {
		t.Fatalf("guest date %q: %v", out, err)
	}
	mid := before.Add(time.Since(before) / 2)
	return time.Duration((f - float64(mid.UnixNano())/1e9) * float64(time.Second))
}

// TestResetRevertsDiskAndClock boots a VM, writes a file in the guest
// through desktopd, resets and wants the file gone, the guest answering and
// its clock corrected; then restores the pool's other snapshot (saved at
// boot by qemu.snapshots, for a task's env_config.snapshot) and refuses one
// the pool does not save.
func TestResetRevertsDiskAndClock(t *testing.T) {
	img := testImage(t)
	spec := poolSpec(t, img)
	// The guest reads its token from fw_cfg, never from a command line.
	const token = "s3cret-qemu"
	spec.QEMU.GuestToken = token
	// The task's snapshot: a file and an open window (a program started
	// in the background, as the README shows).
	spec.QEMU.Snapshots = []config.QEMUSnapshot{{Name: "task",
		Command:      []string{"sh", "-c", "echo task > /home/user/task.txt && sync && (xterm >/dev/null 2>&1 &)"},
		ReadyCommand: []string{"sh", "-c", "wmctrl -lx | grep -q XTerm"}}}
	p := newProvider(t, spec, shortDir(t), zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	start := time.Now()
	inst, err := p.Create(ctx, "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot to healthy, snapshot saved: %v (accel %s)", time.Since(start).Round(time.Millisecond), p.Accel())
	defer p.Destroy(context.Background(), "vm-1", inst)
	if _, err := execute(t, inst.Endpoint, "true"); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("guest answered a request without its token: %v", err)
	}
	if strings.Contains(procinfo.Cmdline(mustAtoi(t, inst.Ref)), token) {
		t.Error("the token is on QEMU's command line")
	}

	const marker = "/home/user/leftover.txt"
	if _, err := executeAs(t, inst.Endpoint, token, "echo dirty > "+marker+" && sync"); err != nil {
		t.Fatalf("write in guest: %v", err)
	}
	if out, err := executeAs(t, inst.Endpoint, token, "cat "+marker); err != nil || strings.TrimSpace(out) != "dirty" {
		t.Fatalf("read back = %q, %v", out, err)
	}
	// Let the guest clock fall visibly behind what a restore would give
	// back without the clock line: the snapshot's time is older still.
	time.Sleep(3 * time.Second)
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	start = time.Now()
	ni, err := p.Reset(rctx, "vm-1", inst)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	t.Logf("reset to healthy: %v", time.Since(start).Round(time.Millisecond))
	if ni.Endpoint != inst.Endpoint {
		t.Errorf("endpoint changed on reset: %s → %s", inst.Endpoint, ni.Endpoint)
	}
	if out, err := executeAs(t, inst.Endpoint, token, "test -e "+marker+" && echo present || echo gone"); err != nil || strings.TrimSpace(out) != "gone" {
		t.Errorf("after reset the file is %q (%v), want gone", strings.TrimSpace(out), err)
	}
	// The clock line is read right after the restore; allow the guest a
	// moment, then want it within 2 s of the host's.
	var skew time.Duration
	for i := 0; i < 20; i++ {
		if skew = guestClockSkew(t, inst.Endpoint, token); skew.Abs() < 2*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if skew.Abs() >= 2*time.Second {
		diag, _ := executeAs(t, inst.Endpoint, token, "ls -l /dev/ttyS*; ps -ef | grep -v grep | grep -e init -e sh; dmesg 2>&1 | grep -i tty")
		t.Errorf("guest clock is %v off the host's after reset, want < 2s; guest:\n%s", skew, diag)
	}

	// The task's snapshot: saved at boot after its command wrote
	// task.txt; the VM was handed out at ready, without the file.
	names, err := p.Snapshots(rctx, inst)
	if err != nil || !slices.Equal(names, []string{"ready", "task"}) {
		t.Errorf("snapshots of the vm = %q, %v; want ready, task", names, err)
	}
	if out, err := executeAs(t, inst.Endpoint, token, "test -e /home/user/task.txt && echo present || echo gone"); err != nil || strings.TrimSpace(out) != "gone" {
		t.Errorf("at ready task.txt is %q (%v), want gone", strings.TrimSpace(out), err)
	}
	if err := p.Prepare(rctx, "vm-1", inst, pool.EnvOverrides{Snapshot: "task"}); err != nil {
		t.Fatalf("prepare snapshot task: %v", err)
	}
	if out, err := executeAs(t, inst.Endpoint, token, "cat /home/user/task.txt"); err != nil || strings.TrimSpace(out) != "task" {
		t.Errorf("after restoring task: task.txt = %q, %v", out, err)
	}
	const windows = "wmctrl -lx | grep -c XTerm || true"
	if out, err := executeAs(t, inst.Endpoint, token, windows); err != nil || strings.TrimSpace(out) != "1" {
		t.Errorf("after restoring task: %q xterm windows (%v), want 1", strings.TrimSpace(out), err)
	}
	if _, err := p.Reset(rctx, "vm-1", inst); err != nil {
		t.Fatal(err)
	}
	if out, err := executeAs(t, inst.Endpoint, token, "test -e /home/user/task.txt && echo present || echo gone"); err != nil || strings.TrimSpace(out) != "gone" {
		t.Errorf("after reset task.txt is %q (%v), want gone", strings.TrimSpace(out), err)
	}
	if out, err := executeAs(t, inst.Endpoint, token, windows); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("after reset: %q xterm windows (%v), want 0", strings.TrimSpace(out), err)
	}
	err = p.Prepare(rctx, "vm-1", inst, pool.EnvOverrides{Snapshot: "nosuch"})
	if !errors.Is(err, pool.ErrUnsupported) || !strings.Contains(err.Error(), `snapshot "nosuch" is not one of this pool's (ready, task`) {
		t.Errorf("prepare of a snapshot the pool does not save = %v, want it refused as unsupported", err)
	}
	// The base image was never written.
	if out, err := exec.Command("qemu-img", "snapshot", "-l", img).CombinedOutput(); err != nil || strings.Contains(string(out), "ready") {
		t.Errorf("base image has snapshots or cannot be read: %s %v", out, err)
	}
}

// testPool is a pool of one qemu VM over a real store in dataDir.
func testPool(t *testing.T, spec config.Pool, dataDir string, log *zap.Logger) (*pool.Pool, *Provider, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	prov := newProvider(t, spec, filepath.Join(dataDir, "vms"), log)
	p := pool.New(pool.Spec{Name: spec.Name, Provider: spec.Provider, Size: 1, OSType: "Debian",
		ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, BootTimeout: bootTimeout, ResetTimeout: time.Minute},
		pool.Options{Provider: prov, Store: st, Clock: clock.Real{}, Logger: log, Hub: pool.NewHub()})
	vms, err := st.VMs(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := st.Leases(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Restore(ctx, vms, leases); err != nil {
		t.Fatal(err)
	}
	p.Start()
	return p, prov, st
}

// readyVM waits for a ready VM other than not.
func readyVM(t *testing.T, p *pool.Pool, not string, d time.Duration) pool.VMView {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, v := range p.VMs() {
			if v.State == pool.StateReady && v.ID != not {
				return v
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no ready vm (other than %q) after %v: %+v", not, d, p.VMs())
	return pool.VMView{}
}

// TestCorruptOverlayReplaced leases a VM, overwrites its overlay (and so
// the snapshot in it) with zeros, releases it: the restore fails, the pool
// quarantines and destroys the VM and boots a replacement.
func TestCorruptOverlayReplaced(t *testing.T) {
	img := testImage(t)
	spec := poolSpec(t, img)
	dataDir := shortDir(t)
	p, prov, st := testPool(t, spec, dataDir, zaptest.NewLogger(t))
	defer st.Close()
	defer p.Close(context.Background(), false)
	first := readyVM(t, p, "", bootTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := p.Acquire(ctx, pool.AcquireRequest{Holder: "test", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(prov.vmDir(first.ID), "overlay.qcow2")
	zeroFrom(t, overlay, 64<<10)
	if err := p.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatal(err)
	}
	second := readyVM(t, p, first.ID, bootTimeout)
	for _, v := range p.VMs() {
		if v.ID == first.ID {
			t.Errorf("corrupted vm %s still in the pool: %+v", v.ID, v)
		}
	}
	if pid, _ := strconv.Atoi(first.Ref); pid > 0 && procinfo.Alive(pid) && strings.Contains(procinfo.Cmdline(pid), overlay) {
		t.Errorf("qemu %d of the corrupted vm still runs", pid)
	}
	if _, err := os.Stat(prov.vmDir(first.ID)); !os.IsNotExist(err) {
		t.Errorf("corrupted vm's dir still there: %v", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := prov.Check(cctx, pool.Instance{Endpoint: second.Endpoint, Data: map[string]string{dataPID: second.Ref}}); err != nil {
		t.Errorf("replacement unhealthy: %v", err)
	}
}

// zeroFrom overwrites path with zeros from offset off to its end.
func zeroFrom(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for o := off; o < st.Size(); o += int64(len(zero)) {
		n := min(int64(len(zero)), st.Size()-o)
		if _, err := f.WriteAt(zero[:n], o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMeasureResets boots one VM and times QEMU_MEASURE_RESETS resets
// (skipped when unset): boot-to-healthy and reset p50/p99, with the load
// average, for the report and docs/benchmarks.md.
func TestMeasureResets(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("QEMU_MEASURE_RESETS"))
	if n <= 0 {
		t.Skip("set QEMU_MEASURE_RESETS=20 to measure")
	}
	img := testImage(t)
	spec := poolSpec(t, img)
	// The debug log splits each restore into loadvm and health.
	p := newProvider(t, spec, shortDir(t), zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	start := time.Now()
	inst, err := p.Create(ctx, "vm-m")
	if err != nil {
		t.Fatal(err)
	}
	boot := time.Since(start)
	defer p.Destroy(context.Background(), "vm-m", inst)
	var ds []time.Duration
	for i := 0; i < n; i++ {
		if _, err := execute(t, inst.Endpoint, fmt.Sprintf("echo %d > /home/user/m.txt", i)); err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		s := time.Now()
		_, err := p.Reset(rctx, "vm-m", inst)
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(s))
	}
	t.Logf("resets in order: %v", ds)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	pct := func(q float64) time.Duration { // nearest rank
		k := int(q*float64(len(ds))+0.999999) - 1
		return ds[max(0, min(k, len(ds)-1))]
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("accel %s, memory %d MB: boot-to-healthy %v; %d resets p50 %v p99 %v max %v; loadavg %s",
		p.Accel(), spec.MemoryMB, boot.Round(time.Millisecond), n, pct(0.5).Round(time.Millisecond),
		pct(0.99).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), strings.TrimSpace(string(load)))
}
