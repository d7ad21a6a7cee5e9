package x11

import (
	"fmt"
	"sync"

	"github.com/jezek/xgb/xproto"
)

// MaxClipboard bounds the clipboard text: it is sent in one property
// change, without the INCR protocol, so it must fit one X request.
const MaxClipboard = 200 << 10

// clipboard owns the CLIPBOARD selection for pyperclip.copy and answers
// other clients' requests for it from the event loop.
type clipboard struct {
	mu   sync.Mutex
	win  xproto.Window
	text string
	own  bool
}

// SetClipboard makes text the CLIPBOARD content.
func (d *Display) SetClipboard(text string) error {
	if len(text) > MaxClipboard {
		return fmt.Errorf("clipboard text of %d bytes exceeds the %d byte limit", len(text), MaxClipboard)
	}
	c := &d.clip
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.win == 0 {
		id, err := xproto.NewWindowId(d.conn)
		if err != nil {
			return fmt.Errorf("new window id: %w", err)
		}
		if err := xproto.CreateWindowChecked(d.conn, 0, id, d.root, -10, -10, 1, 1, 0,
			xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
			return fmt.Errorf("create clipboard window: %w", err)
		}
		c.win = id
	}
	sel, err := d.atom("CLIPBOARD")
	if err != nil {
		return err
	}
	c.text = text
	xproto.SetSelectionOwner(d.conn, c.win, sel, xproto.TimeCurrentTime)
	r, err := xproto.GetSelectionOwner(d.conn, sel).Reply()
	if err != nil {
		return fmt.Errorf("get selection owner: %w", err)
	}
	if r.Owner != c.win {
		return fmt.Errorf("could not take the CLIPBOARD selection")
	}
	c.own = true
	return nil
}

func (c *clipboard) lost(e xproto.SelectionClearEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Owner == c.win {
		c.own = false
	}
}

// answer serves a SelectionRequest following ICCCM: TARGETS, or the text
// as UTF8_STRING/STRING/TEXT; anything else is refused with property None.
func (c *clipboard) answer(d *Display, e xproto.SelectionRequestEvent) {
	c.mu.Lock()
	text, own := c.text, c.own
	c.mu.Unlock()
	prop := e.Property
	if prop == xproto.AtomNone {
		prop = e.Target // obsolete clients
	}
	targets, _ := d.atom("TARGETS")
	utf8, _ := d.atom("UTF8_STRING")
	txt, _ := d.atom("TEXT")
	plain, _ := d.atom("text/plain;charset=utf-8")
	ok := own
	if own {
		switch e.Target {
		case targets:
			list := []xproto.Atom{targets, utf8, xproto.AtomString, txt, plain}
			buf := make([]byte, 4*len(list))
			for i, a := range list {
				xgbPut32(buf[i*4:], uint32(a))
			}
			xproto.ChangeProperty(d.conn, xproto.PropModeReplace, e.Requestor, prop, xproto.AtomAtom, 32, uint32(len(list)), buf)
		case utf8, txt, plain, xproto.AtomString:
			typ := e.Target
			if typ == txt {
				typ = utf8
			}
			xproto.ChangeProperty(d.conn, xproto.PropModeReplace, e.Requestor, prop, typ, 8, uint32(len(text)), []byte(text))
		default:
			ok = false
		}
	}
	if !ok {
		prop = xproto.AtomNone
	}
	ev := xproto.SelectionNotifyEvent{
		Time: e.Time, Requestor: e.Requestor, Selection: e.Selection, Target: e.Target, Property: prop,
	}
	xproto.SendEvent(d.conn, false, e.Requestor, xproto.EventMaskNoEvent, string(ev.Bytes()))
}

func xgbPut32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
