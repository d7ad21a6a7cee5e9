package media

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"testing"
)

// FuzzReadVLCConfig runs the vlcrc and gimprc readers on arbitrary text.
func FuzzReadVLCConfig(f *testing.F) {
	if b, err := os.ReadFile(fixture("vlcrc")); err == nil {
		f.Add(string(b[:4096]))
	}
	f.Add("qt-slider-colours=1;2;3;4\nqt-bgcone=0\n")
	f.Add("(theme \"Light\")\n   \n(undo-levels 100)")
	f.Add("input-record-path=/a=b\n#qt-max-volume=125")
	f.Fuzz(func(t *testing.T, text string) {
		p := writeFuzzFile(t, text)
		table := Metrics()
		rules := []map[string]any{
			{"expected_qt_bgcone": 1.0, "expected_qt_max_volume": 125.0, "expected_qt_minimal_view": 0.0,
				"expected_one_instance_when_started_from_file": 1.0, "expected_play_and_exit": 0.0,
				"expected_global_key_play_pause": 0.0, "recording_file_path": "/a", "type": "blackish",
				"key": "theme", "value": `"Light"`},
			{"type": "match", "expected_qt_slider_colours": "1;2;3;4", "key": []any{"a", "b"}, "value": "c"},
		}
		for _, name := range []string{"check_qt_bgcone", "check_qt_max_volume", "check_qt_minimal_view",
			"check_one_instance_when_started_from_file", "check_play_and_exit", "check_global_key_play_pause",
			"is_vlc_recordings_folder", "check_qt_slider_colours", "check_config_status"} {
			for _, r := range rules {
				s, err := table[name].Fn(context.Background(), p, r, true, nil)
				if err != nil || s < 0 || s > 1 {
					t.Fatalf("%s got %v, %v", name, s, err)
				}
			}
		}
	})
}

func writeFuzzFile(t *testing.T, text string) string {
	t.Helper()
	p := t.TempDir() + "/f"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzVLCStatus parses arbitrary status.xml text.
func FuzzVLCStatus(f *testing.F) {
	if b, err := os.ReadFile(fixture("vlc-status-playing.xml")); err == nil {
		f.Add(string(b))
	}
	f.Add(`<root><state>playing</state><information><category name="meta"><info name="filename">a</info></category></information></root>`)
	f.Fuzz(func(t *testing.T, text string) {
		root, err := parseXML(text)
		if err != nil {
			return
		}
		_ = root.find(`information/category[@name="meta"]/info[@name="filename"]`)
		_ = root.find("state")
	})
}

// FuzzDecodeImage decodes arbitrary bytes and runs the image pipeline on
// what decodes: conversions, resampling, SSIM and the perceptual hash.
func FuzzDecodeImage(f *testing.F) {
	for _, n := range []string{"small.png", "pal.png", "la.png", "src.jpg"} {
		if b, err := os.ReadFile(fixture(n)); err == nil {
			f.Add(b)
		}
	}
	var g bytes.Buffer
	pm := image.NewPaletted(image.Rect(0, 0, 9, 8), color.Palette{color.Black, color.Transparent, color.White})
	_ = gif.Encode(&g, pm, nil)
	f.Add(g.Bytes())
	var p bytes.Buffer
	_ = png.Encode(&p, image.NewGray16(image.Rect(0, 0, 8, 9)))
	f.Add(p.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decodeImage(data)
		if err != nil {
			return
		}
		if img.w*img.h > 1<<16 {
			return
		}
		for _, mode := range []string{"L", "RGB", "RGBA", "LA", "HSV"} {
			c, err := img.convert(mode)
			if err != nil {
				continue
			}
			if len(c.pix) != c.w*c.h*bands(mode) {
				t.Fatalf("convert %s to %s: %d bytes for %dx%d", img.mode, mode, len(c.pix), c.w, c.h)
			}
		}
		r := img.resize(img.w/2+1, img.h+3, lanczos)
		_ = r.resize(7, 7, bicubic)
		_, _ = phash(img)
		_ = structureSSIM(img, img, 0.9)
		_, _, _, _, _ = img.bbox()
	})
}

// FuzzEPUB unpacks arbitrary archives.
func FuzzEPUB(f *testing.F) {
	var b bytes.Buffer
	f.Add(b.String())
	f.Add("PK\x03\x04")
	f.Fuzz(func(t *testing.T, data string) {
		_, _ = epubLinesFrom("fuzz.epub", data)
	})
}
