package docs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
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
func metricFindDefaultFont(result, expected any, _ bool, _ map[string]any) (float64, error) {
	want, err := ruleString(expected, "font_name")
	if err != nil {
		return 0, err
	}
	p, ok := path(result)
	if !ok {
		return 0, nil
	}
	var got *string
	if data, err := boundedread.ReadFile(p, metric.MaxFile); err == nil {
		// A parse error leaves the font None, as docs.py's except does.
		if v, ok, err := docx.RegistryValue(data, "/org.openoffice.Office.Writer/DefaultFont", "Standard"); err == nil && ok {
			got = &v
		}
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
func metricCompareImageText(result, expected any, _ bool, _ map[string]any) (float64, error) {
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
	found, err := ocrFinds(p, target)
	if errors.Is(err, errNoOCR) {
		return 0, err
	}
	if err != nil {
		return 0, nil
	}
	return metric.Bool(found), nil
}

// maxOCRPixels bounds an enlarged image handed to tesseract.
const maxOCRPixels = 40 << 20

// ocrFinds reports whether tesseract reads target in the image at p, at
// its own size or enlarged.
func ocrFinds(p, target string) (bool, error) {
	bin, err := exec.LookPath(tesseractPath)
	if err != nil {
		return false, fmt.Errorf("%w: %v", errNoOCR, err)
	}
	data, err := boundedread.ReadFile(p, metric.MaxFile)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "ocr")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), ocrTimeout)
	defer cancel()
	img, ok := readXWD(data)
	if !ok {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && int64(cfg.Width)*int64(cfg.Height) <= maxPixels {
			img, _, _ = image.Decode(bytes.NewReader(data))
		}
	}
	if img == nil {
		// A format Go does not decode may still be one tesseract reads.
		text, err := tesseract(ctx, bin, tmp, data)
		return err == nil && strings.Contains(text, target), err
	}
	b := img.Bounds()
	for scale := 1; scale <= 4; scale++ {
		w, h := b.Dx()*scale, b.Dy()*scale
		if int64(w)*int64(h) > maxOCRPixels {
			break
		}
		var scaled image.Image = img
		if scale > 1 {
			g := image.NewGray(image.Rect(0, 0, w, h))
			draw.CatmullRom.Scale(g, g.Bounds(), img, b, draw.Src, nil)
			scaled = g
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, scaled); err != nil {
			return false, err
		}
		text, err := tesseract(ctx, bin, tmp, buf.Bytes())
		if err != nil {
			return false, err
		}
		if strings.Contains(text, target) {
			return true, nil
		}
	}
	return false, nil
}

// tesseract returns the text tesseract reads in an image file's bytes,
// its lines joined by single spaces.
func tesseract(ctx context.Context, bin, dir string, data []byte) (string, error) {
	in := filepath.Join(dir, "image")
	if err := os.WriteFile(in, data, 0o600); err != nil {
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

// readXWD decodes an X11 screen dump as docs.py's read_x11_image does:
// big-endian header, pixels after header_size, 32-bit pixels as BGRA and
// 24-bit ones as RGB; ok is false for anything else.
func readXWD(data []byte) (image.Image, bool) {
	if len(data) < 100 {
		return nil, false
	}
	u := func(off int) uint32 { return binary.BigEndian.Uint32(data[off:]) }
	header, version, depth, w, h := u(0), u(4), u(12), u(16), u(20)
	if version != 7 || header < 100 || uint64(header) > uint64(len(data)) {
		return nil, false
	}
	bpp := 0
	switch depth {
	case 32:
		bpp = 4
	case 24:
		bpp = 3
	default:
		return nil, false
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
