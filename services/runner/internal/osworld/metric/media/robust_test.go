package media

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// fakePNG is a valid PNG header (signature and IHDR, no image data)
// claiming w×h RGB pixels: what a decoder reads before deciding to
// decode.
func fakePNG(w, h int) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2
	chunk := append([]byte("IHDR"), ihdr...)
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// hugePNG claims 100000×100000 pixels, past what PIL opens.
func hugePNG() []byte { return fakePNG(100000, 100000) }

// hangBound only catches a metric that hangs on bad input (decodes a
// 100000×100000 image, inflates a zip bomb whole). It is not a speed goal:
// alone the whole test takes under a second, but in `make test`, beside
// the other packages' tests on 2 cores, compare_epub of the bomb once took
// 5.6 s against the 5 s this was. That the caps apply is shown by the
// score: the bomb compared with itself would score 1 if it were read.
const hangBound = time.Minute

// TestBadInputs: corrupt and truncated inputs, and images PIL refuses as
// too large, score 0; an archive over the caps is not scored; neither
// hangs.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	src, err := os.ReadFile(fixture("src.png"))
	if err != nil {
		t.Fatal(err)
	}
	huge := write("huge.png", hugePNG())
	truncated := write("truncated.png", src[:len(src)/2])
	garbage := write("garbage.png", bytes.Repeat([]byte{0xff, 0xd8, 0x00}, 1000))
	empty := write("empty.png", nil)
	// A zip whose one page inflates to 40 MB, past the per-entry cap,
	// which OSWorld would read: not scored.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("page.html")
	w.Write(bytes.Repeat([]byte("<p>a</p>"), 5<<20))
	zw.Close()
	bomb := write("bomb.epub", zb.Bytes())
	for _, bad := range []string{huge, truncated, garbage, empty, dir} {
		for _, name := range []string{"compare_images", "check_structure_sim", "check_image_mirror", "compare_image_list",
			"check_brightness_decrease_and_structure_sim", "check_saturation_increase_and_structure_sim",
			"check_contrast_increase_and_structure_sim", "check_palette_and_structure_sim", "check_structure_sim_resized",
			"check_structure_sim_with_threshold", "check_green_background", "check_file_exists_and_structure_sim"} {
			start := time.Now()
			got, err := Metrics()[name].Fn(context.Background(), bad, fixture("src.png"), true, nil)
			if err != nil || got != 0 || time.Since(start) > hangBound {
				t.Errorf("%s(%s) got %v, %v after %v; want 0", name, filepath.Base(bad), got, err, time.Since(start))
			}
		}
		for _, name := range []string{"check_textbox_on_leftside", "check_triangle_position"} {
			if got, err := Metrics()[name].Fn(context.Background(), bad, nil, false, nil); err != nil || got != 0 {
				t.Errorf("%s(%s) got %v, %v; want 0", name, filepath.Base(bad), got, err)
			}
		}
		if got, err := metricImageSize(context.Background(), bad, map[string]any{"width": 96.0}, true, nil); err != nil || got != 0 {
			t.Errorf("check_image_size(%s) got %v, %v; want 0", filepath.Base(bad), got, err)
		}
	}
	start := time.Now()
	if got, err := metricCompareEPUB(context.Background(), bomb, bomb, true, nil); !errors.Is(err, metric.ErrOverCap) || time.Since(start) > hangBound {
		t.Errorf("compare_epub of an oversized page got %v, %v after %v; want an error wrapping metric.ErrOverCap", got, err, time.Since(start))
	}
}
