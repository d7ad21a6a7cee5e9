package x11

import (
	"context"
	"fmt"
	"image"

	"github.com/jezek/xgb/xproto"
)

// SetBackground stretches img over the screen and makes it the root
// window's background, which is what a wallpaper is on a desktop without
// a desktop shell.
func (d *Display) SetBackground(ctx context.Context, img image.Image) error {
	w, h := d.width, d.height
	pm, err := xproto.NewPixmapId(d.conn)
	if err != nil {
		return fmt.Errorf("new pixmap id: %w", err)
	}
	if err := xproto.CreatePixmapChecked(d.conn, d.screen.RootDepth, pm, xproto.Drawable(d.root), uint16(w), uint16(h)).Check(); err != nil {
		return fmt.Errorf("create pixmap: %w", err)
	}
	defer xproto.FreePixmap(d.conn, pm)
	gc, err := xproto.NewGcontextId(d.conn)
	if err != nil {
		return fmt.Errorf("new gc id: %w", err)
	}
	if err := xproto.CreateGCChecked(d.conn, gc, xproto.Drawable(pm), 0, nil).Check(); err != nil {
		return fmt.Errorf("create gc: %w", err)
	}
	defer xproto.FreeGC(d.conn, gc)

	b := img.Bounds()
	// One PutImage must fit the maximum request length (in 4-byte units),
	// less its 24-byte header.
	maxBytes := int(xproto.Setup(d.conn).MaximumRequestLength)*4 - 64
	rows := maxBytes / (w * 4)
	if rows < 1 {
		return fmt.Errorf("screen too wide for one PutImage row")
	}
	buf := make([]byte, rows*w*4)
	for y0 := 0; y0 < h; y0 += rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(rows, h-y0)
		for y := 0; y < n; y++ {
			sy := b.Min.Y + (y0+y)*b.Dy()/h
			for x := 0; x < w; x++ {
				sx := b.Min.X + x*b.Dx()/w
				r, g, bl, _ := img.At(sx, sy).RGBA()
				p := uint32(r>>8)<<d.pf.rShift | uint32(g>>8)<<d.pf.gShift | uint32(bl>>8)<<d.pf.bShift
				i := (y*w + x) * 4
				buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(p), byte(p>>8), byte(p>>16), byte(p>>24)
			}
		}
		xproto.PutImage(d.conn, xproto.ImageFormatZPixmap, xproto.Drawable(pm), gc,
			uint16(w), uint16(n), 0, int16(y0), 0, d.screen.RootDepth, buf[:n*w*4])
	}
	if err := xproto.ChangeWindowAttributesChecked(d.conn, d.root, xproto.CwBackPixmap, []uint32{uint32(pm)}).Check(); err != nil {
		return fmt.Errorf("set root background: %w", err)
	}
	xproto.ClearArea(d.conn, false, d.root, 0, 0, 0, 0)
	return d.sync(ctx)
}
