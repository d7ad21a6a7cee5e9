package docs

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// seeTesseract points tesseractPath at a wrapper that keeps a copy of
// every image it is handed, then runs the real tesseract on it, and
// returns a func listing the copies' sizes in pixels.
func seeTesseract(t *testing.T) func() []image.Point {
	t.Helper()
	bin := needProgram(t, "tesseract")
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "tesseract")
	script := "#!/bin/sh\ncp \"$1\" \"" + dir + "/seen-$$\"\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	old := tesseractPath
	tesseractPath = wrapper
	t.Cleanup(func() { tesseractPath = old })
	return func() []image.Point {
		seen, _ := filepath.Glob(filepath.Join(dir, "seen-*"))
		var out []image.Point
		for _, p := range seen {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _, err := image.DecodeConfig(f)
			f.Close()
			if err != nil {
				t.Fatalf("tesseract was handed %s, which is no image Go reads: %v", p, err)
			}
			out = append(out, image.Pt(cfg.Width, cfg.Height))
		}
		return out
	}
}

// textPNG writes a black w×h PNG with white text in basicfont's 7×13 glyphs,
// each pixel drawn as a scale×scale block, and returns its path.
func textPNG(t *testing.T, w, h int, text string, scale int) string {
	t.Helper()
	// White on black: a new image is black already, and filling 81
	// megapixels white takes seconds under -race.
	small := image.NewGray(image.Rect(0, 0, 7*len(text)+4, 17))
	d := font.Drawer{Dst: small, Src: image.NewUniform(color.Gray{255}), Face: basicfont.Face7x13, Dot: fixed.P(2, 13)}
	d.DrawString(text)
	img := image.NewGray(image.Rect(0, 0, w, h))
	b := small.Bounds()
	for y := 0; y < b.Dy()*scale && 100+y < h; y++ {
		for x := 0; x < b.Dx()*scale && 100+x < w; x++ {
			img.Pix[(100+y)*img.Stride+100+x] = small.Pix[(y/scale)*small.Stride+x/scale]
		}
	}
	p := filepath.Join(t.TempDir(), "text.png")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOCRRefusesOversizedImages: an image past the decoding bound (a
// 9000×9000 PNG is 94 KB on disk and 81 megapixels, 330 MB in tesseract,
// and 400 megapixels took it 17 s and 1.5 GB) is refused from its header,
// with the reason, and tesseract never sees it.
func TestOCRRefusesOversizedImages(t *testing.T) {
	seen := seeTesseract(t)
	p := textPNG(t, 9000, 9000, "rollout", 8)
	start := time.Now()
	got, err := metricCompareImageText(context.Background(), p, map[string]any{"type": "text", "text": "rollout"}, true, nil)
	if err == nil || !strings.Contains(err.Error(), "9000x9000") {
		t.Errorf("compare_image_text(9000x9000) = %v, %v; want an error naming the size", got, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if s := seen(); len(s) > 0 {
		t.Errorf("tesseract was handed images of %v", s)
	}
}

// TestOCRDownscalesLargeImages: an image Go decodes but larger than what
// tesseract is given (maxOCRPixels) is read scaled down to that bound,
// not passed over (it scored 0 whatever it showed). The bound is lowered
// to keep the test quick: at 40 megapixels it takes 9 s, 80 s under -race.
func TestOCRDownscalesLargeImages(t *testing.T) {
	old := maxOCRPixels
	maxOCRPixels = 4 << 20
	t.Cleanup(func() { maxOCRPixels = old })
	seen := seeTesseract(t)
	p := textPNG(t, 3000, 2000, "rollout mesh", 8)
	got, err := metricCompareImageText(context.Background(), p, map[string]any{"type": "text", "text": "rollout mesh"}, true, nil)
	if err != nil || got != 1 {
		t.Errorf("compare_image_text(8000x6000 with the text) = %v, %v; want 1", got, err)
	}
	s := seen()
	if len(s) == 0 {
		t.Fatal("tesseract never saw the image")
	}
	for _, sz := range s {
		if int64(sz.X)*int64(sz.Y) > maxOCRPixels {
			t.Errorf("tesseract was handed %dx%d, over %d pixels", sz.X, sz.Y, maxOCRPixels)
		}
	}
}
