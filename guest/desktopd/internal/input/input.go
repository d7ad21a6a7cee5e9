// Package input turns high-level desktop actions (clicks, drags, scrolls,
// key presses, hotkeys, typing of any Unicode text) into XTEST events. Both
// the computer_13 actions of POST /v1/actions and the interpreted pyautogui
// calls of /execute go through it.
package input

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

// device is the part of an X display input needs; *x11.Display has it.
type device interface {
	Size() (width, height int)
	Move(x, y int)
	Button(button int, press bool)
	Key(code xproto.Keycode, press bool)
	Resolve(ctx context.Context, syms []uint32) ([]x11.Stroke, error)
	SpareKeycodes() int
	Flush(ctx context.Context) error
	Pointer(ctx context.Context) (x, y int, err error)
}

var _ device = (*x11.Display)(nil)

// Mouse buttons as X numbers them.
const (
	Left   = 1
	Middle = 2
	Right  = 3
)

// MaxDuration bounds any single movement, interval or wait, so that one
// request cannot hold the input for long.
const MaxDuration = 60 * time.Second

// ErrUnknownKey is returned for a key name pyautogui does not know.
var ErrUnknownKey = errors.New("unknown key name")

// Controller serialises input: the events of two requests never interleave.
type Controller struct {
	// held has room for one: whoever put a value in it has the input.
	held chan struct{}
	dev  device
}

// New returns a Controller for dev.
func New(dev device) *Controller { return &Controller{held: make(chan struct{}, 1), dev: dev} }

// Do runs fn with exclusive use of the input devices and waits until the
// X server has processed every event it sent. A caller whose ctx ends
// while it waits for the input gives up without running fn: its events
// would otherwise land later, after its client has moved on.
func (c *Controller) Do(ctx context.Context, fn func(a *Actor) error) error {
	select {
	case c.held <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.held }()
	if err := ctx.Err(); err != nil {
		return err
	}
	a := &Actor{dev: c.dev}
	err := fn(a)
	if ferr := c.dev.Flush(ctx); err == nil && ferr != nil {
		err = fmt.Errorf("flush input: %w", ferr)
	}
	return err
}

// Actor performs input while its Controller is held; see Controller.Do.
type Actor struct {
	dev device
}

// Point is a screen position.
type Point struct{ X, Y int }

// ScreenSize returns the screen size.
func (a *Actor) ScreenSize() (int, int) { return a.dev.Size() }

// Position returns the pointer position.
func (a *Actor) Position(ctx context.Context) (Point, error) {
	x, y, err := a.dev.Pointer(ctx)
	return Point{x, y}, err
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if d > MaxDuration {
		d = MaxDuration
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sleep waits, bounded by MaxDuration and ctx.
func (a *Actor) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

func (a *Actor) check(p Point) error {
	w, h := a.dev.Size()
	if p.X < 0 || p.Y < 0 || p.X >= w || p.Y >= h {
		return fmt.Errorf("point (%d, %d) is off the %dx%d screen", p.X, p.Y, w, h)
	}
	return nil
}

// MoveTo moves the pointer to p, gliding over dur when dur > 0.
func (a *Actor) MoveTo(ctx context.Context, p Point, dur time.Duration) error {
	if err := a.check(p); err != nil {
		return err
	}
	if dur <= 0 {
		a.dev.Move(p.X, p.Y)
		return nil
	}
	return a.glide(ctx, p, dur, 0)
}

// glide moves in steps so that applications see intermediate motion
// (hover effects, drag thresholds); at least minSteps steps.
func (a *Actor) glide(ctx context.Context, to Point, dur time.Duration, minSteps int) error {
	from, err := a.Position(ctx)
	if err != nil {
		return err
	}
	if dur > MaxDuration {
		dur = MaxDuration
	}
	const frame = 16 * time.Millisecond
	steps := int(dur / frame)
	if steps < minSteps {
		steps = minSteps
	}
	if steps < 1 {
		steps = 1
	}
	for i := 1; i <= steps; i++ {
		x := from.X + (to.X-from.X)*i/steps
		y := from.Y + (to.Y-from.Y)*i/steps
		a.dev.Move(x, y)
		if i < steps {
			if err := sleep(ctx, dur/time.Duration(steps)); err != nil {
				return err
			}
		}
	}
	return nil
}

// MoveRel moves the pointer by (dx, dy).
func (a *Actor) MoveRel(ctx context.Context, dx, dy int, dur time.Duration) error {
	p, err := a.Position(ctx)
	if err != nil {
		return err
	}
	return a.MoveTo(ctx, Point{p.X + dx, p.Y + dy}, dur)
}

func checkButton(b int) error {
	if b < 1 || b > 3 {
		return fmt.Errorf("bad mouse button %d", b)
	}
	return nil
}

// Click clicks button clicks times at p (or where the pointer is when p is
// nil), waiting interval between clicks.
func (a *Actor) Click(ctx context.Context, p *Point, button, clicks int, interval time.Duration) error {
	if err := checkButton(button); err != nil {
		return err
	}
	if clicks < 0 || clicks > 100 {
		return fmt.Errorf("bad click count %d", clicks)
	}
	if p != nil {
		if err := a.MoveTo(ctx, *p, 0); err != nil {
			return err
		}
	}
	for i := 0; i < clicks; i++ {
		if i > 0 {
			if err := sleep(ctx, interval); err != nil {
				return err
			}
		}
		a.dev.Button(button, true)
		a.dev.Button(button, false)
	}
	return nil
}

// ButtonDown presses button, after moving to p when given.
func (a *Actor) ButtonDown(ctx context.Context, p *Point, button int) error {
	return a.button(ctx, p, button, true)
}

// ButtonUp releases button, after moving to p when given.
func (a *Actor) ButtonUp(ctx context.Context, p *Point, button int) error {
	return a.button(ctx, p, button, false)
}

func (a *Actor) button(ctx context.Context, p *Point, button int, press bool) error {
	if err := checkButton(button); err != nil {
		return err
	}
	if p != nil {
		if err := a.MoveTo(ctx, *p, 0); err != nil {
			return err
		}
	}
	a.dev.Button(button, press)
	return nil
}

// DragTo holds button down while moving from the current position to p.
// The motion always has intermediate steps: toolkits start a drag only
// after the pointer moved past a threshold with the button held.
func (a *Actor) DragTo(ctx context.Context, p Point, dur time.Duration, button int) error {
	if err := checkButton(button); err != nil {
		return err
	}
	if err := a.check(p); err != nil {
		return err
	}
	a.dev.Button(button, true)
	// Let the press reach the application before the motion starts.
	if err := a.dev.Flush(ctx); err != nil {
		return err
	}
	err := a.glide(ctx, p, dur, 10)
	a.dev.Button(button, false)
	return err
}

// Scroll turns the wheel: dy > 0 scrolls up, dx > 0 scrolls right, one
// notch per unit, as pyautogui's scroll/hscroll on X11 do.
func (a *Actor) Scroll(ctx context.Context, p *Point, dx, dy int) error {
	if dx > 1000 || dx < -1000 || dy > 1000 || dy < -1000 {
		return fmt.Errorf("scroll amount (%d, %d) out of range ±1000", dx, dy)
	}
	if p != nil {
		if err := a.MoveTo(ctx, *p, 0); err != nil {
			return err
		}
	}
	notch := func(b, n int) {
		for i := 0; i < n; i++ {
			a.dev.Button(b, true)
			a.dev.Button(b, false)
		}
	}
	switch {
	case dy > 0:
		notch(4, dy)
	case dy < 0:
		notch(5, -dy)
	}
	switch {
	case dx > 0:
		notch(7, dx)
	case dx < 0:
		notch(6, -dx)
	}
	return nil
}

func keysyms(names []string) ([]uint32, error) {
	out := make([]uint32, len(names))
	for i, n := range names {
		ks, ok := KeyKeysym(n)
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownKey, n)
		}
		out[i] = ks
	}
	return out, nil
}

// strokes resolves keysyms, with Shift_L last so shifted keys can use it.
func (a *Actor) strokes(ctx context.Context, syms []uint32) ([]x11.Stroke, x11.Stroke, error) {
	st, err := a.dev.Resolve(ctx, append(syms, x11.KeysymShiftL))
	if err != nil {
		return nil, x11.Stroke{}, err
	}
	return st[:len(syms)], st[len(syms)], nil
}

func (a *Actor) strike(st, shift x11.Stroke, down, up bool) {
	if down {
		if st.Shift {
			a.dev.Key(shift.Code, true)
		}
		a.dev.Key(st.Code, true)
	}
	if up {
		a.dev.Key(st.Code, false)
		if st.Shift {
			a.dev.Key(shift.Code, false)
		}
	}
}

// KeyDown presses the named keys in order without releasing them.
func (a *Actor) KeyDown(ctx context.Context, names ...string) error {
	return a.keys(ctx, names, true, false)
}

// KeyUp releases the named keys in order.
func (a *Actor) KeyUp(ctx context.Context, names ...string) error {
	return a.keys(ctx, names, false, true)
}

func (a *Actor) keys(ctx context.Context, names []string, down, up bool) error {
	syms, err := keysyms(names)
	if err != nil {
		return err
	}
	st, shift, err := a.strokes(ctx, syms)
	if err != nil {
		return err
	}
	for _, s := range st {
		a.strike(s, shift, down, up)
	}
	return nil
}

// Press presses and releases each named key in turn, presses times,
// waiting interval between keys.
func (a *Actor) Press(ctx context.Context, names []string, presses int, interval time.Duration) error {
	if presses < 0 || presses > 1000 {
		return fmt.Errorf("bad press count %d", presses)
	}
	syms, err := keysyms(names)
	if err != nil {
		return err
	}
	st, shift, err := a.strokes(ctx, syms)
	if err != nil {
		return err
	}
	for i := 0; i < presses; i++ {
		for j, s := range st {
			if i+j > 0 {
				if err := sleep(ctx, interval); err != nil {
					return err
				}
			}
			a.strike(s, shift, true, true)
		}
	}
	return nil
}

// Hotkey presses the keys in order and releases them in reverse.
func (a *Actor) Hotkey(ctx context.Context, names []string, interval time.Duration) error {
	syms, err := keysyms(names)
	if err != nil {
		return err
	}
	st, shift, err := a.strokes(ctx, syms)
	if err != nil {
		return err
	}
	// Like pyautogui's keyDown, a key on the shifted level brings Shift.
	for i, s := range st {
		if i > 0 {
			if err := sleep(ctx, interval); err != nil {
				return err
			}
		}
		a.strike(s, shift, true, false)
	}
	for i := len(st) - 1; i >= 0; i-- {
		if err := sleep(ctx, interval); err != nil {
			return err
		}
		a.strike(st[i], shift, false, true)
	}
	return nil
}

// Type types text, any Unicode, waiting interval between characters.
// Characters missing from the keymap are bound to spare keycodes in
// chunks small enough for the spare keycodes available.
func (a *Actor) Type(ctx context.Context, text string, interval time.Duration) error {
	runes := []rune(text)
	limit := a.dev.SpareKeycodes()
	if limit < 1 {
		limit = 1
	}
	if limit > 64 {
		limit = 64
	}
	for start := 0; start < len(runes); {
		// A chunk holds at most limit distinct keysyms, so whatever of it
		// is missing from the keymap fits in the spare keycodes.
		distinct := map[uint32]bool{}
		end := start
		var syms []uint32
		for end < len(runes) {
			ks := CharKeysym(runes[end])
			if !distinct[ks] && len(distinct) == limit {
				break
			}
			distinct[ks] = true
			syms = append(syms, ks)
			end++
		}
		st, shift, err := a.strokes(ctx, syms)
		if err != nil {
			return fmt.Errorf("type: %w", err)
		}
		for i, s := range st {
			if start+i > 0 {
				if err := sleep(ctx, interval); err != nil {
					return err
				}
			}
			a.strike(s, shift, true, true)
		}
		start = end
	}
	return ctx.Err()
}
