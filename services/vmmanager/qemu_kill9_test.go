package vmmanager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/procinfo"
)

// qemuBootWait bounds one boot of the built guest to a healthy, snapshotted
// VM under software emulation on a busy 2-core machine.
const qemuBootWait = 10 * time.Minute

// qemuImage finds the guest image of make guest-qcow2 (or
// $ROLLOUTMESH_QEMU_IMAGE); the test fails under CI without it or QEMU.
func qemuImage(t *testing.T) string {
	t.Helper()
	need(t, "qemu-system-x86_64 (Debian: qemu-system-x86)", haveBinary("qemu-system-x86_64"))
	need(t, "qemu-img (Debian: qemu-utils)", haveBinary("qemu-img"))
	img := os.Getenv("ROLLOUTMESH_QEMU_IMAGE")
	if img == "" {
		wd, _ := os.Getwd()
		img = filepath.Join(wd, "..", "..", ".cache", "guest", "desktop.qcow2")
	}
	_, err := os.Stat(img)
	need(t, "the guest image "+img+" (make guest-qcow2)", err == nil)
	abs, err := filepath.Abs(img)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// qemuPIDs lists the live QEMU processes running an overlay under dir.
func qemuPIDs(dir string) []string {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl := procinfo.Cmdline(pid)
		if strings.Contains(cl, "qemu-system") && strings.Contains(cl, "file="+dir) && procinfo.Alive(pid) {
			out = append(out, pid)
		}
	}
	return pidStrings(out)
}

// guestRun runs a shell script in the guest through desktopd.
func guestRun(t *testing.T, endpoint, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A connection per request: one kept alive from before a restore is dead.
	g := guest.Client{HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	out, err := g.Execute(ctx, endpoint, "", []string{"sh", "-c", script})
	return strings.TrimSpace(out), err
}

// onlyVM waits until the pool's only VM is in state want and returns it.
func onlyVM(t *testing.T, c rolloutmeshv1.VMManagerClient, want rolloutmeshv1.VMState, d time.Duration) *rolloutmeshv1.VM {
	t.Helper()
	var vm *rolloutmeshv1.VM
	waitUntil(t, d, "the vm to be "+want.String(), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{})
		if err != nil || len(r.Vms) != 1 || r.Vms[0].State != want {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		vm = r.Vms[0]
		return true
	})
	return vm
}

// TestQEMUKill9AndKeepVMs runs the real vmmanager binary over gRPC with a
// qemu pool of one VM on the built guest image, booted once for the whole
// story: a lease and a file written in the guest survive a kill -9 of
// vmmanager (the restarted one adopts the same QEMU process, the lease
// renews with its token, a stray QEMU of the state directory is killed);
// release resets the VM and the file is gone; SIGTERM with
// --keep-vms-on-exit leaves QEMU running and the next start adopts it;
// SIGTERM without it stops every QEMU and removes the VM's files.
func TestQEMUKill9AndKeepVMs(t *testing.T) {
	img := qemuImage(t)
	_, bin := binaries(t)
	// Short: QMP and clock sockets live under it (107-byte limit).
	dataDir, err := os.MkdirTemp("", "qk9")
	if err != nil {
		t.Fatal(err)
	}
	vmsDir := filepath.Join(dataDir, "vms", "q")
	t.Cleanup(func() {
		for _, p := range qemuPIDs(vmsDir) {
			pid, _ := strconv.Atoi(p)
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		os.RemoveAll(dataDir)
	})
	cfgPath := filepath.Join(t.TempDir(), "vmmanager.yaml")
	cfg := fmt.Sprintf(`pools:
  - name: q
    provider: qemu
    size: 1
    screen_width: 1024
    screen_height: 768
    memory_mb: 768
    boot_timeout: %s
    qemu:
      image: %s
`, qemuBootWait, img)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	args := []string{"--config", cfgPath, "--data-dir", dataDir, "--grpc-addr", addr, "--http-addr", "", "--log-format", "console"}
	keep := append(append([]string(nil), args...), "--keep-vms-on-exit")
	c := dial(t, addr)
	ctx := ctxT(t, 30*time.Minute)

	vm1 := runVMManager(t, bin, keep...)
	start := time.Now()
	booted := onlyVM(t, c, rolloutmeshv1.VMState_VM_STATE_READY, qemuBootWait)
	t.Logf("first boot to ready: %v", time.Since(start).Round(time.Second))
	l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "q", WaitTimeout: durationpb.New(time.Minute),
		Ttl: durationpb.New(20 * time.Minute), Holder: "qemu-kill9"})
	if err != nil {
		t.Fatal(err)
	}
	pids := qemuPIDs(vmsDir)
	if len(pids) != 1 || pids[0] != booted.ProviderRef {
		t.Fatalf("qemu processes %v, want the vm's %s", pids, booted.ProviderRef)
	}
	const marker = "/home/user/kill9.txt"
	if _, err := guestRun(t, l.Endpoint, "echo dirty > "+marker+" && sync"); err != nil {
		t.Fatalf("write in guest: %v", err)
	}

	// kill -9: QEMU runs on in its own process group.
	if err := vm1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	vm1.Wait()
	if got := qemuPIDs(vmsDir); fmt.Sprint(got) != fmt.Sprint(pids) {
		t.Fatalf("qemu after kill -9 of vmmanager: %v, want %v", got, pids)
	}
	// A QEMU of this state directory that no record knows (its command
	// line is what Sweep matches: qemu, and an overlay in the directory).
	stray := exec.Command("sh", "-c", "sleep 600; :", "qemu-system-x86_64",
		"file="+filepath.Join(vmsDir, "q-stray", "overlay.qcow2")+",if=virtio")
	stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan struct{})
	go func() { stray.Wait(); close(strayDone) }()
	t.Cleanup(func() { syscall.Kill(-stray.Process.Pid, syscall.SIGKILL); <-strayDone })

	vm2 := runVMManager(t, bin, keep...)
	var got *rolloutmeshv1.Lease
	waitUntil(t, 2*time.Minute, "the restarted vmmanager to answer", func() bool {
		got, err = c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: l.LeaseId})
		return err == nil
	})
	if got.VmId != l.VmId || got.Endpoint != l.Endpoint {
		t.Errorf("lease after restart = %v, want vm %s at %s", got, l.VmId, l.Endpoint)
	}
	if _, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
		t.Errorf("renew with the old token after restart: %v", err)
	}
	if got := qemuPIDs(vmsDir); fmt.Sprint(got) != fmt.Sprint(pids) {
		t.Errorf("qemu after restart: %v, want the adopted %v", got, pids)
	}
	select {
	case <-strayDone:
	case <-time.After(30 * time.Second):
		t.Error("the stray qemu still runs 30s after the restart")
	}
	// Adopted, not reset: the file is still there.
	if out, err := guestRun(t, l.Endpoint, "cat "+marker); err != nil || out != "dirty" {
		t.Errorf("after the restart the file reads %q (%v), want dirty", out, err)
	}
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	ready := onlyVM(t, c, rolloutmeshv1.VMState_VM_STATE_READY, 2*time.Minute)
	if ready.VmId != l.VmId || ready.ProviderRef != pids[0] {
		t.Errorf("after release: vm %s pid %s, want the adopted %s pid %s", ready.VmId, ready.ProviderRef, l.VmId, pids[0])
	}
	if out, err := guestRun(t, l.Endpoint, "test -e "+marker+" && echo present || echo gone"); err != nil || out != "gone" {
		t.Errorf("after the reset the file is %q (%v), want gone", out, err)
	}

	// SIGTERM with --keep-vms-on-exit: QEMU keeps running.
	if err := vm2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := vm2.Wait(); err != nil {
		t.Errorf("vmmanager exit after SIGTERM: %v, want status 0", err)
	}
	if got := qemuPIDs(vmsDir); fmt.Sprint(got) != fmt.Sprint(pids) {
		t.Fatalf("qemu after SIGTERM with --keep-vms-on-exit: %v, want %v still running", got, pids)
	}

	// The next start (without the flag) adopts the ready VM.
	vm3 := runVMManager(t, bin, args...)
	adopted := onlyVM(t, c, rolloutmeshv1.VMState_VM_STATE_READY, 2*time.Minute)
	if adopted.VmId != l.VmId || adopted.ProviderRef != pids[0] {
		t.Errorf("after the keep-vms restart: vm %s pid %s, want the adopted %s pid %s", adopted.VmId, adopted.ProviderRef, l.VmId, pids[0])
	}
	l2, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "q", WaitTimeout: durationpb.New(time.Minute),
		Ttl: durationpb.New(5 * time.Minute), Holder: "qemu-keep"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := guestRun(t, l2.Endpoint, "echo up"); err != nil || out != "up" {
		t.Errorf("guest of the adopted vm: %q, %v", out, err)
	}

	// SIGTERM without the flag stops every QEMU and removes its files.
	if err := vm3.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := vm3.Wait(); err != nil {
		t.Errorf("vmmanager exit after SIGTERM: %v, want status 0", err)
	}
	if left := qemuPIDs(vmsDir); len(left) != 0 {
		t.Errorf("qemu %v left after SIGTERM", left)
	}
	if entries, _ := os.ReadDir(vmsDir); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("vm files left after SIGTERM: %v", names)
	}
}
