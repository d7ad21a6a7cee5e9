package x11

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/jezek/xgb/xproto"
)

// Window describes a top-level client window as the window manager lists
// it in _NET_CLIENT_LIST.
type Window struct {
	ID       uint32
	Title    string
	Instance string // first WM_CLASS string
	Class    string // second WM_CLASS string
	PID      int
	X, Y     int // absolute position of the client area
	Width    int
	Height   int
	Mapped   bool
	Active   bool
}

func (d *Display) windowProp(w xproto.Window, prop xproto.Atom) (xproto.Window, bool) {
	r, err := xproto.GetProperty(d.conn, false, w, prop, xproto.AtomWindow, 0, 1).Reply()
	if err != nil || r.Format != 32 || len(r.Value) < 4 {
		return 0, false
	}
	return xproto.Window(binary.LittleEndian.Uint32(r.Value)), true
}

func (d *Display) property(w xproto.Window, name string, typ xproto.Atom) ([]byte, byte, error) {
	a, err := d.atom(name)
	if err != nil {
		return nil, 0, err
	}
	// 1 MiB of property data is far more than any title or list needs.
	r, err := xproto.GetProperty(d.conn, false, w, a, typ, 0, 1<<18).Reply()
	if err != nil {
		return nil, 0, fmt.Errorf("get property %s: %w", name, err)
	}
	return r.Value, r.Format, nil
}

func (d *Display) u32list(w xproto.Window, name string, typ xproto.Atom) []uint32 {
	v, f, err := d.property(w, name, typ)
	if err != nil || f != 32 {
		return nil
	}
	out := make([]uint32, len(v)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(v[i*4:])
	}
	return out
}

// Windows lists the managed top-level windows in stacking order of the
// window manager's client list.
func (d *Display) Windows(ctx context.Context) ([]Window, error) {
	ids := d.u32list(d.root, "_NET_CLIENT_LIST", xproto.AtomWindow)
	var active uint32
	if a := d.u32list(d.root, "_NET_ACTIVE_WINDOW", xproto.AtomWindow); len(a) > 0 {
		active = a[0]
	}
	utf8, err := d.atom("UTF8_STRING")
	if err != nil {
		return nil, err
	}
	out := make([]Window, 0, len(ids))
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w := xproto.Window(id)
		win := Window{ID: id, Active: id == active}
		if v, _, err := d.property(w, "_NET_WM_NAME", utf8); err == nil && len(v) > 0 {
			win.Title = string(v)
		} else if v, _, err := d.property(w, "WM_NAME", xproto.AtomAny); err == nil {
			win.Title = string(v)
		}
		if v, _, err := d.property(w, "WM_CLASS", xproto.AtomString); err == nil {
			parts := strings.Split(strings.TrimRight(string(v), "\x00"), "\x00")
			win.Instance = parts[0]
			if len(parts) > 1 {
				win.Class = parts[1]
			}
		}
		if p := d.u32list(w, "_NET_WM_PID", xproto.AtomCardinal); len(p) > 0 {
			win.PID = int(p[0])
		}
		attrs, err := xproto.GetWindowAttributes(d.conn, w).Reply()
		if err != nil {
			continue // the window went away meanwhile
		}
		win.Mapped = attrs.MapState == xproto.MapStateViewable
		geo, err := xproto.GetGeometry(d.conn, xproto.Drawable(w)).Reply()
		if err != nil {
			continue
		}
		tr, err := xproto.TranslateCoordinates(d.conn, w, d.root, 0, 0).Reply()
		if err != nil {
			continue
		}
		win.X, win.Y = int(tr.DstX), int(tr.DstY)
		win.Width, win.Height = int(geo.Width), int(geo.Height)
		out = append(out, win)
	}
	return out, nil
}

// Match selects windows the way wmctrl does: by title or, with byClass,
// by either WM_CLASS string; a substring match ignoring case unless strict,
// which asks for an exact, case-sensitive match.
func Match(w Window, name string, strict, byClass bool) bool {
	cands := []string{w.Title}
	if byClass {
		cands = []string{w.Instance, w.Class, w.Instance + "." + w.Class}
	}
	for _, c := range cands {
		if strict && c == name {
			return true
		}
		if !strict && strings.Contains(strings.ToLower(c), strings.ToLower(name)) {
			return true
		}
	}
	return false
}

func (d *Display) clientMessage(w xproto.Window, typ string, data ...uint32) error {
	a, err := d.atom(typ)
	if err != nil {
		return err
	}
	var d32 [5]uint32
	copy(d32[:], data)
	ev := xproto.ClientMessageEvent{
		Format: 32,
		Window: w,
		Type:   a,
		Data:   xproto.ClientMessageDataUnionData32New(d32[:]),
	}
	const mask = xproto.EventMaskSubstructureRedirect | xproto.EventMaskSubstructureNotify
	return xproto.SendEventChecked(d.conn, false, d.root, mask, string(ev.Bytes())).Check()
}

// Activate asks the window manager to raise and focus the window, switching
// to its desktop.
func (d *Display) Activate(ctx context.Context, id uint32) error {
	w := xproto.Window(id)
	if desk := d.u32list(w, "_NET_WM_DESKTOP", xproto.AtomCardinal); len(desk) > 0 && desk[0] != 0xffffffff {
		_ = d.clientMessage(d.root, "_NET_CURRENT_DESKTOP", desk[0], 0)
	}
	// Source indication 2: a pager, which window managers always obey.
	if err := d.clientMessage(w, "_NET_ACTIVE_WINDOW", 2, 0, 0); err != nil {
		return fmt.Errorf("activate window %#x: %w", id, err)
	}
	return d.sync(ctx)
}

// CloseWindow asks the window manager to close the window gracefully.
func (d *Display) CloseWindow(ctx context.Context, id uint32) error {
	if err := d.clientMessage(xproto.Window(id), "_NET_CLOSE_WINDOW", 0, 2); err != nil {
		return fmt.Errorf("close window %#x: %w", id, err)
	}
	return d.sync(ctx)
}
