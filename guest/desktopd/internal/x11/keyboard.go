package x11

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// Keysym values used here; the rest come from callers.
const (
	KeysymShiftL = 0xffe1
	noSymbol     = 0
)

// Stroke is how to produce one keysym: a keycode, pressed with Shift held
// when the keysym sits on the shifted level.
type Stroke struct {
	Code  xproto.Keycode
	Shift bool
}

// keyboard caches the server's keymap and hands out spare keycodes to
// keysyms that are not on it (the trick xdotool uses to type any Unicode
// character).
type keyboard struct {
	mu       sync.Mutex
	stale    bool
	min, max xproto.Keycode
	perCode  int
	syms     []xproto.Keysym // (code-min)*perCode + level
	spare    []xproto.Keycode
	isSpare  map[xproto.Keycode]bool
	assigned map[xproto.Keysym]xproto.Keycode // keysym -> spare keycode
	lastUse  map[xproto.Keycode]time.Time
	// ours marks keymap changes made by us, so that the MappingNotify they
	// cause does not throw away the assignments.
	ourChanges int
}

func (k *keyboard) load(d *Display) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loadLocked(d)
}

func (k *keyboard) loadLocked(d *Display) error {
	min, max := xproto.Setup(d.conn).MinKeycode, xproto.Setup(d.conn).MaxKeycode
	r, err := xproto.GetKeyboardMapping(d.conn, min, byte(max-min+1)).Reply()
	if err != nil {
		return fmt.Errorf("get keyboard mapping: %w", err)
	}
	k.min, k.max, k.perCode, k.syms = min, max, int(r.KeysymsPerKeycode), r.Keysyms
	if k.perCode < 2 {
		return fmt.Errorf("keyboard mapping has %d keysyms per keycode, need 2", k.perCode)
	}
	if k.assigned == nil {
		k.lastUse = map[xproto.Keycode]time.Time{}
		// The spare keycodes are the ones empty at start; they stay ours
		// for the life of the connection.
		for c := int(min); c <= int(max); c++ {
			empty := true
			for l := 0; l < k.perCode; l++ {
				if k.syms[(c-int(min))*k.perCode+l] != noSymbol {
					empty = false
					break
				}
			}
			// Keycodes below 9 are reserved on many servers; stay clear.
			if empty && c > 8 {
				k.spare = append(k.spare, xproto.Keycode(c))
			}
		}
		k.isSpare = map[xproto.Keycode]bool{}
		for _, c := range k.spare {
			k.isSpare[c] = true
		}
	}
	// Rebuild the bindings of the spare keycodes from what the server
	// holds now.
	k.assigned = map[xproto.Keysym]xproto.Keycode{}
	for _, c := range k.spare {
		if s := k.syms[(int(c)-int(min))*k.perCode]; s != noSymbol {
			k.assigned[s] = c
		}
	}
	k.stale = false
	return nil
}

func (k *keyboard) invalidate() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ourChanges > 0 {
		k.ourChanges--
		return
	}
	k.stale = true
}

func (k *keyboard) lookup(sym xproto.Keysym) (Stroke, bool) {
	if c, ok := k.assigned[sym]; ok {
		return Stroke{Code: c}, true
	}
	for c := int(k.min); c <= int(k.max); c++ {
		if k.isSpare[xproto.Keycode(c)] {
			continue // bound by us; the assigned map is the truth
		}
		base := (c - int(k.min)) * k.perCode
		if k.syms[base] == sym {
			return Stroke{Code: xproto.Keycode(c)}, true
		}
		if k.syms[base+1] == sym {
			return Stroke{Code: xproto.Keycode(c), Shift: true}, true
		}
	}
	return Stroke{}, false
}

// SpareKeycodes reports how many keysyms missing from the keymap can be
// typed in one Resolve call.
func (d *Display) SpareKeycodes() int {
	d.kb.mu.Lock()
	defer d.kb.mu.Unlock()
	return len(d.kb.spare)
}

// Resolve returns a stroke for every keysym, binding spare keycodes to the
// keysyms that are not on the keymap. After a rebinding it waits briefly so
// that clients can refresh their keymap before the keys arrive.
func (d *Display) Resolve(ctx context.Context, syms []uint32) ([]Stroke, error) {
	k := &d.kb
	k.mu.Lock()
	if k.stale {
		if err := k.loadLocked(d); err != nil {
			k.mu.Unlock()
			return nil, err
		}
	}
	out := make([]Stroke, len(syms))
	var missing []xproto.Keysym
	seen := map[xproto.Keysym]bool{}
	for i, s := range syms {
		st, ok := k.lookup(xproto.Keysym(s))
		if ok {
			out[i] = st
			continue
		}
		if !seen[xproto.Keysym(s)] {
			seen[xproto.Keysym(s)] = true
			missing = append(missing, xproto.Keysym(s))
		}
	}
	if len(missing) == 0 {
		now := time.Now()
		for _, st := range out {
			k.lastUse[st.Code] = now
		}
		k.mu.Unlock()
		return out, nil
	}
	if len(missing) > len(k.spare) {
		k.mu.Unlock()
		return nil, fmt.Errorf("need %d keycodes for characters not on the keymap, only %d spare", len(missing), len(k.spare))
	}
	// Pick spare keycodes, least recently used first, skipping the ones
	// bound to keysyms of this very batch.
	inBatch := map[xproto.Keycode]bool{}
	for _, st := range out {
		inBatch[st.Code] = true
	}
	var recentlyUsed time.Time
	for _, sym := range missing {
		var best xproto.Keycode
		var bestT time.Time
		found := false
		for _, c := range k.spare {
			if inBatch[c] {
				continue
			}
			t := k.lastUse[c]
			if !found || t.Before(bestT) {
				best, bestT, found = c, t, true
			}
		}
		if !found {
			k.mu.Unlock()
			return nil, fmt.Errorf("no spare keycode left for keysym %#x", sym)
		}
		if bestT.After(recentlyUsed) {
			recentlyUsed = bestT
		}
		for s, c := range k.assigned {
			if c == best {
				delete(k.assigned, s)
			}
		}
		k.assigned[sym] = best
		inBatch[best] = true
		row := make([]xproto.Keysym, k.perCode)
		row[0], row[1] = sym, sym
		k.ourChanges++
		xproto.ChangeKeyboardMapping(d.conn, 1, best, byte(k.perCode), row)
	}
	for i, s := range syms {
		if c, ok := k.assigned[xproto.Keysym(s)]; ok {
			out[i] = Stroke{Code: c}
		}
	}
	now := time.Now()
	for _, st := range out {
		k.lastUse[st.Code] = now
	}
	k.mu.Unlock()

	// A client handles the MappingNotify by fetching the keymap; give it
	// time to do so before the key events that depend on the new binding,
	// and longer when a keycode typed moments ago was rebound (its old
	// events may still be queued in the client).
	wait := 25 * time.Millisecond
	if time.Since(recentlyUsed) < time.Second {
		wait = 150 * time.Millisecond
	}
	if err := d.sync(ctx); err != nil {
		return nil, err
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return out, nil
}

// Key presses or releases a keycode.
func (d *Display) Key(code xproto.Keycode, press bool) {
	t := byte(xproto.KeyRelease)
	if press {
		t = xproto.KeyPress
	}
	xtest.FakeInput(d.conn, t, byte(code), 0, d.root, 0, 0, 0)
}

// Button presses or releases a pointer button (1 left, 2 middle, 3 right,
// 4/5 wheel up/down, 6/7 wheel left/right).
func (d *Display) Button(button int, press bool) {
	t := byte(xproto.ButtonRelease)
	if press {
		t = xproto.ButtonPress
	}
	xtest.FakeInput(d.conn, t, byte(button), 0, d.root, 0, 0, 0)
}

// Move warps the pointer to (x, y) in screen coordinates.
func (d *Display) Move(x, y int) {
	xtest.FakeInput(d.conn, xproto.MotionNotify, 0, 0, d.root, int16(x), int16(y), 0)
}

// Flush waits until the server has processed every input event sent.
func (d *Display) Flush(ctx context.Context) error { return d.sync(ctx) }

// Pointer returns the pointer position.
func (d *Display) Pointer(ctx context.Context) (x, y int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	r, err := xproto.QueryPointer(d.conn, d.root).Reply()
	if err != nil {
		return 0, 0, fmt.Errorf("query pointer: %w", err)
	}
	return int(r.RootX), int(r.RootY), nil
}
