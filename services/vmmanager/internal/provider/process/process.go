// Package process is the local VM provider: each VM is a desktopd process
// with its own Xvfb display, its own port and its own home directory. A
// reset stops the process, replaces the home directory with a fresh copy of
// the template and starts it again on the same display and port.
//
// desktopd runs in its own process group so that it outlives a crashed
// vmmanager; the next vmmanager re-adopts it by pid (checked against its
// command line or, with GuestHome, its environment) or destroys it as a
// stray.
//
// With GuestHome (root only), each desktopd runs in a mount namespace of its
// own in which the VM's home directory is bind-mounted on GuestHome, for
// example /home/user: OSWorld's tasks name /home/user/... outright, and
// every VM then finds its own files there. The mount is private to the
// namespace, which the kernel drops with its last process, so nothing is
// left mounted on the host.
package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/procinfo"
)

var _ pool.Provider = (*Provider)(nil)

// Options configure a Provider.
type Options struct {
	Config       config.Process
	ScreenWidth  int
	ScreenHeight int
	// Dir holds one directory per VM (home, log); it should be private to
	// this pool, e.g. <data-dir>/vms/<pool>.
	Dir string
	// GuestHome, when set, is the absolute path at which each VM sees its
	// own home (desktopd's --home and HOME), through a bind mount in a
	// private mount namespace; it needs root. Empty: the VM's home is its
	// directory under Dir.
	GuestHome string
	Logger    *zap.Logger
}

// envVMHome names, in desktopd's environment, the VM home directory behind
// GuestHome: with a private home desktopd's command line shows only
// GuestHome, and adoption and the stray sweep must still tell VMs apart.
const envVMHome = "ROLLOUTMESH_VM_HOME"

// Provider runs desktopd processes.
type Provider struct {
	o        Options
	desktopd string
	guest    guest.Client

	mu       sync.Mutex
	ports    map[int]string // port → vm id
	displays map[int]string // display → vm id
	children map[int]*child // pid → our own child (not adopted ones)
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// ResolveDesktopd finds the desktopd binary: the configured path, or
// desktopd next to the running executable, or on PATH.
func ResolveDesktopd(configured string) (string, error) {
	if configured != "" {
		p, err := exec.LookPath(configured)
		if err != nil {
			return "", fmt.Errorf("desktopd %q: %v", configured, err)
		}
		return filepath.Abs(p)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "desktopd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("desktopd")
	if err != nil {
		return "", errors.New("desktopd not found next to vmmanager or on PATH; set process.desktopd")
	}
	return filepath.Abs(p)
}

// New returns a provider; desktopd must already be resolved into o.Config.Desktopd.
func New(o Options) (*Provider, error) {
	if o.Config.Desktopd == "" {
		return nil, errors.New("desktopd path is empty")
	}
	if o.Config.HomeTemplate != "" {
		st, err := os.Stat(o.Config.HomeTemplate)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("home_template %q is not a directory", o.Config.HomeTemplate)
		}
	}
	// desktopd starts in the VM's home and takes --home relative to that,
	// so a relative data directory would nest homes inside themselves.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("vm dir: %w", err)
	}
	o.Dir = dir
	if o.GuestHome != "" {
		if !filepath.IsAbs(o.GuestHome) || filepath.Clean(o.GuestHome) == "/" {
			return nil, fmt.Errorf("guest home %q: want an absolute path other than /", o.GuestHome)
		}
		o.GuestHome = filepath.Clean(o.GuestHome)
		// Only root may make mount namespaces and bind mounts; say so now
		// rather than at every boot.
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("guest home %s: a private mount namespace needs root (euid %d)", o.GuestHome, os.Geteuid())
		}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Provider{
		o: o, desktopd: o.Config.Desktopd,
		ports: map[int]string{}, displays: map[int]string{}, children: map[int]*child{},
	}, nil
}

func (p *Provider) vmDir(id string) string { return filepath.Join(p.o.Dir, id) }
func (p *Provider) home(id string) string  { return filepath.Join(p.vmDir(id), "home") }

// Create boots desktopd for a new VM.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	port, display, err := p.allocate(id)
	if err != nil {
		return pool.Instance{}, err
	}
	inst := pool.Instance{
		Endpoint: fmt.Sprintf("http://%s", net.JoinHostPort(p.o.Config.Host, strconv.Itoa(port))),
		Data:     map[string]string{"port": strconv.Itoa(port), "display": strconv.Itoa(display)},
	}
	inst, err = p.boot(ctx, id, inst)
	if err != nil {
		p.free(id)
		return inst, err
	}
	return inst, nil
}

// allocate picks the first port and display at or above the bases that no
// VM of ours holds and that are free on this host.
func (p *Provider) allocate(id string) (int, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	port := 0
	for c := p.o.Config.BasePort; c < p.o.Config.BasePort+1000 && c <= 65535; c++ {
		if _, used := p.ports[c]; used {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(p.o.Config.Host, strconv.Itoa(c)))
		if err != nil {
			continue
		}
		l.Close()
		port = c
		break
	}
	if port == 0 {
		return 0, 0, fmt.Errorf("no free port in %d..%d", p.o.Config.BasePort, p.o.Config.BasePort+999)
	}
	display := 0
	if !p.o.Config.NoDisplay {
		for c := p.o.Config.BaseDisplay; c < p.o.Config.BaseDisplay+1000; c++ {
			if _, used := p.displays[c]; used {
				continue
			}
			if _, err := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", c)); err == nil {
				continue
			}
			if _, err := os.Stat(fmt.Sprintf("/tmp/.X11-unix/X%d", c)); err == nil {
				continue
			}
			display = c
			break
		}
		if display == 0 {
			return 0, 0, fmt.Errorf("no free X display in :%d..:%d", p.o.Config.BaseDisplay, p.o.Config.BaseDisplay+999)
		}
		p.displays[display] = id
	}
	p.ports[port] = id
	return port, display, nil
}

func (p *Provider) free(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.ports {
		if v == id {
			delete(p.ports, k)
		}
	}
	for k, v := range p.displays {
		if v == id {
			delete(p.displays, k)
		}
	}
}

// boot prepares a fresh home and starts desktopd, waiting for /healthz.
func (p *Provider) boot(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	start := time.Now()
	home := p.home(id)
	if err := os.RemoveAll(home); err != nil {
		return inst, fmt.Errorf("remove old home: %w", err)
	}
	if p.o.Config.HomeTemplate != "" {
		if err := copyTree(p.o.Config.HomeTemplate, home); err != nil {
			return inst, fmt.Errorf("copy home template: %w", err)
		}
	} else if err := os.MkdirAll(home, 0o700); err != nil {
		return inst, fmt.Errorf("create home: %w", err)
	}
	guestHome := home
	if p.o.GuestHome != "" {
		guestHome = p.o.GuestHome
	}
	// desktopd writes a line to fd 3 once it serves every endpoint.
	args := []string{"--addr", strings.TrimPrefix(inst.Endpoint, "http://"), "--home", guestHome, "--ready-fd", "3"}
	if p.o.Config.NoDisplay {
		args = append(args, "--display", "none")
	} else {
		args = append(args, "--xvfb", "--display", ":"+inst.Data["display"],
			"--screen", fmt.Sprintf("%dx%d", p.o.ScreenWidth, p.o.ScreenHeight))
	}
	logPath := filepath.Join(p.vmDir(id), "desktopd.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return inst, fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(p.desktopd, args...)
	if p.o.GuestHome != "" {
		if cmd, err = p.privateHomeCommand(home, args); err != nil {
			return inst, err
		}
	}
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+guestHome)
	// Always set: besides naming the home behind GuestHome, it marks every
	// process of this VM (applications desktopd launches in groups of their
	// own inherit it), so stop can find the ones desktopd left behind.
	cmd.Env = append(cmd.Env, envVMHome+"="+home)
	// The token goes in the environment, never in argv: any local user
	// reads argv in ps, the environment only desktopd's user and root.
	// An inherited DESKTOPD_TOKEN is overridden (the last entry wins), so a
	// pool without a token runs an open guest, as configured.
	cmd.Env = append(cmd.Env, "DESKTOPD_TOKEN="+p.o.Config.GuestToken)
	cmd.Stdout, cmd.Stderr = logf, logf
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return inst, fmt.Errorf("ready pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{readyW}
	// Own process group: survives a vmmanager crash for re-adoption, and
	// can be signalled as a whole.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	homeDone := time.Now()
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		readyR.Close()
		return inst, fmt.Errorf("start desktopd: %w", err)
	}
	readyc := make(chan struct{})
	go func() {
		defer readyR.Close()
		// EOF without the line: desktopd died, which alive reports.
		if line, _ := bufio.NewReader(readyR).ReadString('\n'); line == "ready\n" {
			close(readyc)
		}
	}()
	c := &child{cmd: cmd, done: make(chan struct{})}
	pid := cmd.Process.Pid
	p.mu.Lock()
	p.children[pid] = c
	p.mu.Unlock()
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	inst.Ref = strconv.Itoa(pid)
	inst.Data["pid"] = inst.Ref
	inst.Data["home"] = home
	alive := func() error {
		select {
		case <-c.done:
			return fmt.Errorf("desktopd exited: %s (log: %s)", cmd.ProcessState, procinfo.Tail(logPath))
		default:
			return nil
		}
	}
	// Wait for the ready line rather than poll: /healthz answers as soon
	// as it is written. The probe then proves it over HTTP, the way the
	// pool's health checks reach the guest.
	select {
	case <-readyc:
	case <-c.done:
	case <-ctx.Done():
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, "/healthz", p.o.Config.GuestToken, alive); err != nil {
		p.stop(inst)
		return inst, fmt.Errorf("%v (log: %s)", err, procinfo.Tail(logPath))
	}
	// The parts of a boot, for the reset benchmark and for telling a slow
	// home copy from a slow desktop.
	p.o.Logger.Debug("desktopd ready", zap.String("vm_id", id),
		zap.Duration("home", homeDone.Sub(start)), zap.Duration("start_to_ready", time.Since(homeDone)))
	return inst, nil
}

// privateHomeCommand starts desktopd in a new mount namespace after
// bind-mounting the VM's home on GuestHome there. Go makes the namespace
// (CLONE_NEWNS) and marks every mount in it private before the exec, so the
// bind mount never propagates to the host; a shell does the mount, because
// it must happen in the child, between the unshare and desktopd's exec. The
// shell execs desktopd, so the pid stays desktopd's.
func (p *Provider) privateHomeCommand(home string, args []string) (*exec.Cmd, error) {
	// The mount point must exist; on a host without it, an empty
	// directory is all that is left outside the namespace.
	if err := os.MkdirAll(p.o.GuestHome, 0o755); err != nil {
		return nil, fmt.Errorf("create guest home mount point: %w", err)
	}
	mountBin, err := exec.LookPath("mount")
	if err != nil {
		return nil, fmt.Errorf("guest home needs mount(8): %w", err)
	}
	// cd after the mount: the directory the child started in is the one
	// under the mount point, and PWD must name GuestHome, as pwd shows it.
	script := `"$0" --bind -- "$1" "$2" && cd "$2" && shift 2 && exec "$@"`
	shArgs := append([]string{"-c", script, mountBin, home, p.o.GuestHome, p.desktopd}, args...)
	cmd := exec.Command("/bin/sh", shArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd, nil
}

// vmHomeOf returns the VM home directory desktopd pid serves: its --home
// argument, or, behind a private GuestHome, the home named in its
// environment. Children inherit that environment, so only a process whose
// command is desktopd itself counts.
func (p *Provider) vmHomeOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	args := strings.Split(string(b), "\x00")
	home := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--home" {
			home = args[i+1]
		}
	}
	if p.o.GuestHome == "" || home != p.o.GuestHome {
		return home
	}
	if len(args) == 0 || filepath.Base(args[0]) != filepath.Base(p.desktopd) {
		return ""
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, envVMHome+"="); ok {
			return v
		}
	}
	return ""
}

// stopTimes are the parts of a stop, logged with a reset.
type stopTimes struct {
	group, marked, display time.Duration
}

// stop ends desktopd: SIGTERM to its group so it can stop its Xvfb, then
// SIGKILL; a leftover Xvfb of the VM's display is killed too.
func (p *Provider) stop(inst pool.Instance) stopTimes {
	var st stopTimes
	t0 := time.Now()
	pid, _ := strconv.Atoi(inst.Data["pid"])
	if pid > 0 {
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
			return !procinfo.Alive(pid)
		}
		// waitDead waits up to d: on our own child's exit, without
		// polling; on an adopted one's, polling.
		waitDead := func(d time.Duration) {
			if c != nil {
				select {
				case <-c.done:
				case <-time.After(d):
				}
				return
			}
			for deadline := time.Now().Add(d); !dead() && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !dead() {
			syscall.Kill(-pid, syscall.SIGTERM)
			waitDead(2 * time.Second)
			// Also the group: children desktopd left behind.
			syscall.Kill(-pid, syscall.SIGKILL)
			waitDead(time.Second)
		} else {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		p.mu.Lock()
		delete(p.children, pid)
		p.mu.Unlock()
	}
	t1 := time.Now()
	st.group = t1.Sub(t0)
	if home := inst.Data["home"]; home != "" {
		killMarked(envVMHome + "=" + home)
	}
	t2 := time.Now()
	st.marked = t2.Sub(t1)
	if d := inst.Data["display"]; d != "" && d != "0" {
		killDisplayServer(d)
	}
	st.display = time.Since(t2)
	return st
}

// killMarked SIGKILLs every process whose environment holds marker and
// waits (up to 2 s) until they are gone. desktopd launches applications in
// process groups of their own and does not wait for them when it exits, so
// an application still shutting down after desktopd's group is killed
// would keep writing into the home that reset is about to remove (and
// make the removal fail with "directory not empty", or leave files in the
// next episode's home).
func killMarked(marker string) {
	for i := 0; i < 200; i++ {
		pids := markedPids(marker)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// markedPids lists the live processes whose environment holds marker.
func markedPids(marker string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte(marker)) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker && procinfo.Alive(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killDisplayServer kills the X server holding display d (its pid is in the
// lock file) and removes its lock and socket, so the display can be reused.
func killDisplayServer(d string) {
	lock := "/tmp/.X" + d + "-lock"
	if b, err := os.ReadFile(lock); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			if procinfo.Cmdline(pid) != "" && strings.Contains(procinfo.Cmdline(pid), "X") {
				syscall.Kill(pid, syscall.SIGKILL)
				for i := 0; i < 100 && procinfo.Alive(pid); i++ {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
	}
	os.Remove(lock)
	os.Remove("/tmp/.X11-unix/X" + d)
}

// Reset stops desktopd, gives the VM a fresh home and starts it again on
// the same port and display.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	start := time.Now()
	st := p.stop(inst)
	stopped := time.Now()
	// Whatever still holds the port would answer the readiness probe in
	// place of the new desktopd: wait for it to be free.
	addr := net.JoinHostPort(p.o.Config.Host, inst.Data["port"])
	for i := 0; ; i++ {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			break
		}
		if i == 100 {
			return inst, fmt.Errorf("port %s still taken after stopping desktopd: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.o.Logger.Debug("old desktopd stopped", zap.String("vm_id", id), zap.Duration("stop", stopped.Sub(start)),
		zap.Duration("stop_group", st.group), zap.Duration("stop_marked", st.marked), zap.Duration("stop_display", st.display),
		zap.Duration("port_free", time.Since(stopped)))
	ni := pool.Instance{Endpoint: inst.Endpoint, Data: map[string]string{"port": inst.Data["port"], "display": inst.Data["display"]}}
	return p.boot(ctx, id, ni)
}

// Destroy stops desktopd and removes the VM's directory.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	p.stop(inst)
	p.free(id)
	if err := os.RemoveAll(p.vmDir(id)); err != nil {
		return fmt.Errorf("remove vm dir: %w", err)
	}
	return nil
}

// Check wants the process alive and /healthz answering.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	pid, _ := strconv.Atoi(inst.Data["pid"])
	if pid <= 0 || !procinfo.Alive(pid) {
		return fmt.Errorf("desktopd pid %d is gone", pid)
	}
	return p.guest.Probe(ctx, inst.Endpoint, "/healthz", p.o.Config.GuestToken)
}

// Adopt takes over a desktopd left by a previous vmmanager: its pid must
// still run desktopd with this VM's home (pids get reused) and answer.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	pid, _ := strconv.Atoi(inst.Data["pid"])
	if pid <= 0 || !procinfo.Alive(pid) {
		return fmt.Errorf("desktopd pid %d is gone", pid)
	}
	if p.vmHomeOf(pid) != p.home(id) {
		return fmt.Errorf("pid %d is no longer this vm's desktopd", pid)
	}
	if err := p.guest.Probe(ctx, inst.Endpoint, "/healthz", p.o.Config.GuestToken); err != nil {
		return err
	}
	port, _ := strconv.Atoi(inst.Data["port"])
	display, _ := strconv.Atoi(inst.Data["display"])
	p.mu.Lock()
	p.ports[port] = id
	if display > 0 {
		p.displays[display] = id
	}
	p.mu.Unlock()
	return nil
}

// Sweep kills desktopd processes running with a home under this pool's
// directory that belong to no known VM, and removes their directories.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("read /proc: %w", err)
	}
	prefix := p.o.Dir + string(filepath.Separator)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		id, display := "", ""
		if home := p.vmHomeOf(pid); strings.HasPrefix(home, prefix) {
			id = strings.SplitN(strings.TrimPrefix(home, prefix), string(filepath.Separator), 2)[0]
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--display" {
				display = strings.TrimPrefix(args[i+1], ":")
			}
		}
		if id == "" || known[id] || !procinfo.Alive(pid) {
			continue
		}
		p.o.Logger.Warn("stray desktopd destroyed", zap.String("vm_id", id), zap.Int("pid", pid))
		p.stop(pool.Instance{Data: map[string]string{"pid": strconv.Itoa(pid), "display": display, "home": p.vmHomeOf(pid)}})
	}
	dirs, err := os.ReadDir(p.o.Dir)
	if err != nil {
		return fmt.Errorf("read vm dir: %w", err)
	}
	for _, d := range dirs {
		if d.IsDir() && !known[d.Name()] {
			os.RemoveAll(filepath.Join(p.o.Dir, d.Name()))
		}
	}
	return nil
}

// copyTree copies a directory tree (files, directories, symlinks).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			in, err := os.Open(path)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil // sockets, devices: not part of a home template
	})
}
