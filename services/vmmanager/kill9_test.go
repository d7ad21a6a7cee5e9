package vmmanager

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/docker"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
)

// runVMManager starts the real vmmanager binary.
func runVMManager(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(filepath.Join(t.TempDir(), "vmmanager.log"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("vmmanager log:\n%s", tailString(string(b), 4000))
		}
	})
	return cmd
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// desktopdPIDs lists running desktopd processes whose home is under dir.
func desktopdPIDs(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// kill9Case is one provider in the kill -9 test.
type kill9Case struct {
	poolYAML string
	// live returns the provider's handles of the pool's VMs (pids, containers).
	live func() []string
	// plantStray creates a VM no record knows and returns a check that it is gone.
	plantStray func() (gone func() bool)
}

// TestKill9KeepsLeases SIGKILLs a vmmanager holding two leases, plants a
// stray VM, restarts it: the leases are still valid with their tokens and
// remaining TTL, the VMs are adopted (not re-created), the stray is
// destroyed, and after a SIGTERM nothing is left running.
func TestKill9KeepsLeases(t *testing.T) {
	t.Run("process", func(t *testing.T) {
		need(t, "Xvfb", haveBinary("Xvfb"))
		need(t, "openbox", haveBinary("openbox"))
		desktopd, _ := binaries(t)
		var vmsDir string
		kill9(t, func(dataDir string) kill9Case {
			vmsDir = filepath.Join(dataDir, "vms", "local")
			return kill9Case{
				poolYAML: fmt.Sprintf(`
  - name: local
    provider: process
    size: 2
    screen_width: 1024
    screen_height: 768
    process:
      desktopd: %s
      base_port: 15300
      base_display: 170
`, desktopd),
				live: func() []string { return pidStrings(desktopdPIDs(vmsDir)) },
				plantStray: func() func() bool {
					strayHome := filepath.Join(vmsDir, "local-stray", "home")
					os.MkdirAll(strayHome, 0o700)
					stray := exec.Command(desktopd, "--addr", fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), "--display", "none", "--home", strayHome)
					stray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					if err := stray.Start(); err != nil {
						t.Fatal(err)
					}
					go stray.Wait()
					return func() bool { return len(desktopdPIDs(strayHome)) == 0 }
				},
			}
		})
	})
	t.Run("docker", func(t *testing.T) {
		need(t, "a Docker engine", dockerReady())
		desktopd, _ := binaries(t)
		buildScratchImage(t, desktopd)
		name := fmt.Sprintf("k9%d", time.Now().UnixNano()%1e6)
		kill9(t, func(dataDir string) kill9Case {
			return kill9Case{
				poolYAML: fmt.Sprintf(`
  - name: %s
    provider: docker
    size: 2
    docker:
      image: %s
`, name, scratchImage),
				live: func() []string {
					var ids []string
					for _, c := range poolContainers(t, name) {
						ids = append(ids, c.ID)
					}
					sort.Strings(ids)
					return ids
				},
				plantStray: func() func() bool {
					cli, err := docker.NewClient()
					if err != nil {
						t.Fatal(err)
					}
					defer cli.Close()
					existing := poolContainers(t, name)
					labels := map[string]string{}
					for k, v := range existing[0].Labels {
						labels[k] = v
					}
					labels[docker.LabelVM] = name + "-stray"
					resp, err := cli.ContainerCreate(context.Background(), &container.Config{Image: scratchImage, Labels: labels}, nil, nil, nil, "")
					if err != nil {
						t.Fatal(err)
					}
					return func() bool {
						for _, c := range poolContainers(t, name) {
							if c.ID == resp.ID {
								return false
							}
						}
						return true
					}
				},
			}
		})
	})
}

func pidStrings(pids []int) []string {
	var out []string
	for _, p := range pids {
		out = append(out, strconv.Itoa(p))
	}
	sort.Strings(out)
	return out
}

func kill9(t *testing.T, mk func(dataDir string) kill9Case) {
	_, bin := binaries(t)
	dataDir := t.TempDir()
	tc := mk(dataDir)
	cfgPath := filepath.Join(t.TempDir(), "vmmanager.yaml")
	if err := os.WriteFile(cfgPath, []byte("pools:"+tc.poolYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	var poolName string
	fmt.Sscanf(strings.TrimSpace(tc.poolYAML), "- name: %s", &poolName)
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	args := []string{"--config", cfgPath, "--data-dir", dataDir, "--grpc-addr", addr, "--http-addr", "", "--log-format", "console"}
	vm1 := runVMManager(t, bin, args...)
	c := dial(t, addr)
	ctx := ctxT(t, 2*time.Minute)
	var leases []*rolloutmeshv1.Lease
	for i := 0; i < 2; i++ {
		var l *rolloutmeshv1.Lease
		var err error
		waitUntil(t, 60*time.Second, "vmmanager to lease", func() bool {
			l, err = c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: poolName, WaitTimeout: durationpb.New(20 * time.Second), Ttl: durationpb.New(10 * time.Minute), Holder: fmt.Sprint("ep-", i)})
			return err == nil
		})
		leases = append(leases, l)
	}
	before := tc.live()
	if len(before) != 2 {
		t.Fatalf("%d live VMs before the kill, want 2", len(before))
	}
	if err := vm1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	vm1.Wait()
	strayGone := tc.plantStray()

	vm2 := runVMManager(t, bin, args...)
	for _, l := range leases {
		var got *rolloutmeshv1.Lease
		var err error
		waitUntil(t, 30*time.Second, "restarted vmmanager to answer", func() bool {
			got, err = c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: l.LeaseId})
			return err == nil
		})
		if got.VmId != l.VmId || got.Endpoint != l.Endpoint || !got.ExpireTime.AsTime().Equal(l.ExpireTime.AsTime()) {
			t.Errorf("lease after restart = %v, want vm %s endpoint %s expiry %v", got, l.VmId, l.Endpoint, l.ExpireTime.AsTime())
		}
		if _, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
			t.Errorf("renew with the old token after restart: %v", err)
		}
		if code, _ := get(t, l.Endpoint+"/platform"); code != 200 {
			t.Errorf("%s/platform after restart: %d", l.Endpoint, code)
		}
	}
	waitUntil(t, 20*time.Second, "stray destroyed", strayGone)
	if after := tc.live(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("live VMs after restart %v, want the adopted %v", after, before)
	}
	vms, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vms.Vms) != 2 {
		t.Errorf("ListVMs has %d VMs, want 2", len(vms.Vms))
	}
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: leases[0].LeaseId, Token: leases[0].Token}); err != nil {
		t.Fatal(err)
	}
	// SIGTERM stops every VM.
	if err := vm2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := vm2.Wait(); err != nil {
		t.Errorf("vmmanager exit after SIGTERM: %v, want status 0", err)
	}
	if left := tc.live(); len(left) != 0 {
		t.Errorf("VMs %v left after SIGTERM", left)
	}
}
