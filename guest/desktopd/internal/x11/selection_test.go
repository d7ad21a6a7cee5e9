package x11

import (
	"context"
	"fmt"
	"time"

	"github.com/jezek/xgb/xproto"
)

// readSelection asks the owner of a selection for UTF8_STRING and reads
// the answer back, as a pasting client would. It polls the property
// instead of waiting for SelectionNotify, because the event loop owns the
// connection's events.
func (d *Display) readSelection(ctx context.Context, name string) (string, error) {
	sel, err := d.atom(name)
	if err != nil {
		return "", err
	}
	utf8, _ := d.atom("UTF8_STRING")
	prop, _ := d.atom("DESKTOPD_TEST_PASTE")
	id, err := xproto.NewWindowId(d.conn)
	if err != nil {
		return "", err
	}
	if err := xproto.CreateWindowChecked(d.conn, 0, id, d.root, 0, 0, 1, 1, 0,
		xproto.WindowClassInputOnly, 0, 0, nil).Check(); err != nil {
		return "", err
	}
	xproto.ConvertSelection(d.conn, id, sel, utf8, prop, xproto.TimeCurrentTime)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r, err := xproto.GetProperty(d.conn, false, id, prop, xproto.AtomAny, 0, 1<<16).Reply()
		if err == nil && r.Format == 8 {
			return string(r.Value), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", fmt.Errorf("no answer for selection %s", name)
}
