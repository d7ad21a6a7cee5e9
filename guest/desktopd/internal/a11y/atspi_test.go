package a11y

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// startBus runs a private dbus-daemon and returns its address.
func startBus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dbus-daemon is required when CI is set: %v", err)
		}
		t.Skipf("dbus-daemon not installed: %v", err)
	}
	cmd := exec.Command(bin, "--session", "--nofork", "--nopidfile", "--print-address=1",
		"--address=unix:path="+t.TempDir()+"/bus")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("bus address: %v", err)
	}
	return strings.TrimSpace(addr)
}

// fakeCalc is an application on the accessibility bus shaped like
// LibreOffice Calc's tree: application > frame > document spreadsheet >
// table, the table with a child per cell of a 16384-column sheet, of which
// the cells in rows [r0, r0+rows) and columns [c0, c0+cols) are showing.
type fakeCalc struct {
	conn               *dbus.Conn
	r0, c0, rows, cols int
	mu                 sync.Mutex
	childAt, tableKids int
	ncols              int32
}

const fakeNCols = 16384

func (f *fakeCalc) path(m dbus.Message) string {
	p, _ := m.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	return strings.TrimPrefix(string(p), "/f")
}

func (f *fakeCalc) cell(p string) (row, col int, ok bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(p, "/cell/"))
	if err != nil || !strings.HasPrefix(p, "/cell/") {
		return 0, 0, false
	}
	return i / fakeNCols, i % fakeNCols, true
}

func (f *fakeCalc) showing(p string) bool {
	row, col, ok := f.cell(p)
	if !ok {
		return true
	}
	return row >= f.r0 && row < f.r0+f.rows && col >= f.c0 && col < f.c0+f.cols
}

// ref names an object under /f, the subtree the fake exports.
func (f *fakeCalc) ref(p string) ref { return ref{f.conn.Names()[0], dbus.ObjectPath("/f" + p)} }

// Accessible interface.

func (f *fakeCalc) GetRoleName(m dbus.Message) (string, *dbus.Error) {
	switch p := f.path(m); {
	case p == "/app":
		return "application", nil
	case p == "/frame":
		return "frame", nil
	case p == "/doc":
		return "document spreadsheet", nil
	case p == "/table":
		return "table", nil
	}
	return "table cell", nil
}

func (f *fakeCalc) GetState(m dbus.Message) ([]uint32, *dbus.Error) {
	var w0 uint32 = 1<<8 | 1<<24 // enabled, sensitive
	if f.showing(f.path(m)) {
		w0 |= 1<<25 | 1<<30 // showing, visible
	}
	return []uint32{w0, 0}, nil
}

func (f *fakeCalc) GetAttributes(dbus.Message) (map[string]string, *dbus.Error) {
	return map[string]string{}, nil
}

func (f *fakeCalc) GetInterfaces(m dbus.Message) ([]string, *dbus.Error) {
	if f.path(m) == "/table" {
		return []string{ifAccessible, ifTable}, nil
	}
	return []string{ifAccessible}, nil
}

func (f *fakeCalc) GetChildren(m dbus.Message) ([]ref, *dbus.Error) {
	switch f.path(m) {
	case "/app":
		return []ref{f.ref("/frame")}, nil
	case "/frame":
		return []ref{f.ref("/doc")}, nil
	case "/doc":
		return []ref{f.ref("/table")}, nil
	case "/table":
		f.mu.Lock()
		f.tableKids++
		f.mu.Unlock()
		// What a real sheet would answer is every cell of the sheet.
		return nil, dbus.MakeFailedError(fmt.Errorf("17 billion children"))
	}
	return nil, nil
}

func (f *fakeCalc) GetChildAtIndex(m dbus.Message, i int32) (ref, *dbus.Error) {
	f.mu.Lock()
	f.childAt++
	f.mu.Unlock()
	return f.ref(fmt.Sprintf("/cell/%d", i)), nil
}

// Properties interface.

func (f *fakeCalc) Get(m dbus.Message, iface, prop string) (dbus.Variant, *dbus.Error) {
	switch {
	case iface == ifTable && prop == "NColumns":
		return dbus.MakeVariant(f.ncols), nil
	case prop == "Name":
		p := f.path(m)
		if row, col, ok := f.cell(p); ok {
			return dbus.MakeVariant(fmt.Sprintf("%c%d", 'A'+col%26, row+1)), nil
		}
		return dbus.MakeVariant(strings.TrimPrefix(p, "/")), nil
	}
	return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, prop))
}

// bus and registry: the session bus doubles as the accessibility bus.
type busObj struct{ addr string }

func (b busObj) GetAddress() (string, *dbus.Error) { return b.addr, nil }

type registryObj struct{ f *fakeCalc }

func (r registryObj) GetChildren() ([]ref, *dbus.Error) { return []ref{r.f.ref("/app")}, nil }

func serveFakeCalc(t *testing.T, addr string, f *fakeCalc) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every object is exported before Auth starts the connection's reader:
	// godbus reads an object's method table without a lock when it serves
	// a call, so an export after the first call is a data race.
	conn, err := dbus.Dial(addr)
	must(err)
	t.Cleanup(func() { conn.Close() })
	f.conn = conn
	must(conn.Export(busObj{addr}, "/org/a11y/bus", "org.a11y.Bus"))
	must(conn.Export(registryObj{f}, rootPath, ifAccessible))
	must(conn.ExportSubtree(f, "/f", ifAccessible))
	must(conn.ExportSubtree(f, "/f", "org.freedesktop.DBus.Properties"))
	must(conn.Auth(nil))
	must(conn.Hello())
	for _, name := range []string{"org.a11y.Bus", registry} {
		if _, err := conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSpreadsheetShowingCells: inside a spreadsheet document, the sheet's
// table is never asked for all its children; its cells on screen are
// found as OSWorld's server finds them, in rows from the top left.
func TestSpreadsheetShowingCells(t *testing.T) {
	tests := []struct {
		name                string
		r0, c0, rows, cols  int
		wantFirst, wantLast string
		maxChildAt          int
	}{
		{name: "top left", r0: 0, c0: 0, rows: 3, cols: 4, wantFirst: "A1", wantLast: "D3", maxChildAt: 3*5 + 1},
		{name: "scrolled", r0: 4, c0: 2, rows: 2, cols: 3, wantFirst: "C5", wantLast: "E6", maxChildAt: 4*501 + 2*(2+4) + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startBus(t)
			f := &fakeCalc{r0: tt.r0, c0: tt.c0, rows: tt.rows, cols: tt.cols, ncols: fakeNCols}
			serveFakeCalc(t, addr, f)
			a := &ATSPI{SessionBus: addr}
			defer a.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			apps, complete, err := a.Tree(ctx)
			if err != nil || !complete {
				t.Fatalf("Tree: complete %v, err %v", complete, err)
			}
			var cells []string
			var walk func(n *Node)
			walk = func(n *Node) {
				if n.Role == "table-cell" {
					cells = append(cells, n.Attrs[0].Value)
				}
				for _, c := range n.Children {
					walk(c)
				}
			}
			for _, app := range apps {
				walk(app)
			}
			if len(cells) != tt.rows*tt.cols || cells[0] != tt.wantFirst || cells[len(cells)-1] != tt.wantLast {
				t.Errorf("cells %v, want %d from %s to %s", cells, tt.rows*tt.cols, tt.wantFirst, tt.wantLast)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.tableKids != 0 {
				t.Errorf("the sheet's table was asked for its children %d times", f.tableKids)
			}
			if f.childAt > tt.maxChildAt {
				t.Errorf("%d GetChildAtIndex calls, want at most %d", f.childAt, tt.maxChildAt)
			}
		})
	}
}

// TestTreeDeadline: a walk that cannot finish in time (a sheet scrolled
// far down, scanned cell by cell) stops at the deadline and says so.
func TestTreeDeadline(t *testing.T) {
	addr := startBus(t)
	f := &fakeCalc{r0: 450, c0: 0, rows: 2, cols: 2, ncols: fakeNCols}
	serveFakeCalc(t, addr, f)
	const deadline = 500 * time.Millisecond
	apps, complete, took := timedTree(t, addr, deadline)
	if complete {
		t.Errorf("a walk cut by its deadline says it is complete")
	}
	if took > deadline+500*time.Millisecond {
		t.Errorf("Tree took %v, want about %v", took, deadline)
	}
	if len(apps) != 1 || apps[0].Role != "application" {
		t.Errorf("got %d applications, want the fake one with what was read of it", len(apps))
	}
}
