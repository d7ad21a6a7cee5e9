package qemu

import (
	"context"
	"errors"
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

// fakeAccelHost stands for the host's /dev/kvm, kvm_pvm module and
// /proc/cpuinfo.
type fakeAccelHost struct {
	kvmErr  error
	pvm     bool
	cpuinfo string
	cpuErr  error
}

func (h fakeAccelHost) OpenKVM() error           { return h.kvmErr }
func (h fakeAccelHost) PVM() bool                { return h.pvm }
func (h fakeAccelHost) CPUInfo() ([]byte, error) { return []byte(h.cpuinfo), h.cpuErr }

func TestDetectAccel(t *testing.T) {
	const (
		intel = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae vmx ssse3\nbugs\t\t: spectre_v1\n"
		amd   = "processor\t: 0\nflags\t\t: fpu vme svm sse4a\n"
		plain = "processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor\nvmx flags\t: ept\n"
	)
	noKVM := &os.PathError{Op: "open", Path: "/dev/kvm", Err: syscall.ENOENT}
	tests := []struct {
		name       string
		configured string
		host       fakeAccelHost
		want       string
		why        string // a part of the reason
	}{
		{"kvm configured without /dev/kvm", "kvm", fakeAccelHost{kvmErr: noKVM}, "kvm", "configured"},
		{"tcg configured on a kvm host", "tcg", fakeAccelHost{cpuinfo: intel}, "tcg", "configured"},
		{"no /dev/kvm", "auto", fakeAccelHost{kvmErr: noKVM, cpuinfo: intel}, "tcg", "no usable /dev/kvm"},
		{"/dev/kvm not writable", "auto", fakeAccelHost{kvmErr: &os.PathError{Op: "open", Path: "/dev/kvm", Err: syscall.EACCES}, cpuinfo: intel}, "tcg", "permission denied"},
		{"paravirtual kvm with vmx", "auto", fakeAccelHost{pvm: true, cpuinfo: intel}, "tcg", "kvm_pvm"},
		{"intel vmx", "auto", fakeAccelHost{cpuinfo: intel}, "kvm", "(vmx)"},
		{"amd svm", "auto", fakeAccelHost{cpuinfo: amd}, "kvm", "(svm)"},
		// "vmx flags" is a line of its own, not the CPU's flags.
		{"no vmx/svm flag", "auto", fakeAccelHost{cpuinfo: plain}, "tcg", "no vmx/svm"},
		{"cpuinfo unreadable", "auto", fakeAccelHost{cpuErr: syscall.EIO}, "tcg", "read /proc/cpuinfo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := detectAccel(tc.configured, tc.host)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("detectAccel(%q) = %q, %q; want %q, a reason with %q", tc.configured, got, why, tc.want, tc.why)
			}
		})
	}
}

// TestDetectAccelThisHost: on a host with a paravirtual KVM (this CI's
// machines) auto must not pick kvm.
func TestDetectAccelThisHost(t *testing.T) {
	if !(hostAccel{}).PVM() {
		t.Skip("no kvm_pvm module on this host")
	}
	if got, why := DetectAccel("auto"); got != "tcg" {
		t.Errorf("DetectAccel(auto) on a PVM host = %q (%s), want tcg", got, why)
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
	case <-time.After(30 * time.Second):
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
	p := unitProvider(t, config.QEMU{Snapshots: []config.QEMUSnapshot{{Name: "task", Command: []string{"true"}}}})
	gone := pool.Instance{Data: map[string]string{dataPID: strconv.Itoa(1 << 30)}}
	tests := []struct {
		name        string
		env         pool.EnvOverrides
		unsupported bool   // refused as ErrUnsupported (FAILED_PRECONDITION)
		want        string // a part of the error; "" is success
	}{
		{"proxy", pool.EnvOverrides{Proxy: true}, true, "only the snapshot override"},
		{"fixed ip", pool.EnvOverrides{FixedIP: true}, true, "only the snapshot override"},
		{"the pool's own snapshot", pool.EnvOverrides{Snapshot: "ready"}, false, ""},
		{"a snapshot no vm has", pool.EnvOverrides{Snapshot: "chrome"}, true, `snapshot "chrome" is not one of this pool's (ready, task;`},
		{"a bad name", pool.EnvOverrides{Snapshot: "a b"}, true, "is not one of this pool's"},
		// A configured one is restored: on a gone VM that fails, and not as
		// an unsupported override.
		{"a configured snapshot on a gone vm", pool.EnvOverrides{Snapshot: "task"}, false, "gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Prepare(context.Background(), "vm-1", gone, tc.env)
			if tc.want == "" {
				if err != nil {
					t.Errorf("Prepare = %v, want success", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, pool.ErrUnsupported) != tc.unsupported {
				t.Errorf("Prepare = %v; want an error with %q, unsupported %v", err, tc.want, tc.unsupported)
			}
		})
	}
}

func TestLeaseAddr(t *testing.T) {
	const mac = "52:54:00:ab:cd:ef"
	tests := []struct {
		name   string
		leases string
		want   string
	}{
		{"none", "", ""},
		{"one", "1764340000 52:54:00:ab:cd:ef 10.77.0.23 rolloutmesh-guest 01:52:54:00:ab:cd:ef\n", "10.77.0.23"},
		{"upper case mac", "1764340000 52:54:00:AB:CD:EF 10.77.0.23 * *\n", "10.77.0.23"},
		{"another vm's", "1764340000 52:54:00:ab:cd:ee 10.77.0.24 * *\n", ""},
		{"the later of two", "1764349999 52:54:00:ab:cd:ef 10.77.0.30 * *\n1764340000 52:54:00:ab:cd:ef 10.77.0.23 * *\n", "10.77.0.30"},
		{"infinite wins", "0 52:54:00:ab:cd:ef 10.77.0.5 * *\n1764349999 52:54:00:ab:cd:ef 10.77.0.30 * *\n", "10.77.0.5"},
		{"dhcpv6 lines skipped", "duid 00:01:00:01:2c:aa:bb:cc:52:54:00:00:00:01\n1764340000 1234 fd00::5 * 00:01\n1764340000 52:54:00:ab:cd:ef 10.77.0.23 * *\n", "10.77.0.23"},
		{"garbage", "x 52:54:00:ab:cd:ef 10.77.0.23\n1764340000 52:54:00:ab:cd:ef not-an-ip\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := leaseAddr([]byte(tc.leases), mac)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("leaseAddr = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestArgsBridge(t *testing.T) {
	p := unitProvider(t, config.QEMU{Network: "bridge", Bridge: "br7", BridgeHelper: "/usr/lib/qemu/qemu-bridge-helper",
		GuestPort: 5000, Kernel: "/k", Initrd: "/i", VGA: "none"})
	mac := p.mac("vm-1")
	if mac == p.mac("vm-2") || !strings.HasPrefix(mac, "52:54:00:") || len(mac) != 17 {
		t.Errorf("mac(vm-1) = %q, mac(vm-2) = %q: want distinct 52:54:00 addresses", mac, p.mac("vm-2"))
	}
	inst := pool.Instance{Data: map[string]string{dataDir: "/s/vm-1", dataOverlay: "/s/vm-1/overlay.qcow2",
		dataQMP: "/s/vm-1/qmp.sock", dataClock: "/s/vm-1/clock.sock", dataMAC: mac}}
	args := strings.Join(p.Args("vm-1", inst, nil), " ")
	for _, want := range []string{
		"-netdev bridge,id=net0,br=br7,helper=/usr/lib/qemu/qemu-bridge-helper",
		"-device virtio-net-pci,netdev=net0,mac=" + mac,
		"DESKTOPD_ADDR=:5000 GUEST_NET=dhcp",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q:\n%s", want, args)
		}
	}
	if strings.Contains(args, "hostfwd") {
		t.Errorf("bridged args forward ports:\n%s", args)
	}
}

// TestNewRefusesSocketPathsTooLong: a VM's sockets live at
// <dir>/<vm id>/clock.sock, and vm ids hold the pool's name
// ("<pool>-<8 hex>"). The check assumed 19-byte ids, so a data dir and a
// pool name that passed it could still make every boot fail.
func TestNewRefusesSocketPathsTooLong(t *testing.T) {
	base := "/var/lib/rolloutmesh/vmmanager/vms/"
	tests := []struct {
		name    string
		pool    string
		tooLong bool
	}{
		{"short pool", "desk", false},
		{"30-byte pool", strings.Repeat("p", 30), true},
		{"longest pool name that fits", strings.Repeat("p", 25), false},
		{"a pool name one byte longer", strings.Repeat("p", 26), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := base + tt.pool
			// The binary does not exist: New fails after the path check
			// when the paths fit.
			_, err := New(Options{Config: config.QEMU{Binary: "no-such-qemu-binary", Image: "base.qcow2"}, Dir: dir, VMIDLen: pool.VMIDLen(tt.pool)})
			if err == nil {
				t.Fatal("New succeeded without a qemu binary")
			}
			vmDir := filepath.Join(dir, tt.pool+"-0123abcd")
			fits := len(filepath.Join(vmDir, "clock.sock")) <= maxSocketPath
			if got := strings.Contains(err.Error(), "too long for the VMs' unix sockets"); got != tt.tooLong || fits == tt.tooLong {
				t.Errorf("err = %v; refused for length: %v, want %v (clock.sock path fits: %v)", err, got, tt.tooLong, fits)
			}
		})
	}
}
