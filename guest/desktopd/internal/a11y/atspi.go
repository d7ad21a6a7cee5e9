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
	sess, err := dbus.Connect(a.SessionBus, dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("%w: session bus: %v", ErrNoBus, err)
	}
	defer sess.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var addr string
	if err := sess.Object("org.a11y.Bus", "/org/a11y/bus").CallWithContext(cctx, "org.a11y.Bus.GetAddress", 0).Store(&addr); err != nil {
		return nil, fmt.Errorf("%w: org.a11y.Bus.GetAddress: %v", ErrNoBus, err)
	}
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
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
}

func (w *walker) call(ctx context.Context, r ref, method string, out any, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c := w.conn.Object(r.Dest, r.Path).CallWithContext(ctx, method, 0, args...)
	if c.Err != nil {
		return c.Err
	}
	if out == nil {
		return nil
	}
	return c.Store(out)
}

func (w *walker) prop(ctx context.Context, r ref, iface, name string) (dbus.Variant, error) {
	var v dbus.Variant
	err := w.call(ctx, r, "org.freedesktop.DBus.Properties.Get", &v, iface, name)
	return v, err
}

func (w *walker) children(ctx context.Context, r ref) ([]ref, error) {
	var kids []ref
	err := w.call(ctx, r, ifAccessible+".GetChildren", &kids)
	return kids, err
}

// Tree returns the applications registered on the accessibility bus, each
// with its widgets, walked in parallel as OSWorld does.
func (a *ATSPI) Tree(ctx context.Context) ([]*Node, error) {
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	w := &walker{conn: conn}
	apps, err := w.children(ctx, ref{registry, rootPath})
	if err != nil {
		// The bus may have restarted; reconnect next time.
		a.Close()
		return nil, fmt.Errorf("list applications: %w", err)
	}
	out := make([]*Node, len(apps))
	var wg sync.WaitGroup
	for i, app := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = w.node(ctx, app, 1)
		}()
	}
	wg.Wait()
	var nodes []*Node
	for _, n := range out {
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nodes, nil
}

// node reads one accessible and its subtree, following OSWorld's
// _create_atspi_node. Objects that vanish or do not answer are skipped.
func (w *walker) node(ctx context.Context, r ref, depth int) *Node {
	if ctx.Err() != nil || w.nodes.Add(1) > MaxNodes {
		return nil
	}
	nameV, err := w.prop(ctx, r, ifAccessible, "Name")
	if err != nil {
		return nil
	}
	name, _ := nameV.Value().(string)
	var role string
	_ = w.call(ctx, r, ifAccessible+".GetRoleName", &role)
	n := &Node{Role: strings.ReplaceAll(strings.TrimSpace(role), " ", "-")}
	n.add("name", name)

	var states []uint32
	_ = w.call(ctx, r, ifAccessible+".GetState", &states)
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
	var attrs map[string]string
	_ = w.call(ctx, r, ifAccessible+".GetAttributes", &attrs)
	for _, k := range sortedKeys(attrs) {
		if k != "" {
			n.add("attr:"+k, attrs[k])
		}
	}
	var ifaces []string
	_ = w.call(ctx, r, ifAccessible+".GetInterfaces", &ifaces)
	has := map[string]bool{}
	for _, i := range ifaces {
		has[i] = true
	}
	if has[ifComponent] && set["visible"] && set["showing"] {
		// Coordinate type 0 is screen coordinates (pyatspi.XY_SCREEN).
		var e struct{ X, Y, W, H int32 }
		if w.call(ctx, r, ifComponent+".GetExtents", &e, uint32(0)) == nil {
			n.add("cp:screencoord", fmt.Sprintf("(%d, %d)", e.X, e.Y))
			n.add("cp:size", fmt.Sprintf("(%d, %d)", e.W, e.H))
		}
	}
	if has[ifText] {
		var text string
		if w.call(ctx, r, ifText+".GetText", &text, int32(0), int32(-1)) == nil {
			n.Text = strings.NewReplacer("\ufffc", "", "\ufffd", "").Replace(text)
		}
	}
	if has[ifImage] {
		n.add("image", "true")
	}
	if has[ifSelection] {
		n.add("selection", "true")
	}
	if has[ifValue] {
		for _, p := range []struct{ attr, prop string }{
			{"value", "CurrentValue"}, {"min", "MinimumValue"}, {"max", "MaximumValue"}, {"step", "MinimumIncrement"},
		} {
			if v, err := w.prop(ctx, r, ifValue, p.prop); err == nil {
				if f, ok := v.Value().(float64); ok {
					n.add("val:"+p.attr, pyFloat(f))
				}
			}
		}
	}
	if has[ifAction] {
		var acts []struct{ Name, Description, KeyBinding string }
		if w.call(ctx, r, ifAction+".GetActions", &acts) == nil {
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
	kids, err := w.children(ctx, r)
	if err != nil {
		return n
	}
	if len(kids) > MaxWidth {
		kids = kids[:MaxWidth]
	}
	for _, k := range kids {
		if c := w.node(ctx, k, depth+1); c != nil {
			n.Children = append(n.Children, c)
		}
	}
	return n
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
