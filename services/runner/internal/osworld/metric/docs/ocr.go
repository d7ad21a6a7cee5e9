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
// the same way, so a substring test over the words agrees wherever both
// engines read the same characters (both may read "ls" as "1s", which the
// published task accepts too). An X11 screen dump (xwd) is converted
// first, as docs.py does.
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
	text, err := ocr(p)
	if errors.Is(err, errNoOCR) {
		return 0, err
	}
	if err != nil {
		return 0, nil
	}
	return metric.Bool(strings.Contains(text, target)), nil
}

// ocr returns the text tesseract reads in the image at p, its lines
// joined by single spaces.
func ocr(p string) (string, error) {
	bin, err := exec.LookPath(tesseractPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoOCR, err)
	}
	data, err := boundedread.ReadFile(p, metric.MaxFile)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "ocr")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	in := filepath.Join(tmp, "image")
	if img, ok := readXWD(data); ok {
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return "", err
		}
		data = buf.Bytes()
	}
	if err := os.WriteFile(in, data, 0o600); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ocrTimeout)
	defer cancel()
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
