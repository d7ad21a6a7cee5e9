package docs

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// xwd encodes an image as a 32-bit X11 screen dump (BGRA pixels after a
// 100-byte big-endian header), the format docs.py converts before OCR.
func xwd(img image.Image) []byte {
	b := img.Bounds()
	var buf bytes.Buffer
	hdr := make([]uint32, 25)
	hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5] = 100, 7, 2, 32, uint32(b.Dx()), uint32(b.Dy())
	binary.Write(&buf, binary.BigEndian, hdr)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			buf.Write([]byte{byte(bl >> 8), byte(g >> 8), byte(r >> 8), 0})
		}
	}
	return buf.Bytes()
}

func TestCompareImageText(t *testing.T) {
	dir := fixtures(t)
	needProgram(t, "tesseract")
	f, err := os.Open(filepath.Join(dir, "ocr.png"))
	if err != nil {
		t.Fatalf("LibreOffice wrote no ocr.png: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ocr.xwd"), xwd(img), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "garbage.png"), []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	runMetricCases(t, dir, []metricCase{
		{"command read", "compare_image_text", "@ocr.png", text("ls"), nil, 1, false},
		{"words joined by spaces", "compare_image_text", "@ocr.png", text("ls -la"), nil, 1, false},
		{"absent text", "compare_image_text", "@ocr.png", text("zebra"), nil, 0, false},
		{"x11 screen dump", "compare_image_text", "@ocr.xwd", text("ls"), nil, 1, false},
		{"unsupported rule type", "compare_image_text", "@ocr.png", map[string]any{"type": "regex", "text": "ls"}, nil, 0, false},
		{"not an image", "compare_image_text", "@garbage.png", text("ls"), nil, 0, false},
		{"missing", "compare_image_text", "@absent.png", text("ls"), nil, 0, false},
		{"no result", "compare_image_text", nil, text("ls"), nil, 0, false},
		{"terminal listing", "compare_image_text", "@ocrterm.png", text("Documents Downloads"), nil, 1, false},
	})
	// The published task accepts "ls" or "1s" (conj "or"), since OCR
	// confuses the two in a terminal's font.
	best := 0.0
	for _, s := range []string{"ls", "1s"} {
		got, err := metricCompareImageText(context.Background(), filepath.Join(dir, "ocrterm.png"), text(s), true, nil)
		if err != nil {
			t.Fatalf("compare_image_text(ocrterm.png, %q): %v", s, err)
		}
		best = max(best, got)
	}
	if best != 1 {
		t.Errorf("compare_image_text found neither ls nor 1s in the terminal screenshot")
	}
}

func TestCompareImageTextWithoutOCR(t *testing.T) {
	old := tesseractPath
	tesseractPath = "no-such-ocr-program"
	defer func() { tesseractPath = old }()
	p := filepath.Join(t.TempDir(), "x.png")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := metricCompareImageText(context.Background(), p, map[string]any{"type": "text", "text": "ls"}, true, nil); err == nil {
		t.Error("compare_image_text without an OCR program returned no error")
	}
}
