package x11

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/fastpng"
)

// pixelFormat describes how a 32-bit ZPixmap pixel of the root visual
// holds its channels.
type pixelFormat struct {
	rShift, gShift, bShift uint
	bgrx                   bool // the common little-endian 0x00RRGGBB layout
}

func (d *Display) checkPixelFormat(setup *xproto.SetupInfo) error {
	depth := d.screen.RootDepth
	bpp := 0
	for _, f := range setup.PixmapFormats {
		if f.Depth == depth {
			bpp = int(f.BitsPerPixel)
		}
	}
	if bpp != 32 {
		return fmt.Errorf("x11: unsupported root depth %d (%d bits per pixel); run the X server at depth 24", depth, bpp)
	}
	var vis *xproto.VisualInfo
	for _, dp := range d.screen.AllowedDepths {
		for i := range dp.Visuals {
			if dp.Visuals[i].VisualId == d.screen.RootVisual {
				vis = &dp.Visuals[i]
			}
		}
	}
	if vis == nil {
		return fmt.Errorf("x11: root visual %d not found", d.screen.RootVisual)
	}
	for _, m := range []uint32{vis.RedMask, vis.GreenMask, vis.BlueMask} {
		if bits.OnesCount32(m) != 8 {
			return fmt.Errorf("x11: unsupported visual masks %06x/%06x/%06x", vis.RedMask, vis.GreenMask, vis.BlueMask)
		}
	}
	pf := pixelFormat{
		rShift: uint(bits.TrailingZeros32(vis.RedMask)),
		gShift: uint(bits.TrailingZeros32(vis.GreenMask)),
		bShift: uint(bits.TrailingZeros32(vis.BlueMask)),
	}
	if setup.ImageByteOrder != xproto.ImageOrderLSBFirst {
		return fmt.Errorf("x11: unsupported MSB-first image byte order")
	}
	pf.bgrx = pf.rShift == 16 && pf.gShift == 8 && pf.bShift == 0
	d.pf = pf
	return nil
}

// cursor is the pointer image placed on the screen.
type cursor struct {
	x0, y0 int // top-left corner on screen
	w, h   int
	argb   []uint32 // premultiplied
}

// Screenshot writes the whole screen as a PNG with the cursor drawn.
//
// The screen is fetched as horizontal strips: all GetImage requests are
// sent at once and each strip is converted and compressed as soon as its
// reply arrives, so transfer, conversion and deflate overlap.
func (d *Display) Screenshot(ctx context.Context, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var curCookie xfixes.GetCursorImageCookie
	if d.hasXFixes {
		curCookie = xfixes.GetCursorImage(d.conn)
	}
	width, height := d.width, d.height
	strips := stripCount(height)
	cookies := make(map[int]xproto.GetImageCookie, strips)
	for i := 0; i < strips; i++ {
		y0, y1 := i*height/strips, (i+1)*height/strips
		cookies[y0] = xproto.GetImage(d.conn, xproto.ImageFormatZPixmap, xproto.Drawable(d.root),
			0, int16(y0), uint16(width), uint16(y1-y0), 0xffffffff)
	}
	var cur *cursor
	if d.hasXFixes {
		if r, err := curCookie.Reply(); err == nil && r.Width > 0 && r.Height > 0 {
			cur = &cursor{
				x0: int(r.X) - int(r.Xhot), y0: int(r.Y) - int(r.Yhot),
				w: int(r.Width), h: int(r.Height), argb: r.CursorImage,
			}
		}
	}
	pf := d.pf
	fill := func(y0, y1 int, dst []byte) error {
		ck, ok := cookies[y0]
		if !ok {
			return fmt.Errorf("no strip starts at row %d", y0)
		}
		r, err := ck.Reply()
		if err != nil {
			return fmt.Errorf("get image rows %d-%d: %w", y0, y1, err)
		}
		if len(r.Data) < (y1-y0)*width*4 {
			return fmt.Errorf("get image rows %d-%d: short reply (%d bytes)", y0, y1, len(r.Data))
		}
		convert(dst, r.Data, pf)
		if cur != nil {
			cur.draw(dst, width, y0, y1)
		}
		return nil
	}
	return fastpng.Encode(w, width, height, fill, fastpng.Options{Strips: strips})
}

func stripCount(height int) int {
	n := height / 64
	if n < 1 {
		n = 1
	}
	if n > 32 {
		n = 32
	}
	return n
}

// convert turns 32-bit pixels into packed RGB.
func convert(dst, src []byte, pf pixelFormat) {
	n := len(dst) / 3
	if pf.bgrx {
		for i := 0; i < n; i++ {
			s := src[i*4 : i*4+4 : i*4+4]
			d := dst[i*3 : i*3+3 : i*3+3]
			d[0], d[1], d[2] = s[2], s[1], s[0]
		}
		return
	}
	for i := 0; i < n; i++ {
		p := binary.LittleEndian.Uint32(src[i*4:])
		dst[i*3] = byte(p >> pf.rShift)
		dst[i*3+1] = byte(p >> pf.gShift)
		dst[i*3+2] = byte(p >> pf.bShift)
	}
}

// draw alpha-blends the cursor over rows [y0, y1) of an RGB strip.
func (c *cursor) draw(dst []byte, width, y0, y1 int) {
	for cy := 0; cy < c.h; cy++ {
		y := c.y0 + cy
		if y < y0 || y >= y1 {
			continue
		}
		row := dst[(y-y0)*width*3:]
		for cx := 0; cx < c.w; cx++ {
			x := c.x0 + cx
			if x < 0 || x >= width {
				continue
			}
			p := c.argb[cy*c.w+cx]
			a := p >> 24
			if a == 0 {
				continue
			}
			px := row[x*3 : x*3+3]
			inv := 255 - a
			px[0] = byte((p>>16)&0xff + (uint32(px[0])*inv+127)/255)
			px[1] = byte((p>>8)&0xff + (uint32(px[1])*inv+127)/255)
			px[2] = byte(p&0xff + (uint32(px[2])*inv+127)/255)
		}
	}
}
