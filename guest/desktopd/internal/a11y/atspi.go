package a11y

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"
)

// Limits of the walk. Depth and width are OSWorld's; the node budget
// bounds a pathological tree (a spreadsheet exposes every cell).
const (
	MaxDepth = 50
	MaxWidth = 1024
	MaxNodes = 50000
	// callTimeout bounds one D-Bus call: a hung application must not hang
	// the whole request.
	callTimeout = 2 * time.Second
)

// ErrNoBus means no accessibility bus could be reached.
var ErrNoBus = errors.New("no accessibility bus")

// stateNames are AT-SPI's StateType values in order, as OSWorld names them
// (STATE_MULTI_LINE becomes "multi_line").
var stateNames = []string{
	"invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable",
	"enabled", "expandable", "expanded", "focusable", "focused", "has_tooltip", "horizontal",
	"iconified", "modal", "multi_line", "multiselectable", "opaque", "pressed", "resizable",
	"selectable", "selected", "sensitive", "showing", "single_line", "stale", "transient",
	"vertical", "visible", "manages_descendants", "indeterminate", "required", "truncated",
	"animated", "invalid_entry", "supports_autocompletion", "selectable_text", "is_default",
	"visited", "checkable", "has_popup", "read_only",
}

const (
	ifAccessible = "org.a11y.atspi.Accessible"
	ifComponent  = "org.a11y.atspi.Component"
	ifText       = "org.a11y.atspi.Text"
	ifValue      = "org.a11y.atspi.Value"
	ifAction     = "org.a11y.atspi.Action"
	ifImage      = "org.a11y.atspi.Image"
	ifSelection  = "org.a11y.atspi.Selection"
	ifTable      = "org.a11y.atspi.Table"
	registry     = "org.a11y.atspi.Registry"
	rootPath     = "/org/a11y/atspi/accessible/root"
)

// ATSPI reads accessibility trees from the AT-SPI bus that the session bus
// at SessionBus announces.
type ATSPI struct {
	SessionBus string // address of the session bus; "" means none

	mu   sync.Mutex
	conn *dbus.Conn
}

// Close drops the connection.
func (a *ATSPI) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.Close()
		a.conn = nil
	}
}

func (a *ATSPI) connect(ctx context.Context) (*dbus.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil && a.conn.Connected() {
		return a.conn, nil
	}
	if a.SessionBus == "" {
		return nil, ErrNoBus
	}
	// The connections live past this request (the next one reuses the
	// accessibility bus's); the request's end only cuts a connect still
	// under way.
	life, end := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, end)
	defer stop()
	sess, err := dbus.Connect(a.SessionBus, dbus.WithContext(ctx))
	if err != nil {
		end()
		return nil, fmt.Errorf("%w: session bus: %v", ErrNoBus, err)
	}
	defer sess.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var addr string
	if err := sess.Object("org.a11y.Bus", "/org/a11y/bus").CallWithContext(cctx, "org.a11y.Bus.GetAddress", 0).Store(&addr); err != nil {
		end()
		return nil, fmt.Errorf("%w: org.a11y.Bus.GetAddress: %v", ErrNoBus, err)
	}
	conn, err := dbus.Connect(addr, dbus.WithContext(life))
	if err != nil || !stop() {
		end()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%w: connect %s: %v", ErrNoBus, addr, err)
	}
	a.conn = conn
	return conn, nil
}

type ref struct {
	Dest string
	Path dbus.ObjectPath
}

type walker struct {
	conn  *dbus.Conn
	nodes atomic.Int64
	// sem bounds the subtrees walked at once. Each node costs two round
	// trips (its calls are pipelined), so the walk is latency-bound:
	// parallel subtrees keep the bus and the applications busy.
	sem chan struct{}
	// timedOut is set when a call went unanswered (a hung application):
	// what it would have told is missing, so the tree is not complete.
	timedOut atomic.Bool
}

// walkParallel is how many subtrees are walked at once.
const walkParallel = 32

// call is a D-Bus call in flight, with the time it was sent and the walk
// to tell when it goes unanswered.
type call struct {
	*dbus.Call
	sent     time.Time
	timedOut *atomic.Bool
}

// send starts a D-Bus call without waiting for its answer: the calls of
// one node go out together and share one round trip.
func (w *walker) send(ctx context.Context, r ref, method string, args ...any) *call {
	return &call{w.conn.Object(r.Dest, r.Path).GoWithContext(ctx, method, 0, nil, args...), time.Now(), &w.timedOut}
}

func (w *walker) sendProp(ctx context.Context, r ref, iface, name string) *call {
	return w.send(ctx, r, "org.freedesktop.DBus.Properties.Get", iface, name)
}

// wait waits for c's answer, at most callTimeout after it was sent (a
// hung application must not hang the request: the calls of one round trip
// all end together, not callTimeout one after another, so a frozen
// application costs callTimeout) and never past the deadline of the context c was
// sent with: godbus ends a call with its context's error as soon as the
// context ends, so a call sent just before the deadline is cut by the time
// left, not by callTimeout (TestFrozenCallCutAtDeadline). It stores the
// answer in out.
func wait(c *call, out any) error {
	t := time.NewTimer(callTimeout - time.Since(c.sent))
	defer t.Stop()
	select {
	case <-c.Done:
	case <-t.C:
		c.ContextCancel()
		<-c.Done
		if c.Err != nil {
			c.timedOut.Store(true)
		}
	}
	// Releases godbus's watcher of the call's context.
	c.ContextCancel()
	if c.Err != nil {
		return c.Err
	}
	if out == nil {
		return nil
	}
	return c.Store(out)
}

func (w *walker) children(ctx context.Context, r ref) ([]ref, error) {
	var kids []ref
	err := wait(w.send(ctx, r, ifAccessible+".GetChildren"), &kids)
	return kids, err
}

// Tree returns the applications registered on the accessibility bus, each
// with its widgets, walked in parallel as OSWorld does. When ctx ends
// before the walk does, Tree returns what it gathered so far with complete
// false; so does a walk stopped by the node budget, or one that skipped a
// node whose calls went unanswered (a hung application).
func (a *ATSPI) Tree(ctx context.Context) (apps []*Node, complete bool, err error) {
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, false, err
	}
	w := &walker{conn: conn, sem: make(chan struct{}, walkParallel)}
	refs, err := w.children(ctx, ref{registry, rootPath})
	if err != nil {
		if ctx.Err() == nil {
			// The bus may have restarted; reconnect next time.
			a.Close()
		}
		return nil, false, fmt.Errorf("list applications: %w", err)
	}
	if len(refs) > MaxWidth {
		refs = refs[:MaxWidth]
	}
	out := make([]*Node, len(refs))
	var wg sync.WaitGroup
	for i, app := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = w.node(ctx, app, 1, false)
		}()
	}
	wg.Wait()
	for _, n := range out {
		if n != nil {
			apps = append(apps, n)
		}
	}
	return apps, ctx.Err() == nil && w.nodes.Load() <= MaxNodes && !w.timedOut.Load(), nil
}

// node reads one accessible and its subtree, following OSWorld's
// _create_atspi_node. Objects that vanish or do not answer are skipped.
// calc is OSWorld's "calc" flag: the node is inside a spreadsheet
// document, whose sheet table lists every cell of the sheet.
func (w *walker) node(ctx context.Context, r ref, depth int, calc bool) *Node {
	if ctx.Err() != nil || w.nodes.Add(1) > MaxNodes {
		return nil
	}
	// First round trip: everything that does not depend on another answer.
	nameC := w.sendProp(ctx, r, ifAccessible, "Name")
	roleC := w.send(ctx, r, ifAccessible+".GetRoleName")
	stateC := w.send(ctx, r, ifAccessible+".GetState")
	attrC := w.send(ctx, r, ifAccessible+".GetAttributes")
	ifC := w.send(ctx, r, ifAccessible+".GetInterfaces")
	var kidsC *call
	if depth < MaxDepth && !calc {
		// Inside a spreadsheet the children are asked for once the role
		// is known: a sheet's table has a child for each of its 17
		// billion cells.
		kidsC = w.send(ctx, r, ifAccessible+".GetChildren")
	}
	var nameV dbus.Variant
	nameErr := wait(nameC, &nameV)
	var role string
	_ = wait(roleC, &role)
	var states []uint32
	_ = wait(stateC, &states)
	var attrs map[string]string
	_ = wait(attrC, &attrs)
	var ifaces []string
	_ = wait(ifC, &ifaces)
	var kids []ref
	kidsErr := errors.New("not read")
	if kidsC != nil {
		kidsErr = wait(kidsC, &kids)
	}
	if nameErr != nil {
		return nil
	}
	name, _ := nameV.Value().(string)
	rawRole := strings.TrimSpace(role)
	if rawRole == "document spreadsheet" {
		calc = true
	}
	n := &Node{Role: strings.ReplaceAll(rawRole, " ", "-")}
	n.add("name", name)
	set := map[string]bool{}
	for word, bitsv := range states {
		for bit := 0; bit < 32; bit++ {
			if bitsv&(1<<bit) == 0 {
				continue
			}
			if i := word*32 + bit; i < len(stateNames) {
				n.add("st:"+stateNames[i], "true")
				set[stateNames[i]] = true
			}
		}
	}
	for _, k := range sortedKeys(attrs) {
		if k != "" {
			n.add("attr:"+k, attrs[k])
		}
	}
	has := map[string]bool{}
	for _, i := range ifaces {
		has[i] = true
	}

	// Second round trip: the interfaces' contents.
	var extC, textC, actC *call
	if has[ifComponent] && set["visible"] && set["showing"] {
		// Coordinate type 0 is screen coordinates (pyatspi.XY_SCREEN).
		extC = w.send(ctx, r, ifComponent+".GetExtents", uint32(0))
	}
	if has[ifText] {
		textC = w.send(ctx, r, ifText+".GetText", int32(0), int32(-1))
	}
	valueProps := []struct{ attr, prop string }{
		{"value", "CurrentValue"}, {"min", "MinimumValue"}, {"max", "MaximumValue"}, {"step", "MinimumIncrement"},
	}
	var valC []*call
	if has[ifValue] {
		for _, p := range valueProps {
			valC = append(valC, w.sendProp(ctx, r, ifValue, p.prop))
		}
	}
	if has[ifAction] {
		actC = w.send(ctx, r, ifAction+".GetActions")
	}
	if extC != nil {
		var e struct{ X, Y, W, H int32 }
		if wait(extC, &e) == nil {
			n.add("cp:screencoord", fmt.Sprintf("(%d, %d)", e.X, e.Y))
			n.add("cp:size", fmt.Sprintf("(%d, %d)", e.W, e.H))
		}
	}
	if textC != nil {
		var text string
		if wait(textC, &text) == nil {
			n.Text = strings.NewReplacer("\ufffc", "", "\ufffd", "").Replace(text)
		}
	}
	if has[ifImage] {
		n.add("image", "true")
	}
	if has[ifSelection] {
		n.add("selection", "true")
	}
	for i, c := range valC {
		var v dbus.Variant
		if wait(c, &v) == nil {
			if f, ok := v.Value().(float64); ok {
				n.add("val:"+valueProps[i].attr, pyFloat(f))
			}
		}
	}
	if actC != nil {
		var acts []struct{ Name, Description, KeyBinding string }
		if wait(actC, &acts) == nil {
			for _, act := range acts {
				an := strings.ReplaceAll(act.Name, " ", "-")
				n.add("act:"+an+"_desc", act.Description)
				n.add("act:"+an+"_kb", act.KeyBinding)
			}
		}
	}
	if depth >= MaxDepth {
		return n
	}
	if calc && rawRole == "table" {
		kids, kidsErr = w.showingCells(ctx, r, has[ifTable]), nil
	} else if kidsC == nil {
		kidsErr = wait(w.send(ctx, r, ifAccessible+".GetChildren"), &kids)
	}
	if kidsErr != nil {
		return n
	}
	if len(kids) > MaxWidth && !(calc && rawRole == "table") {
		kids = kids[:MaxWidth]
	}
	out := make([]*Node, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids {
		select {
		case w.sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-w.sem }()
				out[i] = w.node(ctx, k, depth+1, calc)
			}()
		default:
			out[i] = w.node(ctx, k, depth+1, calc)
		}
	}
	wg.Wait()
	for _, c := range out {
		if c != nil {
			n.Children = append(n.Children, c)
		}
	}
	return n
}

// Bounds of OSWorld's scan of a sheet: rows and columns of a Calc sheet,
// and how far the scan looks for the first showing cell.
const (
	calcMaxRows    = 1 << 20
	calcMaxColumns = 16384 // LibreOffice 7.4 and later; 1024 before
	calcScanLimit  = 500
)

// showingCells are the cells of a Calc sheet's table that are on screen,
// found as OSWorld's server finds them: row by row from the top left,
// each row from the first showing column until a cell that is not
// showing, stopping at the first row that shows nothing (or after 500
// rows or columns without a showing cell).
func (w *walker) showingCells(ctx context.Context, table ref, isTable bool) []ref {
	ncols := calcMaxColumns
	if isTable {
		var v dbus.Variant
		if wait(w.sendProp(ctx, table, ifTable, "NColumns"), &v) == nil {
			if n, ok := v.Value().(int32); ok && n > 0 && n <= calcMaxColumns {
				ncols = int(n)
			}
		}
	}
	cellAt := func(i int) (ref, bool, error) {
		var c ref
		if err := wait(w.send(ctx, table, ifAccessible+".GetChildAtIndex", int32(i)), &c); err != nil {
			return ref{}, false, err
		}
		var states []uint32
		if err := wait(w.send(ctx, c, ifAccessible+".GetState"), &states); err != nil {
			return c, false, err
		}
		const showing = 25 // STATE_SHOWING
		return c, len(states) > 0 && states[0]&(1<<showing) != 0, nil
	}
	var out []ref
	first, base := false, 0
	for row, index := 0, 0; row < calcMaxRows && index+ncols <= 1<<31-1; row, index = row+1, index+ncols {
		clm := base
		for ; clm < ncols; clm++ {
			if ctx.Err() != nil || len(out) >= MaxNodes {
				return out
			}
			c, show, err := cellAt(index + clm)
			if err != nil {
				return out
			}
			if show {
				out = append(out, c)
				if !first {
					first, base = true, clm
				}
			} else if first || clm >= calcScanLimit {
				break
			}
		}
		if first && clm == base || !first && row >= calcScanLimit {
			break
		}
	}
	return out
}

func pyFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FindText returns the text of the first node with the given role in
// document order, preferring one that is focused; used for /terminal.
func FindText(apps []*Node, role string) (string, bool) {
	var first *Node
	var focused *Node
	var walk func(n *Node, inFocus bool)
	walk = func(n *Node, inFocus bool) {
		for _, a := range n.Attrs {
			if a.Name == "st:focused" || a.Name == "st:active" {
				inFocus = true
			}
		}
		if n.Role == role {
			if first == nil {
				first = n
			}
			if inFocus && focused == nil {
				focused = n
			}
		}
		for _, c := range n.Children {
			walk(c, inFocus)
		}
	}
	for _, a := range apps {
		walk(a, false)
	}
	if focused != nil {
		return focused.Text, true
	}
	if first != nil {
		return first.Text, true
	}
	return "", false
}
