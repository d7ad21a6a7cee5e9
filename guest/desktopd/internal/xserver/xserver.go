// Package xserver starts and owns a private desktop: an Xvfb display, a
// light window manager (openbox) and, when available, a session D-Bus that
// AT-SPI needs for the accessibility tree.
package xserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/procgroup"
)

// Config says what to start.
type Config struct {
	// Display is ":N", or "" to let Xvfb pick a free number.
	Display string
	Width   int
	Height  int
	// WindowManager is the window manager binary; "" starts none.
	WindowManager string
	// SessionBus starts a private dbus-daemon when dbus-daemon exists.
	SessionBus bool
	// Dir holds the bus socket; it must exist.
	Dir string
	// Home is the HOME of the services the bus activates ("" keeps
	// desktopd's). It must be the commands' HOME: dconf-service writes
	// the gsettings database under it, and gsettings reads it from there.
	Home string
	// ReadyTimeout bounds the wait for Xvfb to take its display (0: 30 s).
	ReadyTimeout time.Duration
}

// Server is a running Xvfb with its companions.
type Server struct {
	log     *zap.Logger
	display string
	busAddr string
	procs   []*proc // in start order; stopped in reverse
	xvfb    *proc
	// authFile is the X cookie file; "" once released.
	authFile string
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func start(name string, cmd *exec.Cmd) (*proc, error) {
	// Own process group, so stopping reaches the helpers it spawns, and
	// a death signal, so a killed desktopd does not leave them running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends p's process group: the leader and what it spawned (the bus's
// AT-SPI services), each gone before stop returns. procgroup.Stop has
// sent SIGKILL to the leader too past the grace, so its exit is near.
func (p *proc) stop(grace time.Duration) {
	procgroup.Stop(p.cmd.Process.Pid, grace)
	<-p.done
}

// Start launches Xvfb and the session bus and waits until both accept
// connections, then starts the window manager, if cfg names one. Waiting
// for the window manager to be ready is the caller's job (it needs an X
// connection); a caller that must act on the display before the window
// manager runs passes none here and calls StartWindowManager itself.
func Start(ctx context.Context, cfg Config, logger *zap.Logger) (_ *Server, err error) {
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("bad screen size %dx%d", cfg.Width, cfg.Height)
	}
	xvfbBin, err := exec.LookPath("Xvfb")
	if err != nil {
		return nil, fmt.Errorf("Xvfb not found (install the xvfb package): %w", err)
	}
	readyTimeout := cfg.ReadyTimeout
	if readyTimeout <= 0 {
		readyTimeout = 30 * time.Second
	}
	s := &Server{log: logger}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	// -displayfd makes Xvfb write its display number once it is ready to
	// accept connections, which is both the readiness signal and, without
	// a number, the way to get a free display without racing anyone.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := []string{}
	if cfg.Display != "" {
		args = append(args, cfg.Display)
	}
	authFile, err := acquireAuth()
	if err != nil {
		return nil, err
	}
	s.authFile = authFile
	// -auth, not -ac: only holders of the cookie may connect (xauth.go).
	args = append(args,
		"-screen", "0", fmt.Sprintf("%dx%dx24", cfg.Width, cfg.Height),
		"-nolisten", "tcp", "-auth", authFile, "-noreset", "-displayfd", "3")
	cmd := exec.Command(xvfbBin, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = &logWriter{log: logger, name: "Xvfb"}
	p, err := start("Xvfb", cmd)
	w.Close()
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	s.xvfb = p
	// The bus needs the display's name only for the services it starts
	// later: with the name given, it starts while Xvfb does.
	var bus *pendingBus
	if cfg.SessionBus && cfg.Display != "" {
		if bus, err = s.startBus(cfg.Display, cfg.Dir, cfg.Home); err != nil {
			return nil, err
		}
	}

	numc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		numc <- strings.TrimSpace(line)
	}()
	select {
	case n := <-numc:
		if _, err := strconv.Atoi(n); err != nil {
			<-p.done
			return nil, fmt.Errorf("Xvfb did not start (display %q busy?): %v", cfg.Display, p.err)
		}
		s.display = ":" + n
		logger.Info("X server ready", zap.String("display", s.display))
	case <-p.done:
		return nil, fmt.Errorf("Xvfb exited at start (display %q busy?): %v", cfg.Display, p.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for Xvfb: %w", ctx.Err())
	case <-time.After(readyTimeout):
		return nil, fmt.Errorf("Xvfb did not become ready within %v", readyTimeout)
	}

	if cfg.SessionBus && bus == nil {
		if bus, err = s.startBus(s.display, cfg.Dir, cfg.Home); err != nil {
			return nil, err
		}
	}
	if bus != nil {
		if err := bus.wait(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.WindowManager != "" {
		if err := s.StartWindowManager(cfg.WindowManager); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// StartWindowManager starts the window manager name (a binary on PATH) on
// the display, with the session bus in its environment.
func (s *Server) StartWindowManager(name string) error {
	wmBin, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("window manager %s not found: %w", name, err)
	}
	args := []string{}
	if strings.HasSuffix(wmBin, "openbox") {
		args = append(args, "--sm-disable")
	}
	cmd := exec.Command(wmBin, args...)
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Stderr = &logWriter{log: s.log, name: name}
	p, err := start(name, cmd)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	return nil
}

// pendingBus is a dbus-daemon that has started but may not listen yet.
type pendingBus struct {
	s     *Server
	p     *proc
	addrc chan string
}

// startBus starts a private session bus for display; nil without
// dbus-daemon.
func (s *Server) startBus(display, dir, home string) (*pendingBus, error) {
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		s.log.Info("no dbus-daemon: accessibility tree falls back to the X window tree")
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--session", "--nofork", "--nopidfile", "--print-address=3",
		"--address=unix:path="+dir+"/bus")
	cmd.ExtraFiles = []*os.File{w}
	// Services the bus activates (the AT-SPI bus launcher) need the display.
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	if home != "" {
		cmd.Env = append(cmd.Env, "HOME="+home)
	}
	cmd.Stderr = &logWriter{log: s.log, name: "dbus-daemon"}
	p, err := start("dbus-daemon", cmd)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	s.procs = append(s.procs, p)
	b := &pendingBus{s: s, p: p, addrc: make(chan string, 1)}
	go func() {
		defer r.Close()
		line, _ := bufio.NewReader(r).ReadString('\n')
		b.addrc <- strings.TrimSpace(line)
	}()
	return b, nil
}

// wait waits until the bus prints its address, which it does once it
// accepts connections.
func (b *pendingBus) wait(ctx context.Context) error {
	select {
	case a := <-b.addrc:
		if a == "" {
			return fmt.Errorf("dbus-daemon exited at start: %v", waitErr(b.p))
		}
		b.s.busAddr = a
		b.s.log.Info("session bus ready")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("dbus-daemon did not start within 10s")
	}
	return nil
}

func waitErr(p *proc) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Second):
		return errors.New("still running")
	}
}

// Display returns the display name, for example ":7".
func (s *Server) Display() string { return s.display }

// BusAddress returns the private session bus address, or "".
func (s *Server) BusAddress() string { return s.busAddr }

// Env returns the variables child processes need to reach this desktop.
func (s *Server) Env() []string {
	env := []string{"DISPLAY=" + s.display, "XAUTHORITY=" + s.authFile}
	if s.busAddr != "" {
		env = append(env, "DBUS_SESSION_BUS_ADDRESS="+s.busAddr)
	}
	return env
}

// Exited is closed when Xvfb exits.
func (s *Server) Exited() <-chan struct{} { return s.xvfb.done }

// Stop stops everything: the window manager and the bus first, each
// given its grace at the same time, then Xvfb, which they talk to.
func (s *Server) Stop() {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		if p == s.xvfb {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(3 * time.Second)
		}()
	}
	wg.Wait()
	if s.xvfb != nil {
		s.xvfb.stop(3 * time.Second)
	}
	if s.authFile != "" {
		releaseAuth()
		s.authFile = ""
	}
}

// logWriter forwards a child's stderr lines to the log at debug level.
type logWriter struct {
	log  *zap.Logger
	name string
}

func (w *logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.log.Debug("child stderr", zap.String("process", w.name), zap.String("line", line))
	}
	return len(b), nil
}
