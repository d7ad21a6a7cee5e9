package qemu

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/procinfo"
)

func TestParseSnapshots(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []string
	}{
		{"none", "There is no snapshot available.\r\n", nil},
		{"two", "List of snapshots present on all disks:\r\nID        TAG               VM SIZE                DATE     VM CLOCK     ICOUNT\r\n" +
			"--        ready             62.6 MiB 2026-11-25 17:40:01 00:00:21.870           \r\n" +
			"--        other             63.1 MiB 2026-11-25 17:41:10 00:00:50.120           \r\n", []string{"ready", "other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseSnapshots(tc.out); !slices.Equal(got, tc.want) {
				t.Errorf("parseSnapshots = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPortsRoundTrip(t *testing.T) {
	in := map[string]int{"server": 40001, "chrome": 40002, "vlc": 40003}
	s := formatPorts(in)
	if s != "chrome=40002,server=40001,vlc=40003" {
		t.Errorf("formatPorts = %q", s)
	}
	got, err := parsePorts(s)
	if err != nil || len(got) != 3 || got["server"] != 40001 || got["vlc"] != 40003 {
		t.Errorf("parsePorts(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "server", "server=x", "server=0", "server=70000"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q) succeeded", bad)
		}
	}
}

// unitProvider is a Provider for the tests that start no QEMU.
func unitProvider(t *testing.T, q config.QEMU) *Provider {
	t.Helper()
	q.Binary = "sh"
	if q.Image == "" {
		q.Image = "/base.qcow2"
	}
	p := &Provider{o: Options{Config: q, Snapshot: "ready", CPUs: 2, MemoryMB: 2048, ScreenWidth: 1280, ScreenHeight: 800,
		Dir: t.TempDir(), Logger: zap.NewNop()}, base: q.Image, accel: "tcg", clk: clock.Real{},
		ports: map[int]string{}, children: map[int]*child{}, locks: map[string]*vmLock{}, clocks: map[string]net.Conn{}}
	return p
}

func TestArgs(t *testing.T) {
	p := unitProvider(t, config.QEMU{Host: "127.0.0.1", GuestPort: 5000, Ports: map[string]int{"chrome": 9222, "vlc": 8080},
		Kernel: "/k", Initrd: "/i", VGA: "none", GuestToken: "s3cret"})
	inst := pool.Instance{Data: map[string]string{dataDir: "/s/vm-1", dataOverlay: "/s/vm-1/overlay.qcow2",
		dataQMP: "/s/vm-1/qmp.sock", dataClock: "/s/vm-1/clock.sock"}}
	args := strings.Join(p.Args("vm-1", inst, map[string]int{"server": 41000, "chrome": 41001, "vlc": 41002}), " ")
	for _, want := range []string{
		"-accel tcg", "-m 2048", "-smp 2", "-vga none",
		"file=/s/vm-1/overlay.qcow2,if=virtio,format=qcow2",
		"hostfwd=tcp:127.0.0.1:41000-:5000,hostfwd=tcp:127.0.0.1:41001-:9222,hostfwd=tcp:127.0.0.1:41002-:8080",
		"-qmp unix:/s/vm-1/qmp.sock,server=on,wait=off",
		"-serial chardev:clock", "-kernel /k -initrd /i",
		"SCREEN_WIDTH=1280 SCREEN_HEIGHT=800 DESKTOPD_ADDR=:5000",
		"-fw_cfg name=opt/rolloutmesh/token,file=/s/vm-1/token",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
	// The base image is only the overlay's backing file, and the token is
	// never on the command line (ps shows it to every user).
	for _, bad := range []string{"/base.qcow2", "s3cret"} {
		if strings.Contains(args, bad) {
			t.Errorf("args contain %q:\n%s", bad, args)
		}
	}
}

func TestDetectAccelConfigured(t *testing.T) {
	for _, a := range []string{"kvm", "tcg"} {
		if got, _ := DetectAccel(a); got != a {
			t.Errorf("DetectAccel(%q) = %q", a, got)
		}
	}
	got, why := DetectAccel("auto")
	if got != "kvm" && got != "tcg" || why == "" {
		t.Errorf("DetectAccel(auto) = %q, %q", got, why)
	}
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil && got != "tcg" {
		t.Errorf("DetectAccel(auto) on a PVM host = %q, want tcg", got)
	}
}

// TestSweepKillsStrays starts a process that looks like a QEMU of this
// state directory (its command line names an overlay there) and wants Sweep
// to kill it and remove its directory, leaving a known VM's alone.
func TestSweepKillsStrays(t *testing.T) {
	p := unitProvider(t, config.QEMU{})
	start := func(id string) *exec.Cmd {
		os.MkdirAll(p.vmDir(id), 0o700)
		// "sleep; :" keeps sh from exec'ing sleep, so the command line stays.
		cmd := exec.Command("sh", "-c", "sleep 60; :", "qemu-system-x86_64",
			"file="+filepath.Join(p.vmDir(id), "overlay.qcow2")+",if=virtio")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	stray, kept := start("vm-stray"), start("vm-kept")
	exited := make(chan struct{})
	go func() { stray.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Sweep(ctx, map[string]bool{"vm-kept": true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("stray still running after Sweep")
	}
	if _, err := os.Stat(p.vmDir("vm-stray")); !os.IsNotExist(err) {
		t.Errorf("stray dir still there: %v", err)
	}
	if !procinfo.Alive(kept.Process.Pid) {
		t.Error("known vm's process was killed")
	}
	if _, err := os.Stat(p.vmDir("vm-kept")); err != nil {
		t.Errorf("known vm's dir: %v", err)
	}
}

func TestPrepareRefusesOtherOverrides(t *testing.T) {
	p := unitProvider(t, config.QEMU{})
	ctx := context.Background()
	if err := p.Prepare(ctx, "vm-1", pool.Instance{}, pool.EnvOverrides{Proxy: true}); err == nil {
		t.Error("Prepare with proxy succeeded")
	}
	if err := p.Prepare(ctx, "vm-1", pool.Instance{}, pool.EnvOverrides{Snapshot: "ready"}); err != nil {
		t.Errorf("Prepare with the pool's own snapshot: %v", err)
	}
	if err := p.Prepare(ctx, "vm-1", pool.Instance{}, pool.EnvOverrides{Snapshot: "a b"}); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Errorf("Prepare with a bad snapshot name = %v", err)
	}
	if err := p.Prepare(ctx, "vm-1", pool.Instance{Data: map[string]string{dataPID: strconv.Itoa(1 << 30)}}, pool.EnvOverrides{Snapshot: "other"}); err == nil {
		t.Error("Prepare on a gone vm succeeded")
	}
}
