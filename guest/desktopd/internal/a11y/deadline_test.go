package a11y

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// slowParent is an application whose GetChildren answers after delay with
// one child that lives in another process: the walker reaches that child,
// and starts its calls, only delay after the walk began.
type slowParent struct {
	delay time.Duration
	child ref
}

func (p slowParent) GetRoleName() (string, *dbus.Error) { return "application", nil }

func (p slowParent) GetState() ([]uint32, *dbus.Error) { return []uint32{0, 0}, nil }

func (p slowParent) GetAttributes() (map[string]string, *dbus.Error) {
	return map[string]string{}, nil
}

func (p slowParent) GetInterfaces() ([]string, *dbus.Error) { return []string{ifAccessible}, nil }

func (p slowParent) GetChildren() ([]ref, *dbus.Error) {
	time.Sleep(p.delay)
	return []ref{p.child}, nil
}

func (p slowParent) Get(iface, prop string) (dbus.Variant, *dbus.Error) {
	if iface == ifAccessible && prop == "Name" {
		return dbus.MakeVariant("slow parent"), nil
	}
	return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, prop))
}

type oneAppRegistry struct{ app ref }

func (r oneAppRegistry) GetChildren() ([]ref, *dbus.Error) { return []ref{r.app}, nil }

// startFrozenApp runs a second process (this test binary, as
// TestFrozenAppHelper) connected to the bus at addr, freezes it with
// SIGSTOP and returns its unique name: calls to it are queued by the bus
// and never answered, as with a hung application.
func startFrozenApp(t *testing.T, addr string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFrozenAppHelper$")
	cmd.Env = append(os.Environ(), "A11Y_FROZEN_APP_BUS="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The helper lives until its stdin closes.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the application to freeze: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	name, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("unique name of the application to freeze: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(name)
}

// TestFrozenAppHelper is the process startFrozenApp freezes, not a test.
func TestFrozenAppHelper(t *testing.T) {
	addr := os.Getenv("A11Y_FROZEN_APP_BUS")
	if addr == "" {
		t.Skip("helper process of startFrozenApp")
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Println(conn.Names()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestFrozenCallCutAtDeadline: a call to a frozen application that starts
// shortly before the walk's deadline is cut at the deadline, not after the
// per-call timeout, and Tree returns what it read by then.
func TestFrozenCallCutAtDeadline(t *testing.T) {
	const (
		// The walker reaches the frozen child this long after the start;
		// the deadline comes left before its calls' timeout would.
		delay    = time.Second
		left     = 300 * time.Millisecond
		deadline = delay + left
		// Under -race on a loaded machine; the overshoot this test is
		// about is the per-call timeout, 2 s.
		margin = 700 * time.Millisecond
	)
	if left >= callTimeout {
		t.Fatalf("the deadline must land before the per-call timeout would end the frozen calls")
	}
	addr := startBus(t)
	frozen := startFrozenApp(t, addr)

	// The connection's unique name is known only after Hello, so the
	// registry names the parent by a well-known name.
	const parentName = "org.example.SlowParent"
	parent := slowParent{delay: delay, child: ref{frozen, "/org/a11y/atspi/accessible/root"}}
	serveRegistry(t, addr, oneAppRegistry{ref{parentName, "/p"}}, func(conn *dbus.Conn) error {
		return errors.Join(conn.Export(parent, "/p", ifAccessible), conn.Export(parent, "/p", "org.freedesktop.DBus.Properties"))
	}, parentName)

	apps, complete, took := timedTree(t, addr, deadline)
	t.Logf("Tree with a %v deadline took %v", deadline, took)
	if took > deadline+margin {
		t.Errorf("Tree took %v, want at most %v: the frozen calls outlived the deadline", took, deadline+margin)
	}
	if took < delay {
		t.Errorf("Tree took %v, less than the parent's %v answer: the frozen child was not reached", took, delay)
	}
	if complete {
		t.Errorf("a walk cut by its deadline says it is complete")
	}
	if len(apps) != 1 || len(apps[0].Attrs) == 0 || apps[0].Attrs[0].Value != "slow parent" {
		t.Errorf("got %d applications, want the slow parent read before the deadline", len(apps))
	} else if len(apps[0].Children) != 0 {
		t.Errorf("the frozen child is in the tree")
	}
}

// TestFrozenAppCostsOneCallTimeout: the calls of one round trip to a frozen
// application end together, callTimeout after they were sent, and the
// application is skipped: the walk ends then instead of at its deadline,
// marked incomplete (what the application would have shown is missing,
// and metrics must not read it as absent). Each call used to get
// callTimeout of its own from the moment its answer was waited for, six
// of them one after another (12 s).
func TestFrozenAppCostsOneCallTimeout(t *testing.T) {
	addr := startBus(t)
	frozen := startFrozenApp(t, addr)
	serveRegistry(t, addr, oneAppRegistry{ref{frozen, rootPath}}, nil)

	apps, complete, took := timedTree(t, addr, 3*callTimeout)
	t.Logf("Tree with a frozen application took %v", took)
	if took > callTimeout+time.Second {
		t.Errorf("Tree took %v, want the frozen application skipped after %v", took, callTimeout)
	}
	if complete {
		t.Errorf("a walk that skipped an unanswering application says it is complete")
	}
	if len(apps) != 0 {
		t.Errorf("got %d applications, want the frozen one skipped", len(apps))
	}
}

type noAppRegistry struct{}

func (noAppRegistry) GetChildren() ([]ref, *dbus.Error) { return nil, nil }

// TestConnectionReused: the accessibility bus connection outlives the
// request that opened it. It was opened with the request's context and
// closed with it, so every request connected anew (session bus,
// GetAddress, accessibility bus).
func TestConnectionReused(t *testing.T) {
	addr := startBus(t)
	serveRegistry(t, addr, noAppRegistry{}, nil)
	a := &ATSPI{SessionBus: addr}
	defer a.Close()
	tree := func() *dbus.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, _, err := a.Tree(ctx); err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.conn
	}
	first := tree()
	time.Sleep(50 * time.Millisecond) // a connection closed with the request is closed by now
	if second := tree(); second != first || !first.Connected() {
		t.Errorf("the second request connected anew (connection of the first still connected: %v)", first.Connected())
	}
}

// serveRegistry serves, on the bus at addr, the accessibility bus's
// address (the same bus) and reg as the registry's root, plus what export
// adds, and owns names besides those two. Objects are exported before
// Auth starts the connection's reader (see serveFakeCalc).
func serveRegistry(t *testing.T, addr string, reg any, export func(conn *dbus.Conn) error, names ...string) {
	t.Helper()
	conn, err := dbus.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	errs := []error{conn.Export(busObj{addr}, "/org/a11y/bus", "org.a11y.Bus"), conn.Export(reg, rootPath, ifAccessible)}
	if export != nil {
		errs = append(errs, export(conn))
	}
	if err := errors.Join(append(errs, conn.Auth(nil), conn.Hello())...); err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{"org.a11y.Bus", registry}, names...) {
		if _, err := conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil {
			t.Fatal(err)
		}
	}
}

// timedTree reads the tree of the bus at addr within deadline, and how
// long that took.
func timedTree(t *testing.T, addr string, deadline time.Duration) (apps []*Node, complete bool, took time.Duration) {
	t.Helper()
	a := &ATSPI{SessionBus: addr}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	t0 := time.Now()
	apps, complete, err := a.Tree(ctx)
	took = time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	return apps, complete, took
}
