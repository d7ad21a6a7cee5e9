package media

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// maxPixels bounds a decoded image. PIL refuses images past
// pilBombPixels; the SSIM and resampling here hold several float planes
// per pixel, so the cap is lower, and an image between the two is not
// scored (metric.ErrOverCap): PIL would read it.
const maxPixels = 40 << 20

// pilBombPixels is where PIL's Image.open raises DecompressionBombError
// (twice Image.MAX_IMAGE_PIXELS, about 179 megapixels): an image past it
// fails in OSWorld too, and scores 0 like a corrupt one.
const pilBombPixels = 2 * (1 << 30 / 4 / 3)

// pimg is an image as PIL holds it after Image.open: a mode naming the
// bands, 8-bit samples interleaved row by row, and for mode P the palette.
// The metrics convert and compare these bytes exactly as PIL does, because
// OSWorld's thresholds were tuned on PIL's numbers.
type pimg struct {
	mode string // "1", "L", "LA", "P", "RGB", "RGBA", "I;16" or "CMYK"
	w, h int
	pix  []uint8
	pal  []color.NRGBA
	// trans is PIL's info["transparency"] for L and RGB (the transparent
	// sample values); for P, transparency lives in the palette alpha.
	trans    []uint8
	hasTrans bool
	format   string
}

// bands is the number of samples per pixel of a PIL mode.
func bands(mode string) int {
	switch mode {
	case "LA", "La":
		return 2
	case "RGB", "HSV":
		return 3
	case "RGBA", "RGBa", "CMYK":
		return 4
	}
	return 1
}

func newImg(mode string, w, h int) *pimg {
	return &pimg{mode: mode, w: w, h: h, pix: make([]uint8, w*h*bands(mode))}
}

var errNotImage = errors.New("not a readable image")

// openImage is PIL's Image.open followed by load: a missing, corrupt,
// unsupported or (for PIL too) oversized file is an error, which the
// metrics score 0 as OSWorld's exception does. A file over one of the
// caps here that PIL would read is an error wrapping metric.ErrOverCap,
// which the metrics return: metric.OverCap tells the two apart.
func openImage(v any) (*pimg, error) {
	p, ok := v.(string)
	if !ok || p == "" {
		return nil, errNotImage
	}
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("open image %s: %w", p, err)
	}
	data, err := boundedread.ReadFile(p, metric.MaxFile)
	if oc := metric.OverCap(err); oc != nil {
		return nil, fmt.Errorf("read image: %w", oc)
	}
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", p, err)
	}
	img, err := decodeImage(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
	}
	return img, nil
}

// decodeImage decodes PNG, JPEG, GIF, BMP, TIFF and WebP into PIL's mode.
func decodeImage(data []byte) (img *pimg, err error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode image header: %w", err)
	}
	if err := checkPixels(cfg.Width, cfg.Height); err != nil {
		return nil, err
	}
	// Third-party decoders have panicked on crafted input before: a
	// corrupt file must score 0, not take the runner down.
	defer func() {
		if r := recover(); r != nil {
			img, err = nil, fmt.Errorf("decode %s image: %v", format, r)
		}
	}()
	if format == "jpeg" && (cfg.ColorModel == color.YCbCrModel || cfg.ColorModel == color.GrayModel) {
		if img, err := djpeg(data); err == nil {
			return img, nil
		}
	}
	var m image.Image
	switch format {
	case "gif":
		m, err = decodeGIFFirst(data, cfg)
	default:
		m, _, err = image.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("decode %s image: %w", format, err)
	}
	img = fromGo(m, format)
	if format == "png" {
		applyPNGMode(img, m, data)
	}
	return img, nil
}

// checkPixels refuses an image size before anything is decoded: one PIL
// refuses too (no pixels, or past pilBombPixels) is a plain error, one
// over maxPixels that PIL reads wraps metric.ErrOverCap.
func checkPixels(w, h int) error {
	px := int64(w) * int64(h)
	if w <= 0 || h <= 0 || px > pilBombPixels {
		return fmt.Errorf("image of %dx%d pixels is out of bounds", w, h)
	}
	if px > maxPixels {
		return fmt.Errorf("image of %dx%d pixels is over the cap of %d pixels: %w", w, h, maxPixels, metric.ErrOverCap)
	}
	return nil
}

func init() {
	// image.Decode finds these formats by their magic bytes.
	image.RegisterFormat("bmp", "BM", bmp.Decode, bmp.DecodeConfig)
	image.RegisterFormat("tiff", "II*\x00", tiff.Decode, tiff.DecodeConfig)
	image.RegisterFormat("tiff", "MM\x00*", tiff.Decode, tiff.DecodeConfig)
	image.RegisterFormat("webp", "RIFF????WEBPVP8", webp.Decode, webp.DecodeConfig)
	_ = png.Decode
	_ = jpeg.Decode
}

// djpeg decodes a JPEG with libjpeg-turbo's djpeg, the library PIL
// decodes with, when it is installed: Go's decoder rounds its IDCT
// differently, leaving about 1% of the samples off by one to three.
func djpeg(data []byte) (*pimg, error) {
	if _, err := exec.LookPath("djpeg"); err != nil {
		return nil, err
	}
	// The image is within maxPixels (checked before): its PPM, up to 3
	// bytes a pixel, may pass maxToolOutput, and must still be read.
	out, err := runToolInput(context.Background(), data, 3*maxPixels+64, "djpeg", "-pnm")
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(bytes.NewReader(out))
	magic, err := ppmToken(r)
	if err != nil {
		return nil, err
	}
	mode := "RGB"
	switch magic {
	case "P6":
	case "P5":
		mode = "L"
	default:
		return nil, errBadPPM
	}
	var dims [3]int
	for i := range dims {
		tok, err := ppmToken(r)
		if err != nil {
			return nil, err
		}
		if dims[i], err = strconv.Atoi(tok); err != nil {
			return nil, errBadPPM
		}
	}
	w, h := dims[0], dims[1]
	if dims[2] != 255 || w <= 0 || h <= 0 || w > maxPixels || h > maxPixels || w*h > maxPixels {
		return nil, errBadPPM
	}
	img := newImg(mode, w, h)
	if _, err := io.ReadFull(r, img.pix); err != nil {
		return nil, err
	}
	img.format = "jpeg"
	return img, nil
}

// decodeGIFFirst returns the first frame on the logical screen, as PIL
// shows a GIF (the frame may be smaller than the screen).
func decodeGIFFirst(data []byte, cfg image.Config) (image.Image, error) {
	fr, err := gif.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	p, ok := fr.(*image.Paletted)
	if !ok || p.Rect == image.Rect(0, 0, cfg.Width, cfg.Height) {
		return fr, nil
	}
	canvas := image.NewPaletted(image.Rect(0, 0, cfg.Width, cfg.Height), p.Palette)
	fill := uint8(0)
	for i, c := range p.Palette {
		if _, _, _, a := c.RGBA(); a == 0 {
			fill = uint8(i)
			break
		}
	}
	for i := range canvas.Pix {
		canvas.Pix[i] = fill
	}
	r := p.Rect.Intersect(canvas.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			canvas.SetColorIndex(x, y, p.ColorIndexAt(x, y))
		}
	}
	return canvas, nil
}

// fromGo maps a decoded Go image to PIL's mode for the same file.
func fromGo(m image.Image, format string) *pimg {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	switch t := m.(type) {
	case *image.Paletted:
		img := newImg("P", w, h)
		for y := 0; y < h; y++ {
			copy(img.pix[y*w:(y+1)*w], t.Pix[y*t.Stride:y*t.Stride+w])
		}
		for _, c := range t.Palette {
			img.pal = append(img.pal, color.NRGBAModel.Convert(c).(color.NRGBA))
		}
		for _, c := range img.pal {
			if c.A != 255 {
				img.hasTrans = true
			}
		}
		img.format = format
		return img
	case *image.Gray:
		img := newImg("L", w, h)
		for y := 0; y < h; y++ {
			copy(img.pix[y*w:(y+1)*w], t.Pix[y*t.Stride:y*t.Stride+w])
		}
		img.format = format
		return img
	case *image.Gray16:
		// PIL's I;16 converts to L and RGB by clipping at 255.
		img := newImg("I;16", w, h)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.pix[y*w+x] = uint8(min(t.Gray16At(b.Min.X+x, b.Min.Y+y).Y, 255))
			}
		}
		img.format = format
		return img
	case *image.YCbCr:
		img := newImg("RGB", w, h)
		ycbcrToRGB(t, img)
		img.format = format
		return img
	case *image.CMYK:
		img := newImg("CMYK", w, h)
		for y := 0; y < h; y++ {
			copy(img.pix[y*w*4:(y+1)*w*4], t.Pix[y*t.Stride:y*t.Stride+w*4])
		}
		img.format = format
		return img
	}
	img := newImg("RGBA", w, h)
	opaque := true
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			// Straight (non-premultiplied) samples are copied as they are:
			// PIL keeps the colour of a fully transparent pixel.
			var r, g, bl, a uint8
			switch t := m.(type) {
			case *image.NRGBA:
				c := t.NRGBAAt(x, y)
				r, g, bl, a = c.R, c.G, c.B, c.A
			case *image.NRGBA64:
				c := t.NRGBA64At(x, y)
				r, g, bl, a = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8), uint8(c.A>>8)
			default:
				c := color.NRGBA64Model.Convert(m.At(x, y)).(color.NRGBA64)
				r, g, bl, a = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8), uint8(c.A>>8)
			}
			img.pix[i], img.pix[i+1], img.pix[i+2], img.pix[i+3] = r, g, bl, a
			opaque = opaque && a == 255
			i += 4
		}
	}
	img.format = format
	if opaque && format != "png" {
		// BMP, TIFF and lossless WebP without alpha open as RGB in PIL.
		return img.dropAlpha()
	}
	return img
}

// applyPNGMode corrects the mode for PNG, where Go's decoder folds RGB and
// gray with tRNS, and RGB, into RGBA: PIL keeps the PNG's color type.
func applyPNGMode(img *pimg, m image.Image, data []byte) {
	ct, depth, trns, ok := pngHeader(data)
	if !ok {
		return
	}
	switch ct {
	case 0: // gray
		if img.mode == "RGBA" {
			// gray with tRNS: Go gives NRGBA; PIL gives L (or I;16) plus
			// info["transparency"].
			l := newImg("L", img.w, img.h)
			for i := range l.pix {
				l.pix[i] = img.pix[i*4]
			}
			if depth == 16 {
				l.mode = "I;16"
				if t, ok := m.(*image.NRGBA64); ok {
					for i := range l.pix {
						l.pix[i] = uint8(min(t.NRGBA64At(t.Rect.Min.X+i%img.w, t.Rect.Min.Y+i/img.w).R, 255))
					}
				}
			}
			*img = *l
		}
		if depth == 1 && img.mode == "L" {
			img.mode = "1"
		}
		if len(trns) >= 2 {
			v := int(binary.BigEndian.Uint16(trns))
			if depth < 8 {
				v = v * 255 / (1<<depth - 1)
			}
			img.trans, img.hasTrans = []uint8{uint8(min(v, 255))}, true
		}
	case 2: // RGB
		if img.mode == "RGBA" {
			*img = *img.dropAlpha()
		}
		if len(trns) >= 6 {
			t := make([]uint8, 3)
			for i := range 3 {
				v := binary.BigEndian.Uint16(trns[2*i:])
				if depth == 16 {
					v >>= 8
				}
				t[i] = uint8(min(v, 255))
			}
			img.trans, img.hasTrans = t, true
		}
	case 3:
		img.hasTrans = trns != nil
	case 4: // gray + alpha
		if depth == 16 {
			// PIL opens 16-bit gray+alpha as RGBA.
			break
		}
		la := newImg("LA", img.w, img.h)
		for i := 0; i < img.w*img.h; i++ {
			la.pix[2*i], la.pix[2*i+1] = img.pix[4*i], img.pix[4*i+3]
		}
		*img = *la
	}
	img.format = "png"
}

// pngHeader reads the IHDR color type and bit depth and the tRNS payload.
func pngHeader(data []byte) (colorType, depth int, trns []byte, ok bool) {
	if len(data) < 33 || string(data[12:16]) != "IHDR" {
		return 0, 0, nil, false
	}
	depth, colorType = int(data[24]), int(data[25])
	for off := 8; off+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		typ := string(data[off+4 : off+8])
		if n < 0 || off+8+n > len(data) {
			break
		}
		if typ == "tRNS" {
			trns = data[off+8 : off+8+n]
			if trns == nil {
				trns = []byte{}
			}
		}
		if typ == "IDAT" || typ == "IEND" {
			break
		}
		off += 12 + n
	}
	return colorType, depth, trns, true
}

// ycbcrToRGB converts as libjpeg does for PIL: "fancy" (triangular)
// chroma upsampling for 4:2:0, 4:2:2 and 4:4:0, then its fixed-point
// YCC->RGB tables. Go's decoder differs from libjpeg's IDCT in rare ±1
// samples, which this does not correct.
func ycbcrToRGB(m *image.YCbCr, img *pimg) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	cb := upsample(m.Cb, m.CStride, m.SubsampleRatio, w, h)
	cr := upsample(m.Cr, m.CStride, m.SubsampleRatio, w, h)
	i := 0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			yy := m.Y[y*m.YStride+x]
			img.pix[i], img.pix[i+1], img.pix[i+2] = jpegRGB(yy, cb[y*w+x], cr[y*w+x])
			i += 3
		}
	}
}

// upsample expands a chroma plane to w×h with libjpeg's jdsample.c fancy
// filters (h2v1, h1v2, h2v2); other ratios replicate samples.
func upsample(c []uint8, stride int, ratio image.YCbCrSubsampleRatio, w, h int) []uint8 {
	out := make([]uint8, w*h)
	hs, vs := 1, 1
	switch ratio {
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	case image.YCbCrSubsampleRatio422:
		hs = 2
	case image.YCbCrSubsampleRatio440:
		vs = 2
	case image.YCbCrSubsampleRatio411:
		hs = 4
	case image.YCbCrSubsampleRatio410:
		hs, vs = 4, 2
	}
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs
	at := func(x, y int) int { return int(c[y*stride+x]) }
	if hs > 2 || (hs == 1 && vs == 1) {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				out[y*w+x] = c[(y/vs)*stride+x/hs]
			}
		}
		return out
	}
	set := func(x, y, v int) {
		if x < w && y < h {
			out[y*w+x] = uint8(v)
		}
	}
	for cy := 0; cy < ch; cy++ {
		for v := 0; v < vs; v++ {
			// The nearer neighbour row: above for the upper output row,
			// below for the lower; the edge rows repeat themselves.
			ny := cy
			if vs == 2 {
				if v == 0 {
					ny = max(cy-1, 0)
				} else {
					ny = min(cy+1, ch-1)
				}
			}
			oy := cy*vs + v
			if hs == 1 {
				// h1v2: bias 1 for the upper row, 2 for the lower.
				for x := 0; x < cw; x++ {
					set(x, oy, (at(x, cy)*3+at(x, ny)+1+v)>>2)
				}
				continue
			}
			col := func(x int) int {
				if vs == 1 {
					return at(x, cy)
				}
				return at(x, cy)*3 + at(x, ny)
			}
			if vs == 1 {
				// h2v1
				if cw == 1 {
					set(0, oy, col(0))
					set(1, oy, col(0))
					continue
				}
				set(0, oy, col(0))
				set(1, oy, (col(0)*3+col(1)+2)>>2)
				for x := 1; x < cw-1; x++ {
					t := col(x) * 3
					set(2*x, oy, (t+col(x-1)+1)>>2)
					set(2*x+1, oy, (t+col(x+1)+2)>>2)
				}
				last := cw - 1
				set(2*last, oy, (col(last)*3+col(last-1)+1)>>2)
				set(2*last+1, oy, col(last))
				continue
			}
			// h2v2
			if cw == 1 {
				set(0, oy, (col(0)*4+8)>>4)
				set(1, oy, (col(0)*4+7)>>4)
				continue
			}
			set(0, oy, (col(0)*4+8)>>4)
			set(1, oy, (col(0)*3+col(1)+7)>>4)
			for x := 1; x < cw-1; x++ {
				t := col(x) * 3
				set(2*x, oy, (t+col(x-1)+8)>>4)
				set(2*x+1, oy, (t+col(x+1)+7)>>4)
			}
			last := cw - 1
			set(2*last, oy, (col(last)*3+col(last-1)+8)>>4)
			set(2*last+1, oy, (col(last)*4+7)>>4)
		}
	}
	return out
}

// jpegRGB is libjpeg's jdcolor.c YCC->RGB with 16 fraction bits.
func jpegRGB(yy, cb, cr uint8) (uint8, uint8, uint8) {
	const half = 1 << 15
	fix := func(x float64) int { return int(x*65536 + 0.5) }
	c1, c2 := int(cb)-128, int(cr)-128
	r := int(yy) + ((fix(1.40200)*c2 + half) >> 16)
	g := int(yy) + ((-fix(0.34414)*c1 - fix(0.71414)*c2 + half) >> 16)
	b := int(yy) + ((fix(1.77200)*c1 + half) >> 16)
	return clip8(r), clip8(g), clip8(b)
}

func clip8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

func (img *pimg) dropAlpha() *pimg {
	out := newImg("RGB", img.w, img.h)
	for i := 0; i < img.w*img.h; i++ {
		copy(out.pix[3*i:3*i+3], img.pix[4*i:4*i+3])
	}
	out.format = img.format
	return out
}

func (img *pimg) clone() *pimg {
	c := *img
	c.pix = append([]uint8(nil), img.pix...)
	return &c
}

// convert is PIL's Image.convert for the modes OSWorld's metrics ask for.
func (img *pimg) convert(mode string) (*pimg, error) {
	if img.mode == mode {
		return img.clone(), nil
	}
	n := img.w * img.h
	out := newImg(mode, img.w, img.h)
	out.format = img.format
	// rgba gives each source pixel as PIL's RGBA conversion would.
	rgba := func(i int) (r, g, b, a uint8) {
		switch img.mode {
		case "1", "L", "I;16":
			v := img.pix[i]
			a = 255
			if img.hasTrans && img.mode == "L" && len(img.trans) == 1 && v == img.trans[0] {
				a = 0
			}
			return v, v, v, a
		case "LA":
			v := img.pix[2*i]
			return v, v, v, img.pix[2*i+1]
		case "P":
			idx := int(img.pix[i])
			if idx < len(img.pal) {
				c := img.pal[idx]
				return c.R, c.G, c.B, c.A
			}
			return 0, 0, 0, 255
		case "RGB":
			p := img.pix[3*i : 3*i+3]
			a = 255
			if img.hasTrans && len(img.trans) == 3 && p[0] == img.trans[0] && p[1] == img.trans[1] && p[2] == img.trans[2] {
				a = 0
			}
			return p[0], p[1], p[2], a
		case "RGBA":
			p := img.pix[4*i : 4*i+4]
			return p[0], p[1], p[2], p[3]
		case "CMYK":
			p := img.pix[4*i : 4*i+4]
			c := color.CMYK{C: p[0], M: p[1], Y: p[2], K: p[3]}
			r, g, b := color.CMYKToRGB(c.C, c.M, c.Y, c.K)
			return r, g, b, 255
		}
		return 0, 0, 0, 255
	}
	switch mode {
	case "L":
		if img.mode == "RGB" {
			// The common case (every video frame), without a call per
			// pixel; a transparent colour changes only alpha, which L drops.
			src, dst := img.pix[:3*n], out.pix[:n]
			for i := range dst {
				dst[i] = luma(src[3*i], src[3*i+1], src[3*i+2])
			}
			break
		}
		for i := range n {
			if img.mode == "LA" {
				out.pix[i] = img.pix[2*i]
				continue
			}
			r, g, b, _ := rgba(i)
			out.pix[i] = luma(r, g, b)
		}
	case "RGB":
		for i := range n {
			r, g, b, _ := rgba(i)
			out.pix[3*i], out.pix[3*i+1], out.pix[3*i+2] = r, g, b
		}
	case "RGBA":
		for i := range n {
			r, g, b, a := rgba(i)
			out.pix[4*i], out.pix[4*i+1], out.pix[4*i+2], out.pix[4*i+3] = r, g, b, a
		}
	case "LA":
		for i := range n {
			r, g, b, a := rgba(i)
			if img.mode == "RGB" {
				a = 255
			}
			out.pix[2*i], out.pix[2*i+1] = luma(r, g, b), a
		}
	case "HSV":
		for i := range n {
			r, g, b, _ := rgba(i)
			out.pix[3*i], out.pix[3*i+1], out.pix[3*i+2] = rgbToHSV(r, g, b)
		}
	default:
		return nil, fmt.Errorf("conversion from %s to %s is not supported", img.mode, mode)
	}
	return out, nil
}

// luma is PIL's ITU-R 601-2 L = R*299/1000 + G*587/1000 + B*114/1000 in
// 16-bit fixed point with rounding.
func luma(r, g, b uint8) uint8 {
	return uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
}

// rgbToHSV is PIL's rgb2hsv (colorsys in single precision, scaled to 255
// and truncated).
func rgbToHSV(r, g, b uint8) (uint8, uint8, uint8) {
	maxc := max(r, g, b)
	minc := min(r, g, b)
	if maxc == minc {
		return 0, 0, maxc
	}
	cr := float32(maxc - minc)
	s := cr / float32(maxc)
	rc := float32(maxc-r) / cr
	gc := float32(maxc-g) / cr
	bc := float32(maxc-b) / cr
	var h float32
	switch {
	case r == maxc:
		h = bc - gc
	case g == maxc:
		// C evaluates 2.0 + rc - bc in double, then stores a float.
		h = float32(2.0 + float64(rc) - float64(bc))
	default:
		h = float32(4.0 + float64(gc) - float64(rc))
	}
	hd := float64(h)/6.0 + 1.0
	hd -= float64(int(hd))
	h = float32(hd)
	return clip8(int(float64(h) * 255.0)), clip8(int(float64(s) * 255.0)), maxc
}

// band returns band k of a multi-band image as an L image (PIL's split).
func (img *pimg) band(k int) *pimg {
	nb := bands(img.mode)
	out := newImg("L", img.w, img.h)
	for i := range out.pix {
		out.pix[i] = img.pix[i*nb+k]
	}
	return out
}

// bbox is PIL's getbbox: the box of pixels with a nonzero sample (only the
// alpha band for RGBA and LA), ok false when there is none.
func (img *pimg) bbox() (x0, y0, x1, y1 int, ok bool) {
	nb := bands(img.mode)
	first, last := 0, nb
	switch img.mode {
	case "RGBA", "LA", "RGBa", "La":
		first = nb - 1
	}
	x0, y0, x1, y1 = img.w, img.h, -1, -1
	for y := 0; y < img.h; y++ {
		for x := 0; x < img.w; x++ {
			p := img.pix[(y*img.w+x)*nb:]
			for k := first; k < last; k++ {
				if p[k] != 0 {
					x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
					break
				}
			}
		}
	}
	if x1 < 0 {
		return 0, 0, 0, 0, false
	}
	return x0, y0, x1 + 1, y1 + 1, true
}

// crop is PIL's crop to [x0,x1)×[y0,y1) inside the image.
func (img *pimg) crop(x0, y0, x1, y1 int) *pimg {
	nb := bands(img.mode)
	out := *img
	out.w, out.h = x1-x0, y1-y0
	out.pix = make([]uint8, out.w*out.h*nb)
	for y := y0; y < y1; y++ {
		copy(out.pix[(y-y0)*out.w*nb:], img.pix[(y*img.w+x0)*nb:(y*img.w+x1)*nb])
	}
	return &out
}

// flipLR is PIL's transpose(FLIP_LEFT_RIGHT).
func (img *pimg) flipLR() *pimg {
	nb := bands(img.mode)
	out := img.clone()
	for y := 0; y < img.h; y++ {
		for x := 0; x < img.w; x++ {
			copy(out.pix[(y*img.w+img.w-1-x)*nb:(y*img.w+img.w-x)*nb], img.pix[(y*img.w+x)*nb:(y*img.w+x+1)*nb])
		}
	}
	return out
}

// mean is ImageStat.Stat(img).mean[0] for a one-band image.
func (img *pimg) mean() float64 {
	var s uint64
	for _, v := range img.pix {
		s += uint64(v)
	}
	return float64(s) / float64(len(img.pix))
}
