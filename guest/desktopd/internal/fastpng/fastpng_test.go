package fastpng

import (
	"bytes"
	"hash/adler32"
	"image/png"
	"math/rand/v2"
	"testing"
)

func TestEncodeRoundTrip(t *testing.T) {
	tests := []struct {
		name         string
		w, h, strips int
		random       bool
	}{
		{"one pixel", 1, 1, 0, false},
		{"one row many strips", 17, 1, 8, true},
		{"tall thin", 3, 101, 7, true},
		{"desktop-like", 640, 360, 0, false},
		{"noise", 200, 150, 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			pix := make([]byte, tt.w*tt.h*3)
			for i := range pix {
				if tt.random {
					pix[i] = byte(rng.IntN(256))
				} else {
					pix[i] = byte((i / 3 / 64) * 40)
				}
			}
			fill := func(y0, y1 int, dst []byte) error {
				copy(dst, pix[y0*tt.w*3:y1*tt.w*3])
				return nil
			}
			var buf bytes.Buffer
			if err := Encode(&buf, tt.w, tt.h, fill, Options{Strips: tt.strips}); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("png.Decode: %v", err)
			}
			if got := img.Bounds().Size(); got.X != tt.w || got.Y != tt.h {
				t.Fatalf("size got %v, want %dx%d", got, tt.w, tt.h)
			}
			for y := 0; y < tt.h; y++ {
				for x := 0; x < tt.w; x++ {
					r, g, b, _ := img.At(x, y).RGBA()
					i := (y*tt.w + x) * 3
					if byte(r>>8) != pix[i] || byte(g>>8) != pix[i+1] || byte(b>>8) != pix[i+2] {
						t.Fatalf("pixel (%d,%d) got %d,%d,%d want %v", x, y, r>>8, g>>8, b>>8, pix[i:i+3])
					}
				}
			}
		})
	}
}

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 5552, 65521, 70000, 200000} {
		a := make([]byte, n)
		b := make([]byte, n/2+7)
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		for i := range b {
			b[i] = 0xff
		}
		want := adler32.Checksum(append(append([]byte{}, a...), b...))
		if got := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), len(b)); got != want {
			t.Errorf("adler32Combine(len %d) got %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkEncode1080p(b *testing.B) {
	const w, h = 1920, 1080
	pix := make([]byte, w*h*3)
	for i := range pix {
		pix[i] = byte((i / 3 / 200) * 30)
	}
	fill := func(y0, y1 int, dst []byte) error {
		copy(dst, pix[y0*w*3:y1*w*3])
		return nil
	}
	b.ReportAllocs()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Encode(&buf, w, h, fill, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
