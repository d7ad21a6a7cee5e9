package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
)

// screenshot is one PNG split before its IEND chunk, so that each answer
// can carry its own tEXt chunk (which guest, which frame) and still be a
// valid PNG.
type screenshot struct {
	head []byte // signature and every chunk before IEND
}

var iend = []byte{0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82}

// newScreenshot draws a w×h busy desktop from seed: a gradient wallpaper,
// a top bar, a dock of icons and several windows full of text-like glyph
// runs, so that it compresses about as a real one does (a few hundred KB at
// 1280×720, where an empty desktop would be a few KB).
func newScreenshot(w, h int, seed uint64) (*screenshot, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(40 + 60*y/h), uint8(60 + 40*x/w), uint8(110 + 60*(x+y)/(w+h)), 255})
		}
	}
	fill(img, image.Rect(0, 0, w, 28), color.NRGBA{30, 30, 30, 255})
	glyphs := makeGlyphs(rng)
	text(img, rng, glyphs, image.Rect(8, 8, w/3, 24), color.NRGBA{230, 230, 230, 255})
	text(img, rng, glyphs, image.Rect(w-220, 8, w-8, 24), color.NRGBA{230, 230, 230, 255})
	// Dock of icons down the left edge.
	fill(img, image.Rect(0, 28, 64, h), color.NRGBA{20, 20, 24, 230})
	for y := 40; y+48 < h; y += 60 {
		c := color.NRGBA{uint8(rng.IntN(200) + 40), uint8(rng.IntN(200) + 40), uint8(rng.IntN(200) + 40), 255}
		fill(img, image.Rect(8, y, 56, y+48), c)
		noise(img, rng, image.Rect(14, y+6, 50, y+42), c)
	}
	// Overlapping windows: title bar, menu, a body of text lines, a
	// photo-like panel in some.
	for i := 0; i < 6; i++ {
		x0, y0 := 80+rng.IntN(w/2), 40+rng.IntN(h/3)
		x1, y1 := min(w-4, x0+300+rng.IntN(w/2)), min(h-4, y0+200+rng.IntN(h/2))
		r := image.Rect(x0, y0, x1, y1)
		fill(img, r, color.NRGBA{250, 250, 248, 255})
		fill(img, image.Rect(x0, y0, x1, y0+26), color.NRGBA{60, 60, 70, 255})
		text(img, rng, glyphs, image.Rect(x0+10, y0+8, x0+(x1-x0)/2, y0+20), color.NRGBA{240, 240, 240, 255})
		fill(img, image.Rect(x0, y0+26, x1, y0+46), color.NRGBA{235, 235, 235, 255})
		text(img, rng, glyphs, image.Rect(x0+8, y0+31, x1-8, y0+43), color.NRGBA{40, 40, 40, 255})
		body := image.Rect(x0+10, y0+54, x1-10, y1-8)
		if i%3 == 2 {
			split := body.Min.X + body.Dx()/2
			noise(img, rng, image.Rect(split+6, body.Min.Y, body.Max.X, body.Max.Y), color.NRGBA{120, 140, 90, 255})
			body.Max.X = split
		}
		for y := body.Min.Y; y+12 <= body.Max.Y; y += 16 {
			ink := color.NRGBA{20, 20, 20, 255}
			if rng.IntN(8) == 0 {
				ink = color.NRGBA{20, 60, 170, 255}
			}
			text(img, rng, glyphs, image.Rect(body.Min.X, y, body.Min.X+rng.IntN(max(1, body.Dx())), y+12), ink)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode screenshot: %w", err)
	}
	b := buf.Bytes()
	if !bytes.HasSuffix(b, iend) {
		return nil, fmt.Errorf("encode screenshot: PNG does not end in IEND")
	}
	return &screenshot{head: b[:len(b)-len(iend)]}, nil
}

// tail is what follows head in the answer for frame n of guest id: a
// tEXt chunk naming both, then IEND. head is sent as it is (never copied),
// so an answer costs the guest a few dozen bytes of its own.
func (s *screenshot) tail(id int, n uint64) []byte {
	data := fmt.Appendf([]byte("frame\x00"), "%d/%d", id, n)
	out := make([]byte, 0, 12+len(data)+len(iend))
	out = binary.BigEndian.AppendUint32(out, uint32(len(data)))
	out = append(out, "tEXt"...)
	out = append(out, data...)
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[4:]))
	return append(out, iend...)
}

// frame returns the whole PNG of frame n of guest id.
func (s *screenshot) frame(id int, n uint64) []byte {
	return append(append([]byte(nil), s.head...), s.tail(id, n)...)
}

// glyph is a 6×10 bitmap, a stand-in for an anti-aliased letter.
type glyph [10][6]uint8

func makeGlyphs(rng *rand.Rand) []glyph {
	gs := make([]glyph, 80)
	for i := range gs {
		for y := 1; y < 10; y++ {
			for x := 0; x < 5; x++ {
				if rng.IntN(100) < 38 {
					gs[i][y][x] = 255
				} else if rng.IntN(100) < 15 {
					gs[i][y][x] = 110 // anti-aliasing grey
				}
			}
		}
	}
	return gs
}

// text draws words of glyphs along r's first row band.
func text(img *image.NRGBA, rng *rand.Rand, gs []glyph, r image.Rectangle, ink color.NRGBA) {
	x := r.Min.X
	for x+6 <= r.Max.X {
		word := 2 + rng.IntN(8)
		for k := 0; k < word && x+6 <= r.Max.X; k++ {
			g := &gs[rng.IntN(len(gs))]
			for gy := 0; gy < 10 && r.Min.Y+gy < r.Max.Y; gy++ {
				for gx := 0; gx < 6; gx++ {
					if a := g[gy][gx]; a > 0 {
						blend(img, x+gx, r.Min.Y+gy, ink, a)
					}
				}
			}
			x += 7
		}
		x += 5
	}
}

func blend(img *image.NRGBA, x, y int, c color.NRGBA, a uint8) {
	if !(image.Point{x, y}.In(img.Rect)) {
		return
	}
	o := img.NRGBAAt(x, y)
	mix := func(p, q uint8) uint8 { return uint8((int(p)*int(255-a) + int(q)*int(a)) / 255) }
	img.SetNRGBA(x, y, color.NRGBA{mix(o.R, c.R), mix(o.G, c.G), mix(o.B, c.B), 255})
}

func fill(img *image.NRGBA, r image.Rectangle, c color.NRGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetNRGBA(x, y, c)
		}
	}
}

// noise paints a photo-like patch: base colour with smooth bands and
// per-pixel jitter, which PNG compresses poorly, as it does photos.
func noise(img *image.NRGBA, rng *rand.Rand, r image.Rectangle, base color.NRGBA) {
	r = r.Intersect(img.Rect)
	j := func(v uint8, d int) uint8 { return uint8(max(0, min(255, int(v)+d))) }
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			d := (x*3+y*5)%40 - 20 + rng.IntN(24) - 12
			img.SetNRGBA(x, y, color.NRGBA{j(base.R, d), j(base.G, d/2), j(base.B, -d), 255})
		}
	}
}
