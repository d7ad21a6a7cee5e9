package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func fixture(name string) string { return filepath.Join("testdata", name) }

func mustOpen(t *testing.T, name string) *pimg {
	t.Helper()
	img, err := openImage(fixture(name))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return img
}

func digest(img *pimg) string {
	s := sha256.Sum256(img.pix)
	return hex.EncodeToString(s[:6])
}

// TestPILParity checks modes, conversions and resampling byte for byte
// against Pillow 9.4 (the want values are the first 6 bytes of the SHA-256
// of numpy.asarray(result).tobytes()).
func TestPILParity(t *testing.T) {
	type ops struct{ mode, l, rgb, hsv, lanczos, bicubic, lanczosL string }
	tests := map[string]ops{
		"src.png":      {"RGB", "b77a11645aae", "b153d08bdbfd", "fdcbf76e2448", "4efa365bda59", "0230e84f1cdf", "3da6a1e0045e"},
		"mirror.png":   {"RGB", "066fa92b1831", "120d7dff7abf", "2ca23fc6d528", "b9c5b6cc0231", "27e18c8fdb82", "3a661bfbd9c9"},
		"dark.png":     {"RGB", "6ca04fcceb50", "e8dc560c55b2", "7d41d5e7ce9f", "d8949fd19899", "1dba026e233f", "f7790942e4f5"},
		"contrast.png": {"RGB", "871edb422237", "d890d46f6d5a", "701dd809cda6", "dd3147224729", "b883c2f4c080", "e372a1b39e43"},
		"small.png":    {"RGB", "756d3ba54675", "403681edc345", "467240bf4d4c", "1f2587d808e5", "8c317549abe9", "52f35d7b74b0"},
		"pal.png":      {"P", "a0d08ed2a9d5", "204861a15a8c", "888ab1488b47", "c1945b68b76e", "6e7250981e49", "feb63200a553"},
		"alpha.png":    {"RGBA", "b77a11645aae", "b153d08bdbfd", "fdcbf76e2448", "2780bc56b723", "f65cb09617a9", "3da6a1e0045e"},
		"gray.png":     {"L", "c6bf9858f021", "0721fd4f15b8", "5088d9ee43e8", "de4d59e7c9f8", "6f5abb920abb", "425963ffcf57"},
		"la.png":       {"LA", "c6bf9858f021", "0721fd4f15b8", "5088d9ee43e8", "08311169555e", "33a0556c7958", "425963ffcf57"},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			img := mustOpen(t, name)
			if img.mode != want.mode {
				t.Errorf("mode got %s, want %s", img.mode, want.mode)
			}
			l, err := img.convert("L")
			if err != nil {
				t.Fatal(err)
			}
			rgb, _ := img.convert("RGB")
			hsv, _ := img.convert("HSV")
			got := ops{img.mode, digest(l), digest(rgb), digest(hsv),
				digest(img.resize(41, 23, lanczos)), digest(img.resize(130, 70, bicubic)), digest(l.resize(33, 77, lanczos))}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestPILOpenParity checks the modes PIL gives other PNG layouts and GIF,
// and their conversions and LANCZOS resize, against Pillow 9.4.
func TestPILOpenParity(t *testing.T) {
	type ops struct {
		mode               string
		trans              bool
		l, rgb, rgba, lanc string
	}
	tests := map[string]ops{
		"rgbtrns.png": {"RGB", true, "b77a11645aae", "b153d08bdbfd", "0f006ff36e83", "4efa365bda59"},
		"la16.png":    {"RGBA", false, "d266bda268f3", "b8150443a3b7", "793c82b4487b", "ed77987033d2"},
		"p4.png":      {"P", true, "a60c1dccf7fe", "d8dab8806955", "801d1577a8dc", "a76473c908bc"},
		"src.gif":     {"P", false, "a308d100101f", "83d7f3ab819b", "72507dff676c", "5314bf705617"},
	}
	for name, want := range tests {
		img := mustOpen(t, name)
		l, _ := img.convert("L")
		rgb, _ := img.convert("RGB")
		rgba, _ := img.convert("RGBA")
		got := ops{img.mode, hasTransparency(img), digest(l), digest(rgb), digest(rgba), digest(img.resize(41, 23, lanczos))}
		if got != want {
			t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, want)
		}
	}
}

// TestSSIMParity checks ssim against skimage's structural_similarity on the
// same arrays (win_size 7; channel_axis=2 for RGB).
func TestSSIMParity(t *testing.T) {
	tests := []struct {
		a, b      string
		rgb, luma float64
		tolerance float64
	}{
		{"src.png", "mirror.png", 0.049905134499, 0.223518568043, 1e-9},
		{"src.png", "dark.png", 0.547574259249, 0.691144098157, 1e-9},
		{"src.png", "pal.png", 0.835619509008, 0.870240023313, 1e-9},
		{"src.png", "alpha.png", 1, 1, 1e-9},
		// Exact with djpeg (libjpeg-turbo, as PIL); Go's own IDCT
		// differs from libjpeg's in a few samples.
		{"src.png", "src.jpg", 0.969338775717, 0.976681492483, jpegTolerance()},
	}
	for _, tt := range tests {
		a, b := mustOpen(t, tt.a), mustOpen(t, tt.b)
		ra, _ := a.convert("RGB")
		rb, _ := b.convert("RGB")
		la, _ := a.convert("L")
		lb, _ := b.convert("L")
		gotRGB, err := ssim(ra, rb, 7)
		if err != nil {
			t.Fatal(err)
		}
		gotL, _ := ssim(la, lb, 7)
		if math.Abs(gotRGB-tt.rgb) > tt.tolerance || math.Abs(gotL-tt.luma) > tt.tolerance {
			t.Errorf("ssim(%s, %s) got %.12f/%.12f, want %.12f/%.12f", tt.a, tt.b, gotRGB, gotL, tt.rgb, tt.luma)
		}
	}
	if _, err := ssimPlane(make([]uint8, 36), make([]uint8, 36), 6, 6, 7); err == nil {
		t.Error("ssim of a 6x6 image with a 7x7 window: no error")
	}
}

func TestPhashParity(t *testing.T) {
	// imagehash.phash bits (row-major over the 8x8 block), from Pillow and
	// scipy.fftpack.
	tests := map[string]uint64{
		"src.png":    0xaa2335dc2321de75,
		"mirror.png": 0x00899b768b8b74df,
		"small.png":  0xaa2335dc2321de75,
		"pal.png":    0xaa2335dc2321de75,
		"la.png":     0xaa2335dc2321de75,
	}
	for name, want := range tests {
		got, err := phash(mustOpen(t, name))
		if err != nil || got != want {
			t.Errorf("phash(%s) got %016x, %v; want %016x", name, got, err, want)
		}
	}
}

// TestPhashExactZeros pins imagehash.phash on 32×32 images whose DCT has
// coefficients that are zero in exact arithmetic: flat, constant along an
// axis, mirror-symmetric. scipy gives those exactly 0, so they never beat
// the median; a DCT that leaves rounding noise there sets bits at random
// (a flat frame then mismatched another flat frame in compare_videos).
// The wants are imagehash 4.3 on scipy 1.10.
func TestPhashExactZeros(t *testing.T) {
	tests := []struct {
		name string
		f    func(x, y int) int
		want uint64
	}{
		{"black", func(x, y int) int { return 0 }, 0},
		{"flat", func(x, y int) int { return 200 }, 0x1},
		{"flat dark", func(x, y int) int { return 1 }, 0x1},
		{"constant down columns", func(x, y int) int { return x * 37 % 256 }, 0x1},
		{"constant along rows", func(x, y int) int { return y * 53 % 256 }, 0x0000010001000001},
		{"mirrored left-right", func(x, y int) int { return (mirror(x)*9 + y*5) % 256 }, 0x4414514411441041},
		{"mirrored both ways", func(x, y int) int { return (mirror(x)*9 + mirror(y)*7) % 256 }, 0x1},
	}
	for _, tt := range tests {
		img := &pimg{mode: "L", w: 32, h: 32, pix: make([]uint8, 32*32)}
		for y := range 32 {
			for x := range 32 {
				img.pix[y*32+x] = uint8(tt.f(x, y))
			}
		}
		if got, err := phash(img); err != nil || got != tt.want {
			t.Errorf("%s: phash got %016x, %v; want %016x", tt.name, got, err, tt.want)
		}
	}
}

// mirror folds 0..31 onto 0..15 and back.
func mirror(i int) int { return min(i, 31-i) }

func jpegTolerance() float64 {
	if _, err := exec.LookPath("djpeg"); err == nil {
		return 1e-9
	}
	return 1e-4
}

func writePNG(t *testing.T, m image.Image) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img.png")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageMetrics(t *testing.T) {
	f := fixture
	tests := []struct {
		metric      string
		result, exp any
		opts        map[string]any
		want        float64
	}{
		// The wants are OSWorld's gimp.py and vlc.py on the same files.
		{"check_brightness_decrease_and_structure_sim", f("dark.png"), f("src.png"), nil, 1},
		{"check_brightness_decrease_and_structure_sim", f("src.png"), f("dark.png"), nil, 0},
		{"check_saturation_increase_and_structure_sim", f("saturated.png"), f("smooth.png"), nil, 1},
		{"check_saturation_increase_and_structure_sim", f("smooth.png"), f("saturated.png"), nil, 0},
		{"check_contrast_increase_and_structure_sim", f("contrast.png"), f("src.png"), nil, 1},
		{"check_contrast_increase_and_structure_sim", f("src.png"), f("contrast.png"), nil, 0},
		{"check_image_mirror", f("src.png"), f("mirror.png"), nil, 1},
		{"check_image_mirror", f("src.png"), f("src.png"), nil, 0},
		{"check_structure_sim", f("src.png"), f("src.jpg"), nil, 1},
		{"check_structure_sim", f("src.png"), f("dark.png"), nil, 0},
		{"check_structure_sim", f("src.png"), f("small.png"), nil, 0},
		{"check_structure_sim_resized", f("padded.png"), f("src.png"), nil, 1},
		{"check_structure_sim_resized", f("big.png"), f("src.png"), nil, 1},
		{"check_structure_sim_resized", f("padded.png"), f("mirror.png"), nil, 0},
		{"check_palette_and_structure_sim", f("pal.png"), f("src.png"), nil, 0},
		{"check_palette_and_structure_sim", f("pal256.png"), f("src.png"), nil, 1},
		{"check_palette_and_structure_sim", f("src.png"), f("src.png"), nil, 0},
		{"check_file_exists_and_structure_sim", f("src.jpg"), f("src.png"), nil, 1},
		{"check_file_exists_and_structure_sim", f("missing.jpg"), f("src.png"), nil, 0},
		{"check_structure_sim_with_threshold", f("small.png"), f("src.png"), map[string]any{"ssim_threshold": 0.85}, 0},
		{"check_structure_sim_with_threshold", f("small.png"), f("src.png"), map[string]any{"ssim_threshold": 0.6}, 1},
		{"check_structure_sim_with_threshold", f("big.png"), f("src.png"), nil, 1},
		{"check_structure_sim_with_threshold", f("mirror.png"), f("src.png"), nil, 0},
		{"check_textbox_on_leftside", f("src.png"), nil, nil, 1},
		{"compare_image_list", f("src.png"), f("src.png"), nil, 1},
		{"compare_image_list", f("src.png"), f("dark.png"), nil, 0},
		{"compare_image_list", f("big.png"), f("src.png"), nil, 0},
		{"compare_image_list", []any{f("src.png"), f("dark.png")}, []any{f("src.png"), f("dark.png")}, nil, 1},
		{"compare_image_list", []any{f("src.png"), nil}, []any{f("src.png"), f("dark.png")}, nil, 0},
		{"compare_images", f("src.png"), f("dark.png"), nil, 0.691144098157},
		{"compare_images", f("small.png"), f("dark.png"), nil, 0.758829000993},
		{"compare_images", f("gray.png"), f("dark.png"), nil, 0.691154579021},
		{"compare_images", f("src.png"), f("dark.png"), map[string]any{"reference_base_result": 0.5}, (0.691144098157 - 0.5) / 0.5},
		{"compare_images", f("src.png"), f("dark.png"), map[string]any{"reference_base_result": 0.69}, 0},
		{"compare_images", nil, f("dark.png"), nil, 0},
		{"check_image_size", f("src.png"), map[string]any{"width": 96.0, "height": 60.0}, nil, 1},
		{"check_image_size", f("src.png"), map[string]any{"height": 61.0}, nil, 0},
		{"check_image_size", f("padded.png"), map[string]any{"width": 96.0, "height": 60.0, "ignore_transparent": true}, nil, 1},
		{"check_image_size", f("padded.png"), map[string]any{"width": 120.0, "height": 80.0}, nil, 1},
		{"check_image_file_size", f("src.png"), map[string]any{"max_size": 600000.0}, nil, 1},
		{"check_image_file_size", f("src.png"), map[string]any{"max_size": 100.0}, nil, 0},
		{"check_image_file_size", nil, map[string]any{"max_size": 100.0}, nil, 0},
	}
	table := Metrics()
	for _, tt := range tests {
		t.Run(tt.metric, func(t *testing.T) {
			got, err := table[tt.metric].Fn(context.Background(), tt.result, tt.exp, tt.exp != nil, tt.opts)
			if err != nil {
				t.Fatalf("%s(%v, %v): %v", tt.metric, tt.result, tt.exp, err)
			}
			if !(math.Abs(got-tt.want) <= 1e-9) {
				t.Errorf("%s(%v, %v, %v) got %.12f, want %.12f", tt.metric, tt.result, tt.exp, tt.opts, got, tt.want)
			}
		})
	}
}

// TestDrawnImageMetrics covers the metrics that look for shapes, on
// images drawn here.
func TestDrawnImageMetrics(t *testing.T) {
	fill := func(w, h int, c color.Color) *image.RGBA {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.Set(x, y, c)
			}
		}
		return m
	}
	white, black := color.RGBA{255, 255, 255, 255}, color.RGBA{0, 0, 0, 255}
	green := color.RGBA{20, 200, 30, 255}
	yellow := color.RGBA{250, 220, 0, 255}
	triangle := func(cx, cy int) string {
		m := fill(100, 80, white)
		// OSWorld takes the second least frequent colour for the
		// triangle: a small red dot is the least frequent, a blue square
		// the more frequent.
		for y := 0; y < 3; y++ {
			for x := 0; x < 3; x++ {
				m.Set(90+x, 5+y, color.RGBA{220, 0, 0, 255})
			}
		}
		for y := 0; y < 20; y++ {
			for x := -y / 2; x <= y/2; x++ {
				m.Set(cx+x, cy-10+y, yellow)
			}
		}
		for y := 0; y < 30; y++ {
			for x := 0; x < 30; x++ {
				m.Set(x, 50+y%30, color.RGBA{0, 0, 200, 255})
			}
		}
		return writePNG(t, m)
	}
	text := func(x0 int) string {
		m := fill(200, 50, white)
		for y := 20; y < 30; y++ {
			for x := x0; x < x0+50; x++ {
				m.Set(x, y, black)
			}
		}
		return writePNG(t, m)
	}
	// A square target: black object on white; the source paints the
	// background green.
	object := fill(40, 40, white)
	greenBG := fill(40, 40, green)
	redBG := fill(40, 40, color.RGBA{200, 20, 30, 255})
	for y := 10; y < 30; y++ {
		for x := 10; x < 30; x++ {
			object.Set(x, y, black)
			greenBG.Set(x, y, black)
			redBG.Set(x, y, black)
		}
	}
	tall := fill(40, 50, white)
	tallGreen := fill(40, 50, green)
	tests := []struct {
		name, metric string
		result, exp  any
		want         float64
	}{
		{"triangle centred", "check_triangle_position", triangle(50, 40), nil, 1},
		{"triangle off centre", "check_triangle_position", triangle(75, 40), nil, 0},
		{"text at the left", "check_textbox_on_leftside", text(5), nil, 1},
		{"text in the middle", "check_textbox_on_leftside", text(60), nil, 0},
		{"green background", "check_green_background", writePNG(t, greenBG), writePNG(t, object), 1},
		{"red background", "check_green_background", writePNG(t, redBG), writePNG(t, object), 0},
		// OSWorld indexes [x, y] on a [row, column] array: a non-square
		// image raises, and scores 0.
		{"non-square", "check_green_background", writePNG(t, tallGreen), writePNG(t, tall), 0},
	}
	table := Metrics()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := table[tt.metric].Fn(context.Background(), tt.result, tt.exp, tt.exp != nil, nil)
			if err != nil || got != tt.want {
				t.Errorf("%s got %v, %v; want %v", tt.metric, got, err, tt.want)
			}
		})
	}
}
