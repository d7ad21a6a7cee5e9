// Package qemu is the disk-image VM provider: each VM is a QEMU process
// running a copy-on-write qcow2 overlay of one base image (the base is never
// written), with user-mode networking that forwards the guest server's port
// and any other guest ports to free ports on the host's loopback, or (network
// bridge) a tap on a host bridge, the guest reached at the address the
// bridge's DHCP server gave its MAC (read from the server's lease file).
//
// Reset is a snapshot restore, not a reboot: at first start the VM boots,
// the provider waits until the guest server answers its health path, and
// saves an internal snapshot (memory and disk, in the VM's overlay) under
// the pool's snapshot name ("ready"). A reset restores it with QMP
// (human-monitor-command "loadvm"), which reverts memory and disk at once,
// sets the guest clock and probes the guest again; under software emulation
// that takes well under a second where a boot takes tens of seconds. The
// overlay holds only the snapshots saved in it: the base image's own are
// out of loadvm's reach. A pool's qemu.snapshots are saved at first boot
// too, each after its command ran in the guest, for tasks whose
// env_config.snapshot names one.
//
// The guest clock: a restored guest's clock is where it was when the
// snapshot was saved. The second serial port of every VM is a unix socket
// on the host; after a restore the provider writes the current Unix time on
// it as one line, and the guest's init (deploy/guest/qcow2/qemu-init) sets
// the clock from it. A guest without that reader (OSWorld's Ubuntu image)
// keeps the snapshot's time until its own time sync runs.
//
// QEMU runs in its own process group and outlives a crashed vmmanager; its
// pid, overlay, QMP socket and ports are kept in Instance.Data, the next
// vmmanager re-adopts it (same pid, same overlay on its command line, QMP
// answering "running", guest healthy) or destroys it, and Sweep kills QEMU
// processes of this state directory that belong to no known VM.
package qemu

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/digitalocean/go-qemu/qmp/raw"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/procinfo"
)

var (
	_ pool.Provider = (*Provider)(nil)
	_ pool.Preparer = (*Provider)(nil)
)

// Options configure a Provider.
type Options struct {
	// Config is the pool's validated qemu section.
	Config config.QEMU
	// Snapshot is the snapshot every reset restores (the pool's
	// snapshot_name, "ready" by default).
	Snapshot     string
	CPUs         int
	MemoryMB     int
	ScreenWidth  int
	ScreenHeight int
	// Dir holds one directory per VM; Config.StateDir overrides it. It
	// should be private to this pool, e.g. <data-dir>/vms/<pool>, and short:
	// the QMP socket's path must fit a unix socket address (107 bytes).
	Dir string
	// VMIDLen is the length of the pool's VM ids (pool.VMIDLen), which
	// name the VMs' directories under Dir; 0 means 20.
	VMIDLen int
	Logger  *zap.Logger
	// Clock times boots and restores for the logs; nil is the wall clock.
	Clock clock.Clock
}

// Provider runs QEMU VMs.
type Provider struct {
	o     Options
	base  string // absolute path of the base image
	accel string // kvm or tcg, as decided at New
	guest guest.Client
	clk   clock.Clock

	mu       sync.Mutex
	ports    map[int]string      // host port → vm id, ours only
	children map[int]*child      // pid → QEMU we started (not adopted ones)
	locks    map[string]*vmLock  // vm id → serialises QMP use of one VM
	clocks   map[string]net.Conn // vm id → its clock line
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

type vmLock struct{ ch chan struct{} }

// Keys of Instance.Data.
const (
	dataPID     = "pid"
	dataDir     = "dir"
	dataOverlay = "overlay"
	dataQMP     = "qmp"
	dataClock   = "clock"
	dataPorts   = "host_ports" // name=port,name=port ("server" is the guest server)
	dataAccel   = "accel"
	dataMAC     = "mac"  // network bridge
	dataAddr    = "addr" // network bridge: the guest's address
)

// maxSocketPath is the longest unix socket path Linux accepts.
const maxSocketPath = 107

// defaultVMIDLen is the VM id length New assumes when not told.
const defaultVMIDLen = 20

// New checks the options, decides the accelerator and makes the state
// directory.
func New(o Options) (*Provider, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	if o.Config.StateDir != "" {
		o.Dir = o.Config.StateDir
	}
	if o.Dir == "" {
		return nil, errors.New("state dir is empty")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	o.Dir = dir
	// <dir>/<vm id>/clock.sock, the longest of the VMs' sockets: a path
	// past the limit would fail every boot.
	idLen := o.VMIDLen
	if idLen <= 0 {
		idLen = defaultVMIDLen
	}
	if n := len(dir) + 1 + idLen + len("/clock.sock"); n > maxSocketPath {
		return nil, fmt.Errorf("state dir %q is too long for the VMs' unix sockets: with VM ids of %d bytes their paths are %d bytes, at most %d fit (use a shorter --data-dir or pool name)", dir, idLen, n, maxSocketPath)
	}
	base, err := filepath.Abs(o.Config.Image)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if _, err := exec.LookPath(o.Config.Binary); err != nil {
		return nil, fmt.Errorf("qemu binary %q: %v (Debian: apt-get install qemu-system-x86)", o.Config.Binary, err)
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return nil, fmt.Errorf("qemu-img: %v (Debian: apt-get install qemu-utils)", err)
	}
	if o.Snapshot == "" {
		o.Snapshot = "ready"
	}
	if o.CPUs <= 0 {
		o.CPUs = 1
	}
	if o.MemoryMB <= 0 {
		o.MemoryMB = 1024
	}
	accel, why := DetectAccel(o.Config.Accel)
	o.Logger.Info("qemu acceleration", zap.String("accel", accel), zap.String("configured", o.Config.Accel), zap.String("reason", why))
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	// No kept-alive connections to guests: a restore reverts the guest's
	// TCP state, and a pooled connection from before it would hang a
	// probe until its timeout.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return &Provider{
		o: o, base: base, accel: accel, clk: clk, guest: guest.Client{HTTP: hc},
		ports: map[int]string{}, children: map[int]*child{}, locks: map[string]*vmLock{},
		clocks: map[string]net.Conn{},
	}, nil
}

// Accel is the accelerator the provider's VMs use (kvm or tcg).
func (p *Provider) Accel() string { return p.accel }

// DetectAccel resolves "auto" to kvm or tcg on this host and says why.
func DetectAccel(configured string) (accel, reason string) {
	return detectAccel(configured, hostAccel{})
}

// accelHost is what the accelerator choice reads of the host.
type accelHost interface {
	// OpenKVM opens /dev/kvm read-write and closes it.
	OpenKVM() error
	// PVM reports whether the KVM module is paravirtual (kvm_pvm).
	PVM() bool
	CPUInfo() ([]byte, error)
}

type hostAccel struct{}

func (hostAccel) OpenKVM() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func (hostAccel) PVM() bool {
	_, err := os.Stat("/sys/module/kvm_pvm")
	return err == nil
}

func (hostAccel) CPUInfo() ([]byte, error) { return os.ReadFile("/proc/cpuinfo") }

// detectAccel: KVM counts as working only when /dev/kvm opens read-write
// and the CPU has hardware virtualization (vmx or svm): a paravirtual KVM
// (PVM, as in some cloud sandboxes) offers /dev/kvm without it and cannot
// boot stock kernels.
func detectAccel(configured string, h accelHost) (accel, reason string) {
	if configured == "kvm" || configured == "tcg" {
		return configured, "configured"
	}
	if err := h.OpenKVM(); err != nil {
		return "tcg", fmt.Sprintf("no usable /dev/kvm: %v", err)
	}
	if h.PVM() {
		return "tcg", "/dev/kvm is paravirtual (kvm_pvm), which cannot boot stock kernels"
	}
	b, err := h.CPUInfo()
	if err != nil {
		return "tcg", fmt.Sprintf("read /proc/cpuinfo: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if f == "vmx" || f == "svm" {
				return "kvm", "/dev/kvm and hardware virtualization (" + f + ")"
			}
		}
		break
	}
	return "tcg", "/dev/kvm without hardware virtualization (no vmx/svm flag)"
}

func (p *Provider) vmDir(id string) string { return filepath.Join(p.o.Dir, id) }

// lock serialises snapshot operations and teardown of one VM.
func (p *Provider) lock(ctx context.Context, id string) (func(), error) {
	p.mu.Lock()
	l := p.locks[id]
	if l == nil {
		l = &vmLock{ch: make(chan struct{}, 1)}
		p.locks[id] = l
	}
	p.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("vm %s busy: %w", id, ctx.Err())
	}
}

// Create makes the VM's overlay, boots it, waits for the guest and saves
// the reset snapshot.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	unlock, err := p.lock(ctx, id)
	if err != nil {
		return pool.Instance{}, err
	}
	defer unlock()
	start := p.clk.Now()
	dir := p.vmDir(id)
	if err := os.RemoveAll(dir); err != nil {
		return pool.Instance{}, fmt.Errorf("remove old vm dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return pool.Instance{}, fmt.Errorf("create vm dir: %w", err)
	}
	inst := pool.Instance{Data: map[string]string{
		dataDir: dir, dataOverlay: filepath.Join(dir, "overlay.qcow2"),
		dataQMP: filepath.Join(dir, "qmp.sock"), dataClock: filepath.Join(dir, "clock.sock"),
		dataAccel: p.accel,
	}}
	fail := func(err error) (pool.Instance, error) {
		p.stop(inst)
		p.free(id)
		return inst, err
	}
	if err := p.createOverlay(ctx, inst.Data[dataOverlay]); err != nil {
		return fail(err)
	}
	var ports map[string]int
	if p.bridged() {
		inst.Data[dataMAC] = p.mac(id)
	} else {
		var err error
		if ports, err = p.allocate(id); err != nil {
			return fail(err)
		}
		inst.Data[dataPorts] = formatPorts(ports)
		p.fillAddresses(&inst, p.o.Config.Host, ports)
	}
	c, err := p.start(id, inst, ports)
	if err != nil {
		return fail(err)
	}
	inst.Ref = inst.Data[dataPID]
	alive := func() error {
		select {
		case <-c.done:
			return fmt.Errorf("qemu exited: %s (log: %s)", c.cmd.ProcessState, p.logTail(dir))
		default:
			return nil
		}
	}
	if p.bridged() {
		addr, err := p.waitLease(ctx, inst.Data[dataMAC], alive)
		if err != nil {
			return fail(fmt.Errorf("boot: %v (console: %s)", err, procinfo.Tail(filepath.Join(dir, "console.log"))))
		}
		inst.Data[dataAddr] = addr
		p.fillAddresses(&inst, addr, p.guestPorts())
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken, alive); err != nil {
		return fail(fmt.Errorf("boot: %v (console: %s)", err, procinfo.Tail(filepath.Join(dir, "console.log"))))
	}
	booted := p.clk.Now()
	if _, err := p.hmp(ctx, inst, "savevm "+p.o.Snapshot); err != nil {
		return fail(fmt.Errorf("save snapshot %s: %w", p.o.Snapshot, err))
	}
	// savevm stops the guest while it writes; make sure it answers again
	// before the VM is handed out.
	if err := p.guest.WaitReady(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken, alive); err != nil {
		return fail(fmt.Errorf("after saving snapshot: %w", err))
	}
	saved := p.clk.Now()
	for _, s := range p.o.Config.Snapshots {
		if err := p.saveExtra(ctx, id, inst, s, alive); err != nil {
			return fail(fmt.Errorf("save snapshot %s: %w", s.Name, err))
		}
	}
	if len(p.o.Config.Snapshots) > 0 {
		if err := p.load(ctx, id, inst, p.o.Snapshot, alive); err != nil {
			return fail(err)
		}
	}
	p.o.Logger.Info("qemu vm booted", zap.String("vm_id", id), zap.String("endpoint", inst.Endpoint),
		zap.Int("cpus", p.o.CPUs), zap.Int("memory_mb", p.o.MemoryMB),
		zap.Duration("boot", booted.Sub(start)), zap.Duration("savevm", saved.Sub(booted)),
		zap.Int("extra_snapshots", len(p.o.Config.Snapshots)), zap.Duration("extra_snapshots_time", p.clk.Now().Sub(saved)))
	return inst, nil
}

// saveExtra saves one of the pool's extra snapshots: from the pool's
// snapshot, the snapshot's command runs in the guest, the guest settles
// and answers its health path, and the snapshot is saved. The caller holds
// the VM's lock.
func (p *Provider) saveExtra(ctx context.Context, id string, inst pool.Instance, s config.QEMUSnapshot, alive func() error) error {
	start := p.clk.Now()
	if err := p.load(ctx, id, inst, p.o.Snapshot, alive); err != nil {
		return err
	}
	if _, err := p.guest.Execute(ctx, inst.Endpoint, p.o.Config.GuestToken, s.Command); err != nil {
		return fmt.Errorf("command %q: %w", s.Command, err)
	}
	if len(s.ReadyCommand) > 0 {
		if err := p.waitCommand(ctx, inst, s.ReadyCommand); err != nil {
			return err
		}
	}
	if d := time.Duration(s.Settle); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken, alive); err != nil {
		return fmt.Errorf("after its command: %w", err)
	}
	if _, err := p.hmp(ctx, inst, "savevm "+s.Name); err != nil {
		return err
	}
	p.o.Logger.Info("qemu snapshot saved", zap.String("vm_id", id), zap.String("snapshot", s.Name),
		zap.Duration("took", p.clk.Now().Sub(start)))
	return nil
}

func (p *Provider) createOverlay(ctx context.Context, overlay string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2",
		"-F", "qcow2", "-b", p.base, overlay).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create overlay: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitCommand runs argv in the guest every half second until it exits 0.
func (p *Provider) waitCommand(ctx context.Context, inst pool.Instance, argv []string) error {
	for {
		_, err := p.guest.Execute(ctx, inst.Endpoint, p.o.Config.GuestToken, argv)
		if err == nil {
			return nil
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ready command %q never exited 0 (last: %v): %w", argv, err, ctx.Err())
		}
	}
}

// portNames lists the forwarded guest ports: the server first, then the
// configured extras by name.
func (p *Provider) portNames() []string {
	names := []string{"server"}
	extra := make([]string, 0, len(p.o.Config.Ports))
	for n := range p.o.Config.Ports {
		extra = append(extra, n)
	}
	slices.Sort(extra)
	return append(names, extra...)
}

func (p *Provider) guestPort(name string) int {
	if name == "server" {
		return p.o.Config.GuestPort
	}
	return p.o.Config.Ports[name]
}

// guestPorts maps every port name to its guest port: on a bridge the
// guest's own ports are reached at its address.
func (p *Provider) guestPorts() map[string]int {
	out := map[string]int{}
	for _, name := range p.portNames() {
		out[name] = p.guestPort(name)
	}
	return out
}

func (p *Provider) bridged() bool { return p.o.Config.Network == "bridge" }

// mac is the VM's MAC address on the bridge, the key of its DHCP lease:
// QEMU's prefix 52:54:00 and three bytes of a hash of the state directory
// and the VM id, so that VMs of other pools and hosts on the bridge differ.
func (p *Provider) mac(id string) string {
	h := sha256.Sum256([]byte(p.o.Dir + "\x00" + id))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// waitLease waits until the DHCP server's lease file holds an address for
// mac.
func (p *Provider) waitLease(ctx context.Context, mac string, alive func() error) (string, error) {
	for {
		b, err := os.ReadFile(p.o.Config.DHCPLeases)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read dhcp leases: %w", err)
		}
		if addr, ok := leaseAddr(b, mac); ok {
			return addr, nil
		}
		if err := alive(); err != nil {
			return "", err
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no dhcp lease for mac %s in %s: %w", mac, p.o.Config.DHCPLeases, ctx.Err())
		}
	}
}

// leaseAddr finds mac's IPv4 address in a dnsmasq lease file ("expiry mac
// ip hostname client-id" per line; expiry 0 is infinite); of several, the
// one expiring last.
func leaseAddr(leases []byte, mac string) (string, bool) {
	var best string
	var bestExp uint64
	for _, line := range strings.Split(string(leases), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.EqualFold(f[1], mac) {
			continue
		}
		ip, err := netip.ParseAddr(f[2])
		if err != nil || !ip.Is4() {
			continue
		}
		exp, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if exp == 0 {
			exp = math.MaxUint64
		}
		if best == "" || exp >= bestExp {
			best, bestExp = ip.String(), exp
		}
	}
	return best, best != ""
}

// allocate picks one free host port per forwarded guest port. The kernel
// picks (port 0); the port is released before QEMU binds it, and a VM of
// ours never gets a port another one holds.
func (p *Provider) allocate(id string) (map[string]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, name := range p.portNames() {
		var port int
		for try := 0; try < 50 && port == 0; try++ {
			l, err := net.Listen("tcp", net.JoinHostPort(p.o.Config.Host, "0"))
			if err != nil {
				return nil, fmt.Errorf("find a free port on %s: %w", p.o.Config.Host, err)
			}
			c := l.Addr().(*net.TCPAddr).Port
			l.Close()
			if _, used := p.ports[c]; !used {
				port = c
			}
		}
		if port == 0 {
			return nil, fmt.Errorf("no free port on %s", p.o.Config.Host)
		}
		p.ports[port] = id
		out[name] = port
	}
	return out, nil
}

func (p *Provider) free(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.ports {
		if v == id {
			delete(p.ports, k)
		}
	}
}

// fillAddresses sets the endpoint and the other ports' addresses: host's
// ports by name.
func (p *Provider) fillAddresses(inst *pool.Instance, host string, ports map[string]int) {
	for name, port := range ports {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if name == "server" {
			inst.Endpoint = "http://" + addr
			continue
		}
		if inst.Ports == nil {
			inst.Ports = map[string]string{}
		}
		inst.Ports[name] = addr
	}
}

func formatPorts(ports map[string]int) string {
	names := make([]string, 0, len(ports))
	for n := range ports {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+strconv.Itoa(ports[n]))
	}
	return strings.Join(parts, ",")
}

func parsePorts(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(part, "=")
		port, err := strconv.Atoi(v)
		if !ok || err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("bad recorded port %q", part)
		}
		out[name] = port
	}
	return out, nil
}

// Args builds QEMU's command line for VM inst (pure, for tests).
func (p *Provider) Args(id string, inst pool.Instance, ports map[string]int) []string {
	dir := inst.Data[dataDir]
	netdev, nic := "user,id=net0", "virtio-net-pci,netdev=net0"
	if p.bridged() {
		netdev = "bridge,id=net0,br=" + p.o.Config.Bridge + ",helper=" + p.o.Config.BridgeHelper
		nic += ",mac=" + inst.Data[dataMAC]
	} else {
		for _, name := range p.portNames() {
			netdev += fmt.Sprintf(",hostfwd=tcp:%s:%d-:%d", p.o.Config.Host, ports[name], p.guestPort(name))
		}
	}
	args := []string{
		"-name", "rolloutmesh-" + id,
		"-nodefaults", "-no-user-config", "-no-reboot",
		"-accel", p.accel,
		"-m", strconv.Itoa(p.o.MemoryMB), "-smp", strconv.Itoa(p.o.CPUs),
		"-display", "none", "-vga", p.o.Config.VGA,
		// cache=unsafe: the overlay is disposable, and skipping the flushes
		// makes savevm and guest writes cheaper; the host's page cache
		// still outlives a vmmanager crash.
		"-drive", "file=" + inst.Data[dataOverlay] + ",if=virtio,format=qcow2,cache=unsafe",
		"-netdev", netdev, "-device", nic,
		"-qmp", "unix:" + inst.Data[dataQMP] + ",server=on,wait=off",
		// ttyS0: the console, to a file; ttyS1: the clock line.
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-chardev", "socket,id=clock,path=" + inst.Data[dataClock] + ",server=on,wait=off",
		"-serial", "chardev:clock",
		"-rtc", "base=utc",
		"-pidfile", filepath.Join(dir, "qemu.pid"),
	}
	if p.accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	if p.o.Config.Kernel != "" {
		args = append(args, "-kernel", p.o.Config.Kernel)
		if p.o.Config.Initrd != "" {
			args = append(args, "-initrd", p.o.Config.Initrd)
		}
		args = append(args, "-append", p.kernelCmdline())
	}
	if p.o.Config.GuestToken != "" {
		args = append(args, "-fw_cfg", "name=opt/rolloutmesh/token,file="+filepath.Join(dir, "token"))
	}
	return args
}

func (p *Provider) kernelCmdline() string {
	if p.o.Config.Append != "" {
		return p.o.Config.Append
	}
	// init= is rolloutmesh's (deploy/guest/qcow2/qemu-init); the KEY=VALUE
	// words reach it as environment. GUEST_NET=dhcp: on a bridge the guest
	// asks the bridge's DHCP server, instead of taking user-mode
	// networking's fixed address.
	line := fmt.Sprintf("root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=1 quiet init=/sbin/qemu-init "+
		"SCREEN_WIDTH=%d SCREEN_HEIGHT=%d DESKTOPD_ADDR=:%d", p.o.ScreenWidth, p.o.ScreenHeight, p.o.Config.GuestPort)
	if p.bridged() {
		line += " GUEST_NET=dhcp"
	}
	return line
}

// start launches QEMU in its own process group.
func (p *Provider) start(id string, inst pool.Instance, ports map[string]int) (*child, error) {
	dir := inst.Data[dataDir]
	if p.o.Config.GuestToken != "" {
		// fw_cfg reads the token from a file: never on QEMU's command line.
		if err := os.WriteFile(filepath.Join(dir, "token"), []byte(p.o.Config.GuestToken), 0o600); err != nil {
			return nil, fmt.Errorf("write token file: %w", err)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open qemu log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(p.o.Config.Binary, p.Args(id, inst, ports)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: QEMU survives a vmmanager crash for re-adoption.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	pid := cmd.Process.Pid
	p.mu.Lock()
	p.children[pid] = c
	p.mu.Unlock()
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	inst.Data[dataPID] = strconv.Itoa(pid)
	return c, nil
}

// Reset restores the pool's snapshot: memory and disk go back to the
// moment the guest first answered.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	return inst, p.restore(ctx, id, inst, p.o.Snapshot)
}

// SnapshotNames are the snapshots every VM of the pool has: the pool's,
// then its extra ones.
func (p *Provider) SnapshotNames() []string {
	names := []string{p.o.Snapshot}
	for _, s := range p.o.Config.Snapshots {
		names = append(names, s.Name)
	}
	return names
}

// Prepare restores the task's snapshot when it names another one than the
// pool's (which the reset before the lease already restored); a name that
// is not one of the pool's is refused without touching the VM.
func (p *Provider) Prepare(ctx context.Context, id string, inst pool.Instance, env pool.EnvOverrides) error {
	if env.Proxy || env.FixedIP || len(env.Extra) > 0 {
		return fmt.Errorf("qemu supports only the snapshot override: %w", pool.ErrUnsupported)
	}
	if env.Snapshot == "" || env.Snapshot == p.o.Snapshot {
		return nil
	}
	if !slices.Contains(p.SnapshotNames(), env.Snapshot) {
		return fmt.Errorf("snapshot %q is not one of this pool's (%s; more are saved at boot by qemu.snapshots): %w",
			env.Snapshot, strings.Join(p.SnapshotNames(), ", "), pool.ErrUnsupported)
	}
	return p.restore(ctx, id, inst, env.Snapshot)
}

// restore loads snapshot name, sets the guest clock and waits for health.
func (p *Provider) restore(ctx context.Context, id string, inst pool.Instance, name string) error {
	unlock, err := p.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.alive(inst); err != nil {
		return err
	}
	if name != p.o.Snapshot {
		names, err := p.Snapshots(ctx, inst)
		if err != nil {
			return err
		}
		if !slices.Contains(names, name) {
			return fmt.Errorf("snapshot %q does not exist in vm %s (it has: %s)", name, id, strings.Join(names, ", "))
		}
	}
	return p.load(ctx, id, inst, name, func() error { return p.alive(inst) })
}

// load restores snapshot name, sets the guest clock and waits for health;
// the caller holds the VM's lock.
func (p *Provider) load(ctx context.Context, id string, inst pool.Instance, name string, alive func() error) error {
	start := p.clk.Now()
	if _, err := p.hmp(ctx, inst, "loadvm "+name); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", name, err)
	}
	loaded := p.clk.Now()
	if err := p.setGuestClock(ctx, id, inst); err != nil {
		// Not fatal: the guest answers, only its clock lags.
		p.o.Logger.Warn("guest clock not set", zap.String("vm_id", id), zap.Error(err))
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken, alive); err != nil {
		return fmt.Errorf("after restoring snapshot %s: %w", name, err)
	}
	p.o.Logger.Debug("qemu vm restored", zap.String("vm_id", id), zap.String("snapshot", name),
		zap.Duration("loadvm", loaded.Sub(start)), zap.Duration("total", p.clk.Now().Sub(start)))
	return nil
}

// setGuestClock writes the host's time on the VM's clock line. The
// connection stays open: QEMU drops what the guest's UART has not taken yet
// when the client hangs up, so a dial-write-close could lose the line.
func (p *Provider) setGuestClock(ctx context.Context, id string, inst pool.Instance) error {
	now := p.clk.Now()
	// 15 bytes with the newline: fits the 16550's receive FIFO at once.
	line := fmt.Sprintf("%d.%03d\n", now.Unix(), now.Nanosecond()/1e6)
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		c := p.clocks[id]
		p.mu.Unlock()
		if c == nil {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			nc, err := d.DialContext(dctx, "unix", inst.Data[dataClock])
			cancel()
			if err != nil {
				return fmt.Errorf("dial clock line: %w", err)
			}
			p.mu.Lock()
			p.clocks[id] = nc
			p.mu.Unlock()
			c = nc
		}
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, err := io.WriteString(c, line)
		if err == nil {
			return nil
		}
		p.closeClock(id)
		if attempt == 1 {
			return fmt.Errorf("write clock line: %w", err)
		}
	}
}

func (p *Provider) closeClock(id string) {
	p.mu.Lock()
	c := p.clocks[id]
	delete(p.clocks, id)
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Snapshots lists the internal snapshots of the VM's overlay.
func (p *Provider) Snapshots(ctx context.Context, inst pool.Instance) ([]string, error) {
	out, err := p.hmp(ctx, inst, "info snapshots")
	if err != nil {
		return nil, err
	}
	return parseSnapshots(out), nil
}

// parseSnapshots reads the tags of HMP's "info snapshots" table (ID, TAG,
// VM SIZE, DATE, VM CLOCK, ICOUNT).
func parseSnapshots(out string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	header := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "ID" && f[1] == "TAG" {
			header = true
			continue
		}
		if header && len(f) >= 2 {
			names = append(names, f[1])
		}
	}
	return names
}

// Destroy stops QEMU and removes the VM's directory.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	if unlock, err := p.lock(ctx, id); err == nil {
		defer unlock()
	}
	p.closeClock(id)
	p.stop(inst)
	p.free(id)
	p.mu.Lock()
	delete(p.locks, id)
	p.mu.Unlock()
	if err := os.RemoveAll(p.vmDir(id)); err != nil {
		return fmt.Errorf("remove vm dir: %w", err)
	}
	return nil
}

// stop asks QEMU to quit over QMP, then kills its group.
func (p *Provider) stop(inst pool.Instance) {
	pid, _ := strconv.Atoi(inst.Data[dataPID])
	if pid <= 0 {
		return
	}
	p.mu.Lock()
	c := p.children[pid]
	p.mu.Unlock()
	dead := func() bool {
		if c != nil {
			select {
			case <-c.done:
				return true
			default:
				return false
			}
		}
		return !procinfo.Alive(pid) || !p.isOurQEMU(pid, inst.Data[dataOverlay])
	}
	if !dead() {
		qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		qmpDo(qctx, inst.Data[dataQMP], "qmp quit", func(m *raw.Monitor) error { return m.Quit() })
		cancel()
		for i := 0; i < 100 && !dead(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if !dead() {
			syscall.Kill(-pid, syscall.SIGKILL)
			for i := 0; i < 100 && !dead(); i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	p.mu.Lock()
	delete(p.children, pid)
	p.mu.Unlock()
}

// alive fails when the VM's QEMU is gone.
func (p *Provider) alive(inst pool.Instance) error {
	pid, _ := strconv.Atoi(inst.Data[dataPID])
	if pid <= 0 {
		return errors.New("no qemu pid recorded")
	}
	p.mu.Lock()
	c := p.children[pid]
	p.mu.Unlock()
	if c != nil {
		select {
		case <-c.done:
			return fmt.Errorf("qemu exited: %s (log: %s)", c.cmd.ProcessState, p.logTail(inst.Data[dataDir]))
		default:
			return nil
		}
	}
	if !procinfo.Alive(pid) {
		return fmt.Errorf("qemu pid %d is gone", pid)
	}
	return nil
}

// Check wants QEMU alive and the guest answering.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	if err := p.alive(inst); err != nil {
		return err
	}
	return p.guest.Probe(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken)
}

// Adopt takes over a QEMU left by a previous vmmanager: the pid must still
// be QEMU running this VM's overlay (pids get reused), QMP must report it
// running, its overlay must hold every snapshot of the pool, and the guest
// must answer.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	pid, _ := strconv.Atoi(inst.Data[dataPID])
	if pid <= 0 || !procinfo.Alive(pid) {
		return fmt.Errorf("qemu pid %d is gone", pid)
	}
	if inst.Data[dataOverlay] != filepath.Join(p.vmDir(id), "overlay.qcow2") || !p.isOurQEMU(pid, inst.Data[dataOverlay]) {
		return fmt.Errorf("pid %d is no longer this vm's qemu", pid)
	}
	var ports map[string]int
	if !p.bridged() {
		var err error
		if ports, err = parsePorts(inst.Data[dataPorts]); err != nil {
			return err
		}
	}
	st, err := p.Status(ctx, inst)
	if err != nil {
		return err
	}
	if st != "running" {
		return fmt.Errorf("qemu status is %q, want running", st)
	}
	// A VM booted before the pool's snapshots changed cannot serve the
	// tasks that name a new one: it is replaced.
	have, err := p.Snapshots(ctx, inst)
	if err != nil {
		return err
	}
	for _, name := range p.SnapshotNames() {
		if !slices.Contains(have, name) {
			return fmt.Errorf("vm lacks snapshot %q (it has: %s)", name, strings.Join(have, ", "))
		}
	}
	if err := p.guest.Probe(ctx, inst.Endpoint, p.o.Config.HealthPath, p.o.Config.GuestToken); err != nil {
		return err
	}
	p.mu.Lock()
	for _, port := range ports {
		p.ports[port] = id
	}
	p.mu.Unlock()
	return nil
}

// Status is QMP's query-status: running, paused, inmigrate...
func (p *Provider) Status(ctx context.Context, inst pool.Instance) (string, error) {
	var st raw.StatusInfo
	err := qmpDo(ctx, inst.Data[dataQMP], "qmp query-status", func(m *raw.Monitor) error {
		var err error
		st, err = m.QueryStatus()
		return err
	})
	if err != nil {
		return "", err
	}
	return st.Status.String(), nil
}

// isOurQEMU reports whether pid's command line runs overlay.
func (p *Provider) isOurQEMU(pid int, overlay string) bool {
	if overlay == "" {
		return false
	}
	return strings.Contains(procinfo.Cmdline(pid), "file="+overlay+",")
}

// Sweep kills QEMU processes running an overlay under this state directory
// that belong to no known VM, and removes the directories of unknown VMs.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("read /proc: %w", err)
	}
	prefix := "file=" + p.o.Dir + string(filepath.Separator)
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl := procinfo.Cmdline(pid)
		i := strings.Index(cl, prefix)
		if i < 0 || !strings.Contains(cl, "qemu") {
			continue
		}
		rest := cl[i+len(prefix):]
		id, _, _ := strings.Cut(rest, string(filepath.Separator))
		if id == "" || known[id] || !procinfo.Alive(pid) {
			continue
		}
		p.o.Logger.Warn("stray qemu destroyed", zap.String("vm_id", id), zap.Int("pid", pid))
		p.stop(pool.Instance{Data: map[string]string{
			dataPID: strconv.Itoa(pid), dataOverlay: filepath.Join(p.vmDir(id), "overlay.qcow2"),
			dataQMP: filepath.Join(p.vmDir(id), "qmp.sock"),
		}})
	}
	dirs, err := os.ReadDir(p.o.Dir)
	if err != nil {
		return fmt.Errorf("read state dir: %w", err)
	}
	for _, d := range dirs {
		if d.IsDir() && !known[d.Name()] {
			os.RemoveAll(filepath.Join(p.o.Dir, d.Name()))
		}
	}
	return nil
}

// hmp runs a human-monitor command through QMP; HMP reports errors in its
// output text, not as a QMP error.
func (p *Provider) hmp(ctx context.Context, inst pool.Instance, line string) (string, error) {
	var out string
	err := qmpDo(ctx, inst.Data[dataQMP], "hmp "+line, func(m *raw.Monitor) error {
		var err error
		out, err = m.HumanMonitorCommand(line, nil)
		return err
	})
	if err != nil {
		return "", err
	}
	trimmed := strings.TrimSpace(out)
	if strings.HasPrefix(trimmed, "Error") || strings.Contains(trimmed, "\nError") ||
		(!strings.HasPrefix(line, "info ") && trimmed != "") {
		return trimmed, fmt.Errorf("hmp %s: %s", line, trimmed)
	}
	return out, nil
}

func (p *Provider) logTail(dir string) string { return procinfo.Tail(filepath.Join(dir, "qemu.log")) }
