package docs

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"testing"
)

func TestImageBytes(t *testing.T) {
	rgb := image.NewRGBA(image.Rect(0, 0, 3, 2))
	nrgba := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	for y := range 2 {
		for x := range 3 {
			c := color.RGBA{uint8(40 * x), uint8(90 * y), 200, 255}
			rgb.Set(x, y, c)
			nrgba.Set(x, y, color.NRGBA{c.R, c.G, c.B, 128})
		}
	}
	enc := func(img image.Image, level png.CompressionLevel) []byte {
		var b bytes.Buffer
		(&png.Encoder{CompressionLevel: level}).Encode(&b, img)
		return b.Bytes()
	}
	var g bytes.Buffer
	gif.Encode(&g, rgb, nil)
	tests := []struct {
		name      string
		a, b      []byte
		wantEqual bool
	}{
		{"same pixels, other compression", enc(rgb, png.BestSpeed), enc(rgb, png.BestCompression), true},
		{"alpha differs", enc(rgb, png.DefaultCompression), enc(nrgba, png.DefaultCompression), false},
		{"palette indices against RGB", g.Bytes(), enc(rgb, png.DefaultCompression), false},
	}
	for _, tt := range tests {
		a, errA := imageBytes(tt.a)
		b, errB := imageBytes(tt.b)
		if errA != nil || errB != nil {
			t.Fatalf("%s: imageBytes errors %v, %v", tt.name, errA, errB)
		}
		if got := bytes.Equal(a, b); got != tt.wantEqual {
			t.Errorf("%s: equal = %v, want %v", tt.name, got, tt.wantEqual)
		}
	}
	for _, bad := range [][]byte{nil, []byte("<svg/>"), []byte("\x01\x00\x09\x00EMF-ish")} {
		if _, err := imageBytes(bad); err == nil {
			t.Errorf("imageBytes(%q) succeeded, want an error as PIL raises", bad)
		}
	}
}
