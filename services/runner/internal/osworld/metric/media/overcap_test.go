package media

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestImagesOverCap: an image over the 40-megapixel cap that PIL would
// open (it refuses past about 179 megapixels) is not scored: every image
// metric returns an error wrapping metric.ErrOverCap that names the cap,
// whichever side the image is on. It scored 0. An image PIL refuses too
// still scores 0.
func TestImagesOverCap(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// 8000×8000 is 64 megapixels: over the cap, under PIL's bound.
	big := write("big.png", fakePNG(8000, 8000))
	bomb := write("bomb.png", fakePNG(20000, 20000))
	src := fixture("src.png")
	const wantText = "image of 8000x8000 pixels is over the cap of 41943040 pixels"
	pairs := []string{"compare_images", "check_structure_sim", "check_image_mirror", "compare_image_list",
		"check_brightness_decrease_and_structure_sim", "check_saturation_increase_and_structure_sim",
		"check_contrast_increase_and_structure_sim", "check_palette_and_structure_sim", "check_structure_sim_resized",
		"check_structure_sim_with_threshold", "check_green_background", "check_file_exists_and_structure_sim"}
	type call struct {
		name             string
		metric           string
		result, expected any
	}
	var overCap []call
	for _, m := range pairs {
		overCap = append(overCap, call{m + " result", m, big, src}, call{m + " expected", m, src, big})
	}
	overCap = append(overCap,
		call{"check_textbox_on_leftside", "check_textbox_on_leftside", big, nil},
		call{"check_triangle_position", "check_triangle_position", big, nil},
		call{"check_image_size", "check_image_size", big, map[string]any{"width": 96.0}},
	)
	for _, tt := range overCap {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, nil)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), wantText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, wantText)
			}
		})
	}
	t.Run("past PIL's bound", func(t *testing.T) {
		if got, err := Metrics()["compare_images"].Fn(context.Background(), bomb, src, true, nil); err != nil || got != 0 {
			t.Errorf("compare_images of a 400-megapixel image = %v, %v; want 0 as PIL's DecompressionBombError", got, err)
		}
	})
}

// TestMP3TagOverCap: an ID3v2 tag over the 16 MiB cap, which mutagen
// reads, is not scored; it scored 0.
func TestMP3TagOverCap(t *testing.T) {
	const n = maxTagBytes + 1
	head := []byte{'I', 'D', '3', 3, 0, 0, byte(n >> 21 & 0x7f), byte(n >> 14 & 0x7f), byte(n >> 7 & 0x7f), byte(n & 0x7f)}
	p := filepath.Join(t.TempDir(), "big-tag.mp3")
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	rule := map[string]any{"title": map[string]any{"method": "eq", "ref": "x"}}
	got, err := Metrics()["check_mp3_meta"].Fn(context.Background(), p, rule, true, nil)
	if !errors.Is(err, metric.ErrOverCap) || !strings.Contains(err.Error(), "over the cap of 16777216") {
		t.Errorf("check_mp3_meta of a %d-byte tag = %v, %v; want an error wrapping metric.ErrOverCap naming the cap", n, got, err)
	}
}
