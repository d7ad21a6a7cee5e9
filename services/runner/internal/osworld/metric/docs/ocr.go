package docs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/image/draw"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/docs/docx"
)

// Bounds of one OCR run.
const (
	ocrTimeout   = 2 * time.Minute
	maxOCROutput = 1 << 20
)

// tesseractPath is the OCR program; a variable so that a test can point it
// at a missing one.
var tesseractPath = "tesseract"

// errNoOCR marks a machine without the OCR program: the metric cannot be
// judged at all there.
var errNoOCR = errors.New("tesseract not installed")

// metricFindDefaultFont reads LibreOffice's registry, as
// find_default_font does: Writer's default font (the Standard prop of
// /org.openoffice.Office.Writer/DefaultFont) from registrymodifications.xcu
// and compares it with rules["font_name"].
func metricFindDefaultFont(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	want, err := ruleString(expected, "font_name")
	if err != nil {
		return 0, err
	}
	p, ok := path(result)
	if !ok {
		return 0, nil
	}
	var got *string
	data, err := boundedread.ReadFile(p, metric.MaxFile)
	if err == nil {
		// A parse error leaves the font None, as docs.py's except does;
		// a registry over the parser's caps is not judged.
		var v string
		if v, ok, err = docx.RegistryValue(data, "/org.openoffice.Office.Writer/DefaultFont", "Standard"); err == nil && ok {
			got = &v
		}
	}
	if err := metric.Because(ctx, err); err != nil {
		return 0, err
	}
	return metric.Bool((got == nil && want == nil) || (got != nil && want != nil && *got == *want)), nil
}

// metricCompareImageText OCRs an image and looks for rules["text"] in the
// recognised text. OSWorld uses easyocr and joins its detections with
// spaces; here Debian's tesseract reads the image and its lines are joined
// the same way. Tesseract misses the small text of a terminal screenshot
// that easyocr reads, so the image is also read enlarged two, three and
// four times, until one reading contains the text: the reading closest to
// easyocr's is the one that finds it. An X11 screen dump (xwd) is
// converted first, as docs.py does.
//
// An image that does not open scores 0, as docs.py's try does; one too
// large to read, or an OCR program that fails, is an error: the image was
// not judged.
func metricCompareImageText(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	p, ok := path(result)
	if !ok {
		return 0, nil
	}
	if _, err := os.Stat(p); err != nil {
		return 0, nil
	}
	rule, _ := expected.(map[string]any)
	typ, _ := rule["type"].(string)
	target, isStr := rule["text"].(string)
	if typ != "text" || !isStr {
		// docs.py raises inside its try and returns 0.
		return 0, nil
	}
	found, err := ocrFinds(ctx, p, target)
	if err != nil {
		return 0, err
	}
	return metric.Bool(found), nil
}

// maxOCRPixels bounds an image handed to tesseract, enlarged or not: a
// larger one is scaled down to it. Tesseract's time grows with the pixels
// and more with the text on them: a blank page of 40 megapixels takes it
// about 2 s, 4 megapixels of dense glyphs 12 s. A variable so that a test
// can lower it.
var maxOCRPixels int64 = 40 << 20

// errUnreadable marks an image that does not open, which docs.py scores
// 0.
var errUnreadable = errors.New("not an image that opens")

// ocrFinds reports whether tesseract reads target in the image at p, at
// its own size or enlarged. Only images decoded here, within maxPixels,
// and re-encoded within maxOCRPixels reach tesseract: handed a file as it
// is, tesseract decodes whatever canvas its header declares (a 430 KB PNG
// of 400 megapixels took it 17 s and 1.5 GB).
func ocrFinds(ctx context.Context, p, target string) (bool, error) {
	bin, err := exec.LookPath(tesseractPath)
	if err != nil {
		return false, fmt.Errorf("%w: %v", errNoOCR, err)
	}
	data, err := boundedread.ReadFile(p, metric.MaxFile)
	if oc := metric.OverCap(err); oc != nil {
		return false, fmt.Errorf("read the image: %w", oc)
	}
	if err != nil {
		return false, fmt.Errorf("read the image: %w", err)
	}
	img, err := decodeForOCR(data)
	if errors.Is(err, errUnreadable) {
		metric.Notef(ctx, "%s: %v", filepath.Base(p), err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "ocr")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, ocrTimeout)
	defer cancel()
	b := img.Bounds()
	if px := int64(b.Dx()) * int64(b.Dy()); px > maxOCRPixels {
		f := math.Sqrt(float64(maxOCRPixels) / float64(px))
		w, h := max(1, int(float64(b.Dx())*f)), max(1, int(float64(b.Dy())*f))
		text, err := tesseract(ctx, bin, tmp, scaled(img, w, h))
		return err == nil && strings.Contains(text, target), err
	}
	for scale := 1; scale <= 4; scale++ {
		w, h := b.Dx()*scale, b.Dy()*scale
		if int64(w)*int64(h) > maxOCRPixels {
			break
		}
		var in image.Image = img
		if scale > 1 {
			in = scaled(img, w, h)
		}
		text, err := tesseract(ctx, bin, tmp, in)
		if err != nil {
			return false, err
		}
		if strings.Contains(text, target) {
			return true, nil
		}
	}
	return false, nil
}

// decodeForOCR decodes an X11 screen dump or an image Go reads, checking
// its size from the header first: over maxPixels is an error naming it,
// and an image that does not open is errUnreadable.
func decodeForOCR(data []byte) (img image.Image, err error) {
	w, h, isXWD := xwdSize(data)
	if !isXWD {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnreadable, err)
		}
		w, h = int64(cfg.Width), int64(cfg.Height)
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("%w: an image of %dx%d pixels", errUnreadable, w, h)
	}
	if w > maxPixels || h > maxPixels || w*h > maxPixels {
		return nil, fmt.Errorf("image of %dx%d pixels is over OCR's bound of %d pixels: %w", w, h, int64(maxPixels), metric.ErrOverCap)
	}
	if isXWD {
		if img, ok := readXWD(data); ok {
			return img, nil
		}
		return nil, fmt.Errorf("%w: a truncated X11 screen dump", errUnreadable)
	}
	// Third-party decoders have panicked on crafted input before: a
	// corrupt file must score 0, not take the runner down.
	defer func() {
		if r := recover(); r != nil {
			img, err = nil, fmt.Errorf("%w: decoder panicked: %v", errUnreadable, r)
		}
	}()
	img, _, err = image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	return img, nil
}

// scaled is img resampled to w×h in grey.
func scaled(img image.Image, w, h int) image.Image {
	g := image.NewGray(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(g, g.Bounds(), img, img.Bounds(), draw.Src, nil)
	return g
}

// tesseract returns the text tesseract reads in img, its lines joined by
// single spaces.
func tesseract(ctx context.Context, bin, dir string, img image.Image) (string, error) {
	var buf bytes.Buffer
	// Compression buys nothing for a file read once, next to it.
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		return "", err
	}
	in := filepath.Join(dir, "image.png")
	if err := os.WriteFile(in, buf.Bytes(), 0o600); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, in, "stdout")
	var out, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &out, max: maxOCROutput}
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tesseract: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " "), nil
}

// limitedBuffer keeps the first max bytes written and drops the rest, so
// that a runaway program cannot fill memory.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// xwdSize reads an X11 screen dump's size from its header; ok is false
// when data is not one docs.py's read_x11_image reads.
func xwdSize(data []byte) (w, h int64, ok bool) {
	if len(data) < 100 {
		return 0, 0, false
	}
	u := func(off int) uint32 { return binary.BigEndian.Uint32(data[off:]) }
	header, version, depth := u(0), u(4), u(12)
	if version != 7 || header < 100 || uint64(header) > uint64(len(data)) || depth != 32 && depth != 24 {
		return 0, 0, false
	}
	return int64(u(16)), int64(u(20)), true
}

// readXWD decodes an X11 screen dump as docs.py's read_x11_image does:
// big-endian header, pixels after header_size, 32-bit pixels as BGRA and
// 24-bit ones as RGB; ok is false for anything else.
func readXWD(data []byte) (image.Image, bool) {
	if _, _, ok := xwdSize(data); !ok {
		return nil, false
	}
	u := func(off int) uint32 { return binary.BigEndian.Uint32(data[off:]) }
	header, depth, w, h := u(0), u(12), u(16), u(20)
	bpp := 3
	if depth == 32 {
		bpp = 4
	}
	if w == 0 || h == 0 || uint64(w)*uint64(h) > maxPixels {
		return nil, false
	}
	pix := data[header:]
	if uint64(len(pix)) < uint64(w)*uint64(h)*uint64(bpp) {
		return nil, false
	}
	img := image.NewNRGBA(image.Rect(0, 0, int(w), int(h)))
	for i := 0; i < int(w)*int(h); i++ {
		s := pix[i*bpp:]
		d := img.Pix[i*4:]
		if bpp == 4 {
			d[0], d[1], d[2] = s[2], s[1], s[0]
		} else {
			d[0], d[1], d[2] = s[0], s[1], s[2]
		}
		d[3] = 255
	}
	return img, true
}
