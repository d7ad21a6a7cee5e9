package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// QEMU configures the qemu provider: each VM is a QEMU process running a
// copy-on-write overlay of one base qcow2 image, reset by restoring a
// memory+disk snapshot. The pool's cpus and memory_mb size each VM
// (defaults 1 and 1024) and snapshot_name names the snapshot taken once the
// guest answers (default "ready").
type QEMU struct {
	// Image is the base qcow2 (path_to_vm stands for it); it is only read.
	Image string `yaml:"image"`
	// Kernel and Initrd boot the image directly (no bootloader). Empty:
	// <image without .qcow2>.vmlinuz and .initrd when both exist next to
	// the image (what deploy/guest/build-qcow2.sh writes), else the
	// image's own bootloader (OSWorld's Ubuntu.qcow2).
	Kernel string `yaml:"kernel"`
	Initrd string `yaml:"initrd"`
	// Append is the kernel command line with Kernel (default: root on the
	// virtio disk, the serial console and rolloutmesh's init).
	Append string `yaml:"append"`
	// Binary is the QEMU program (default qemu-system-x86_64).
	Binary string `yaml:"binary"`
	// Accel is auto (default: kvm when /dev/kvm works with hardware
	// virtualization, else tcg), kvm or tcg.
	Accel string `yaml:"accel"`
	// GuestPort is the guest server's port inside the VM (default 5000;
	// OSWorld's server also listens on 5000).
	GuestPort int `yaml:"guest_port"`
	// Ports are other guest ports to forward, by the name leases report
	// them under, e.g. chrome: 9222, vlc: 8080.
	Ports map[string]int `yaml:"ports"`
	// Host is the host address the forwarded ports listen on (default
	// 127.0.0.1).
	Host string `yaml:"host"`
	// HealthPath is probed for readiness after a boot and after every
	// restore: default /healthz with a direct kernel boot (desktopd: the
	// server answers and its X display pings back), /screenshot otherwise
	// (what OSWorld waits for; its server has no /healthz).
	HealthPath string `yaml:"health_path"`
	// StateDir holds one directory per VM (overlay, QMP socket, log);
	// default <data-dir>/vms/<pool>.
	StateDir string `yaml:"state_dir"`
	// VGA is the emulated display adapter: none (default with a direct
	// kernel boot: the desktop runs on Xvfb in the guest) or std (default
	// otherwise: OSWorld's image draws on the VM's screen).
	VGA string `yaml:"vga"`
	// GuestToken requires this bearer token on the guest API; the guest
	// reads it from QEMU's fw_cfg file opt/rolloutmesh/token.
	GuestToken string `yaml:"guest_token"`
	// GuestTokenFile holds GuestToken.
	GuestTokenFile string `yaml:"guest_token_file"`
	// Network is user (default: QEMU's user-mode networking, each guest
	// port forwarded to a free port of Host) or bridge (a tap device on
	// Bridge through qemu-bridge-helper; the guest is reached at the
	// address a DHCP server on the bridge gave it, read from DHCPLeases).
	Network string `yaml:"network"`
	// Bridge is the host bridge of network bridge (e.g. br0); the bridge
	// helper's ACL (/etc/qemu/bridge.conf) must allow it.
	Bridge string `yaml:"bridge"`
	// BridgeHelper is QEMU's bridge helper (default
	// /usr/lib/qemu/qemu-bridge-helper; setuid root or run as root).
	BridgeHelper string `yaml:"bridge_helper"`
	// DHCPLeases is the lease file of the DHCP server serving Bridge, in
	// dnsmasq's format (expiry mac ip host client-id per line); the
	// provider finds each VM's address there by the VM's MAC address.
	DHCPLeases string `yaml:"dhcp_leases"`
	// Snapshots are saved at a VM's first boot after the pool's own, for
	// tasks whose env_config.snapshot names one: each starts from the
	// pool's snapshot, runs its command in the guest and is saved.
	Snapshots []QEMUSnapshot `yaml:"snapshots"`
}

// QEMUSnapshot is a snapshot a qemu pool saves at every VM's first boot.
type QEMUSnapshot struct {
	// Name is what env_config.snapshot names.
	Name string `yaml:"name"`
	// Command runs in the guest through the guest server's POST /execute
	// (an argv, e.g. [sh, -c, "..."]) and must exit 0; start programs in
	// the background with their output redirected, or /execute waits for
	// them.
	Command []string `yaml:"command"`
	// ReadyCommand, when given, runs in the guest after Command every
	// half second until it exits 0 (e.g. a window is open: wmctrl -l |
	// grep -q TITLE), within the pool's boot_timeout.
	ReadyCommand []string `yaml:"ready_command"`
	// Settle is waited after that, before the snapshot is saved; default 0.
	Settle Duration `yaml:"settle"`
}

// qcow2Magic opens every qcow2 file.
var qcow2Magic = []byte("QFI\xfb")

var portNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// validateQEMU checks the qemu section of pool p (key k is the pool's) and
// fills its defaults. The image is opened here, so that a wrong path or a
// raw disk is refused at start with the key named, not at the first boot.
func validateQEMU(k string, p *Pool) error {
	q := p.QEMU
	qk := k + ".qemu"
	if q.Image == "" {
		q.Image = p.PathToVM
	}
	if q.Image == "" {
		return bad(qk+".image", "required (the base qcow2 image; path_to_vm may stand for it)")
	}
	if err := checkQcow2(q.Image); err != nil {
		return bad(qk+".image", "%v", err)
	}
	if q.Kernel == "" && q.Initrd == "" {
		base := strings.TrimSuffix(q.Image, filepath.Ext(q.Image))
		if isFile(base+".vmlinuz") && isFile(base+".initrd") {
			q.Kernel, q.Initrd = base+".vmlinuz", base+".initrd"
		}
	}
	if q.Initrd != "" && q.Kernel == "" {
		return bad(qk+".initrd", "needs kernel")
	}
	if q.Append != "" && q.Kernel == "" {
		return bad(qk+".append", "needs kernel")
	}
	for key, f := range map[string]string{"kernel": q.Kernel, "initrd": q.Initrd} {
		if f != "" && !isFile(f) {
			return bad(qk+"."+key, "%q is not a readable file", f)
		}
	}
	// QEMU runs in the VM's state directory: a path relative to where
	// vmmanager was started would name another file there.
	for key, f := range map[string]*string{"image": &q.Image, "kernel": &q.Kernel, "initrd": &q.Initrd} {
		if *f == "" {
			continue
		}
		abs, err := filepath.Abs(*f)
		if err != nil {
			return bad(qk+"."+key, "%v", err)
		}
		*f = abs
	}
	if q.Binary == "" {
		q.Binary = "qemu-system-x86_64"
	}
	if q.Accel == "" {
		q.Accel = "auto"
	}
	switch q.Accel {
	case "auto", "kvm", "tcg":
	default:
		return bad(qk+".accel", "must be auto, kvm or tcg, got %q", q.Accel)
	}
	if q.Host == "" {
		q.Host = "127.0.0.1"
	}
	if q.GuestPort == 0 {
		q.GuestPort = 5000
	}
	if err := checkPort(qk+".guest_port", q.GuestPort); err != nil {
		return err
	}
	byPort := map[int]string{q.GuestPort: "guest_port"}
	for _, name := range sortedKeys(q.Ports) {
		port := q.Ports[name]
		pk := qk + ".ports." + name
		if !portNameRE.MatchString(name) || name == "server" {
			return bad(pk, "name must match %s and not be \"server\" (the guest server's own)", portNameRE)
		}
		if err := checkPort(pk, port); err != nil {
			return err
		}
		if other, ok := byPort[port]; ok {
			return bad(pk, "guest port %d is also %s", port, other)
		}
		byPort[port] = "ports." + name
	}
	if q.HealthPath == "" {
		// desktopd's /healthz pings the X server: the display takes input,
		// and it costs far less than a screenshot on an emulated CPU.
		// OSWorld's server has no /healthz; /screenshot is what OSWorld
		// itself waits for.
		q.HealthPath = "/screenshot"
		if q.Kernel != "" {
			q.HealthPath = "/healthz"
		}
	}
	if !strings.HasPrefix(q.HealthPath, "/") {
		return bad(qk+".health_path", "must start with /, got %q", q.HealthPath)
	}
	if q.VGA == "" {
		q.VGA = "std"
		if q.Kernel != "" {
			q.VGA = "none"
		}
	}
	switch q.VGA {
	case "none", "std", "virtio", "qxl":
	default:
		return bad(qk+".vga", "must be none, std, virtio or qxl, got %q", q.VGA)
	}
	if p.SnapshotName == "" {
		p.SnapshotName = "ready"
	}
	if !snapshotRE.MatchString(p.SnapshotName) {
		return bad(k+".snapshot_name", "must match %s, got %q", snapshotRE, p.SnapshotName)
	}
	if err := validateQEMUSnapshots(qk, p); err != nil {
		return err
	}
	if err := validateQEMUNetwork(qk, q); err != nil {
		return err
	}
	if p.CPUs == 0 {
		p.CPUs = 1
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = 1024
	}
	if p.MemoryMB < 128 {
		return bad(k+".memory_mb", "must be at least 128 for a qemu VM, got %d", p.MemoryMB)
	}
	if host, err := hostMemoryMB(); err == nil && p.MemoryMB > host {
		return bad(k+".memory_mb", "%d MB is more than this host's %d MB", p.MemoryMB, host)
	}
	return nil
}

// maxQEMUSnapshots bounds a pool's extra snapshots: each holds a copy of
// the guest's memory in every VM's overlay.
const maxQEMUSnapshots = 16

func validateQEMUSnapshots(qk string, p *Pool) error {
	snaps := p.QEMU.Snapshots
	if len(snaps) > maxQEMUSnapshots {
		return bad(qk+".snapshots", "at most %d, got %d (each holds the guest's memory in every VM's overlay)", maxQEMUSnapshots, len(snaps))
	}
	seen := map[string]string{p.SnapshotName: "snapshot_name"}
	for i, s := range snaps {
		sk := fmt.Sprintf("%s.snapshots[%d]", qk, i)
		if !snapshotRE.MatchString(s.Name) {
			return bad(sk+".name", "must match %s, got %q", snapshotRE, s.Name)
		}
		if other, ok := seen[s.Name]; ok {
			return bad(sk+".name", "%q is also %s", s.Name, other)
		}
		seen[s.Name] = fmt.Sprintf("snapshots[%d]", i)
		if len(s.Command) == 0 || s.Command[0] == "" {
			return bad(sk+".command", "required: the argv that prepares the guest before the snapshot is saved")
		}
		if len(s.ReadyCommand) > 0 && s.ReadyCommand[0] == "" {
			return bad(sk+".ready_command", "the program is empty")
		}
		if s.Settle < 0 || s.Settle > Duration(10*time.Minute) {
			return bad(sk+".settle", "must be between 0 and 10m, got %v", time.Duration(s.Settle))
		}
	}
	return nil
}

// DefaultBridgeHelper is Debian's qemu-bridge-helper (qemu-system-common).
const DefaultBridgeHelper = "/usr/lib/qemu/qemu-bridge-helper"

// ifnameRE bounds a network interface name (IFNAMSIZ is 16 with the NUL).
var ifnameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

func validateQEMUNetwork(qk string, q *QEMU) error {
	if q.Network == "" {
		q.Network = "user"
	}
	switch q.Network {
	case "user":
		for _, kv := range [][2]string{{"bridge", q.Bridge}, {"bridge_helper", q.BridgeHelper}, {"dhcp_leases", q.DHCPLeases}} {
			if kv[1] != "" {
				return bad(qk+"."+kv[0], "only with network bridge (network is user)")
			}
		}
		return nil
	case "bridge":
	default:
		return bad(qk+".network", "must be user or bridge, got %q", q.Network)
	}
	if q.Bridge == "" {
		return bad(qk+".bridge", "required with network bridge (a host bridge, e.g. br0)")
	}
	if !ifnameRE.MatchString(q.Bridge) {
		return bad(qk+".bridge", "%q is not an interface name", q.Bridge)
	}
	if q.DHCPLeases == "" {
		return bad(qk+".dhcp_leases", "required with network bridge: the lease file of the DHCP server on %s (dnsmasq format), where each VM's address is found", q.Bridge)
	}
	abs, err := filepath.Abs(q.DHCPLeases)
	if err != nil {
		return bad(qk+".dhcp_leases", "%v", err)
	}
	q.DHCPLeases = abs
	// The file itself may not exist before the server's first lease.
	if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		return bad(qk+".dhcp_leases", "directory of %q does not exist", abs)
	}
	if q.BridgeHelper == "" {
		q.BridgeHelper = DefaultBridgeHelper
	}
	if !isFile(q.BridgeHelper) {
		return bad(qk+".bridge_helper", "%q is not a file (Debian: qemu-system-common)", q.BridgeHelper)
	}
	if st, err := os.Stat(filepath.Join("/sys/class/net", q.Bridge, "bridge")); err != nil || !st.IsDir() {
		return bad(qk+".bridge", "no bridge %q on this host (ip link add %s type bridge)", q.Bridge, q.Bridge)
	}
	return nil
}

// qemuDirectBoot reports whether a qemu pool boots a kernel of its own:
// configured, or found next to the image (rolloutmesh's built guest).
func qemuDirectBoot(p *Pool) bool {
	if p.QEMU != nil && p.QEMU.Kernel != "" {
		return true
	}
	img := p.PathToVM
	if p.QEMU != nil && p.QEMU.Image != "" {
		img = p.QEMU.Image
	}
	if img == "" {
		return false
	}
	base := strings.TrimSuffix(img, filepath.Ext(img))
	return isFile(base+".vmlinuz") && isFile(base+".initrd")
}

// snapshotRE bounds snapshot names: they reach QEMU's monitor as a word.
var snapshotRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func checkQcow2(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%q is not a regular file", path)
	}
	head := make([]byte, len(qcow2Magic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, qcow2Magic) {
		return fmt.Errorf("%q is not a qcow2 image (no QFI\\xfb magic)", path)
	}
	return nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// hostMemoryMB is MemTotal from /proc/meminfo.
func hostMemoryMB() (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<16))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return 0, fmt.Errorf("meminfo: %q", rest)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal")
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
