// Package x11 talks to an X server in pure Go (no cgo): screenshots with
// the cursor composited, XTEST input, keyboard remapping for characters
// that are not on the keymap, EWMH window queries and actions, and the
// CLIPBOARD selection.
package x11

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
	"go.uber.org/zap"
)

// ErrClosed is returned once the connection to the X server is gone.
var ErrClosed = errors.New("x11: connection closed")

// Display is one connection to an X server's first screen. It is safe for
// concurrent use.
type Display struct {
	log    *zap.Logger
	name   string
	conn   *xgb.Conn
	screen *xproto.ScreenInfo
	root   xproto.Window
	width  int
	height int

	hasXFixes bool
	pf        pixelFormat

	atomMu sync.Mutex
	atoms  map[string]xproto.Atom

	kb keyboard

	clip clipboard

	// rootCh is closed and replaced at every property change on the root
	// window (rootChanged).
	rootMu sync.Mutex
	rootCh chan struct{}

	done   chan struct{} // closed when the event loop ends
	closed sync.Once
}

// Open connects to the X display name (for example ":1") and starts the
// goroutine that reads its events; Close stops it.
func Open(ctx context.Context, name string, logger *zap.Logger) (*Display, error) {
	// xgb logs through a package-level logger; silence it, errors reach
	// us as return values.
	xgb.Logger = log.New(io.Discard, "", 0)
	type result struct {
		c   *xgb.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := xgb.NewConnDisplay(name)
		ch <- result{c, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, fmt.Errorf("connect to X display %s: %w", name, r.err)
	}
	c := r.c
	if err := xtest.Init(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("X display %s has no XTEST extension: %w", name, err)
	}
	setup := xproto.Setup(c)
	screen := setup.DefaultScreen(c)
	d := &Display{
		log:    logger,
		name:   name,
		conn:   c,
		screen: screen,
		root:   screen.Root,
		width:  int(screen.WidthInPixels),
		height: int(screen.HeightInPixels),
		atoms:  map[string]xproto.Atom{},
		done:   make(chan struct{}),
		rootCh: make(chan struct{}),
	}
	// XFIXES gives the cursor image; without it screenshots lack a cursor.
	if err := xfixes.Init(c); err == nil {
		if _, err := xfixes.QueryVersion(c, 4, 0).Reply(); err == nil {
			d.hasXFixes = true
		}
	}
	if err := d.checkPixelFormat(setup); err != nil {
		c.Close()
		return nil, err
	}
	if err := d.kb.load(d); err != nil {
		c.Close()
		return nil, err
	}
	// Root property changes wake the waits for the window manager
	// (WaitForWM, WaitManaged) instead of a polling timer.
	if err := xproto.ChangeWindowAttributesChecked(c, d.root, xproto.CwEventMask,
		[]uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		c.Close()
		return nil, fmt.Errorf("watch the root window's properties on %s: %w", name, err)
	}
	go d.eventLoop()
	return d, nil
}

// Name returns the display name given to Open.
func (d *Display) Name() string { return d.name }

// Size returns the screen size in pixels.
func (d *Display) Size() (width, height int) { return d.width, d.height }

// Done is closed when the connection to the X server ends.
func (d *Display) Done() <-chan struct{} { return d.done }

// Close ends the connection.
func (d *Display) Close() {
	d.closed.Do(func() { d.conn.Close() })
	<-d.done
}

// Ping makes a round trip to the server.
func (d *Display) Ping(ctx context.Context) error {
	return d.sync(ctx)
}

// sync waits until the server has processed every request sent so far.
func (d *Display) sync(ctx context.Context) error {
	ck := xproto.GetInputFocus(d.conn)
	errc := make(chan error, 1)
	go func() {
		_, err := ck.Reply()
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("x11 round trip: %w", err)
		}
		return nil
	case <-d.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Display) eventLoop() {
	defer close(d.done)
	for {
		ev, xerr := d.conn.WaitForEvent()
		if ev == nil && xerr == nil {
			return
		}
		if xerr != nil {
			// Errors of unchecked requests (for example a window that
			// vanished between two calls) are expected now and then.
			d.log.Debug("x11 async error", zap.String("error", xerr.Error()))
			continue
		}
		switch e := ev.(type) {
		case xproto.SelectionRequestEvent:
			d.clip.answer(d, e)
		case xproto.SelectionClearEvent:
			d.clip.lost(e)
		case xproto.MappingNotifyEvent:
			// Someone else changed the keymap: reload on next use.
			d.kb.invalidate()
		case xproto.PropertyNotifyEvent:
			if e.Window == d.root {
				d.notifyRoot()
			}
		}
	}
}

// atom interns name, caching the answer.
func (d *Display) atom(name string) (xproto.Atom, error) {
	d.atomMu.Lock()
	a, ok := d.atoms[name]
	d.atomMu.Unlock()
	if ok {
		return a, nil
	}
	r, err := xproto.InternAtom(d.conn, false, uint16(len(name)), name).Reply()
	if err != nil {
		return 0, fmt.Errorf("intern atom %s: %w", name, err)
	}
	d.atomMu.Lock()
	d.atoms[name] = r.Atom
	d.atomMu.Unlock()
	return r.Atom, nil
}

// WaitForWM waits until an EWMH window manager announces itself through
// _NET_SUPPORTING_WM_CHECK; windows opened before that map slowly. It wakes
// on the root window's property changes, not on a timer.
func (d *Display) WaitForWM(ctx context.Context) error {
	for {
		changed := d.rootChanged()
		if d.wmReady() {
			return nil
		}
		if err := d.waitRoot(ctx, changed, wmCheckInterval); err != nil {
			return fmt.Errorf("wait for window manager: %w", err)
		}
	}
}

// wmCheckInterval bounds the wait between two checks of a condition on the
// root window's properties: a window manager may set the check window's own
// property after the root's, which sends no event to the root.
const wmCheckInterval = 100 * time.Millisecond

// Probe is a small top-level window that proves that the window manager
// manages new windows: see MapProbe and ProbeManaged.
type Probe struct {
	d   *Display
	wid xproto.Window
	// remap is the wait, from the window manager's announcement, before
	// the probe is mapped again (WaitManaged).
	remap time.Duration
}

// MapProbe creates and maps a probe window; call it before the window
// manager starts. The window manager then takes the probe over in the pass
// over existing windows it makes once it has loaded its configuration and
// theme, after it announced itself (openbox: 10-50 ms later on an idle
// machine, over 0.5 s on a loaded one). A window mapped after the
// announcement but before that pass is never managed (openbox 3.6 drops
// its MapRequest) and has to be mapped again, which ProbeManaged does.
func (d *Display) MapProbe() (*Probe, error) {
	return d.mapProbe(premappedRemap)
}

// Re-mapping a probe: a re-map while the window manager is still taking
// the window over undoes that work, so a probe mapped before the window
// manager started (which it always finds) is re-mapped only as a last
// resort; one mapped to a running window manager, which may have dropped
// the MapRequest, sooner. Each later re-map waits twice as long, at most
// remapMax.
const (
	premappedRemap = 3 * time.Second
	lateRemap      = 500 * time.Millisecond
	remapMax       = 4 * time.Second
)

func (d *Display) mapProbe(remap time.Duration) (*Probe, error) {
	wid, err := xproto.NewWindowId(d.conn)
	if err != nil {
		return nil, fmt.Errorf("probe window id: %w", err)
	}
	s := d.screen
	if err := xproto.CreateWindowChecked(d.conn, s.RootDepth, wid, d.root, 0, 0, 16, 16, 0,
		xproto.WindowClassInputOutput, s.RootVisual, 0, nil).Check(); err != nil {
		return nil, fmt.Errorf("create probe window: %w", err)
	}
	p := &Probe{d: d, wid: wid, remap: remap}
	if err := xproto.MapWindowChecked(d.conn, wid).Check(); err != nil {
		p.Close()
		return nil, fmt.Errorf("map probe window: %w", err)
	}
	return p, nil
}

// Close destroys the probe window.
func (p *Probe) Close() { xproto.DestroyWindow(p.d.conn, p.wid) }

// WaitManaged waits until the window manager lists the probe in
// _NET_CLIENT_LIST, then destroys the probe. It wakes on the root window's
// property changes; once the window manager has announced itself and the
// probe is still not managed after a while, it maps the probe again
// (unmap, map: a fresh MapRequest).
func (p *Probe) WaitManaged(ctx context.Context) error {
	defer p.Close()
	d := p.d
	// since is when the window manager was first seen announced, later
	// when the probe was last mapped again; zero before the announcement.
	var since time.Time
	wait := p.remap
	for {
		changed := d.rootChanged()
		if p.managed() {
			return nil
		}
		next := wmCheckInterval
		if since.IsZero() && d.wmReady() {
			since = time.Now()
		}
		if !since.IsZero() {
			if now := time.Now(); now.Sub(since) >= wait {
				xproto.UnmapWindow(d.conn, p.wid)
				if err := xproto.MapWindowChecked(d.conn, p.wid).Check(); err != nil {
					return fmt.Errorf("map probe window: %w", err)
				}
				since, wait = now, min(2*wait, remapMax)
			}
			next = min(next, time.Until(since.Add(wait)))
		}
		if err := d.waitRoot(ctx, changed, next); err != nil {
			return fmt.Errorf("wait for the window manager to manage a window: %w", err)
		}
	}
}

func (p *Probe) managed() bool {
	for _, id := range p.d.u32list(p.d.root, "_NET_CLIENT_LIST", xproto.AtomWindow) {
		if xproto.Window(id) == p.wid {
			return true
		}
	}
	return false
}

// ProbeManaged proves that a window opened now is managed: it maps a probe
// window and waits until the window manager lists it in _NET_CLIENT_LIST
// (WaitManaged). A window manager can announce itself (WaitForWM) seconds
// before it manages windows, and the X server can be busy for as long
// right after it starts (measured in a fresh desktop container: an xterm
// launched as soon as the WM had announced itself was managed 5 s later,
// one launched 2 s later at once). A task's first window opened in that
// time misses the keystrokes typed into it, so desktopd is not ready before
// a probe is managed. With a window manager it starts itself, desktopd maps
// the probe before starting it (MapProbe), which is faster.
func (d *Display) ProbeManaged(ctx context.Context) error {
	p, err := d.mapProbe(lateRemap)
	if err != nil {
		return err
	}
	return p.WaitManaged(ctx)
}

// rootChanged returns a channel closed at the next property change on the
// root window. Take it before checking a condition, then wait on it, and
// no change between the check and the wait is missed.
func (d *Display) rootChanged() <-chan struct{} {
	d.rootMu.Lock()
	defer d.rootMu.Unlock()
	return d.rootCh
}

// notifyRoot wakes the waiters of rootChanged.
func (d *Display) notifyRoot() {
	d.rootMu.Lock()
	close(d.rootCh)
	d.rootCh = make(chan struct{})
	d.rootMu.Unlock()
}

// waitRoot waits for changed, at most max.
func (d *Display) waitRoot(ctx context.Context, changed <-chan struct{}, max time.Duration) error {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-changed:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.done:
		return ErrClosed
	}
}

func (d *Display) wmReady() bool {
	check, err := d.atom("_NET_SUPPORTING_WM_CHECK")
	if err != nil {
		return false
	}
	w, ok := d.windowProp(d.root, check)
	if !ok || w == 0 {
		return false
	}
	// The check window must point to itself, or the property is stale.
	self, ok := d.windowProp(w, check)
	return ok && self == w
}
