package slides

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The wants below are what OSWorld's slides.py returns on the same files
// (python-pptx reading LibreOffice's output); a Python exception is 0.
func TestComparePptxFiles(t *testing.T) {
	off := func(keys ...string) map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			m[k] = false
		}
		return m
	}
	tests := []struct {
		result string
		opts   map[string]any
		want   float64
	}{
		{"base", nil, 1},
		{"base", off("examine_shape", "examine_bullets"), 1},
		{"text", nil, 0},
		{"text", off("examine_text"), 0}, // the bullets still see the text
		{"text", off("examine_text", "examine_bullets"), 1},
		{"color", nil, 0},
		{"color", off("examine_color_rgb"), 1},
		{"bold", nil, 0},
		{"bold", off("examine_font_bold"), 1},
		{"italic", nil, 0},
		{"italic", off("examine_font_italic"), 1},
		{"underline", nil, 0},
		{"underline", off("examine_font_underline"), 1},
		{"strike", nil, 0},
		{"strike", off("examine_strike_through"), 1},
		{"size", nil, 0},
		{"size", off("examine_font_size"), 1},
		{"font", nil, 0},
		{"font", off("examine_font_name"), 1},
		{"font", off("examine_font_size"), 0},
		{"align", nil, 0},
		{"align", off("examine_alignment"), 1},
		{"moved", nil, 0},
		{"moved", off("examine_shape"), 1},
		{"moved", map[string]any{"examine_shape": false, "examine_shape_for_shift_size": true}, 0},
		{"moved", map[string]any{"examine_shape": false, "approximately_tolerance": 0.7}, 1},
		{"notes", nil, 0},
		{"notes", off("examine_note"), 1},
		{"background", nil, 0},
		{"background", off("examine_background_color"), 1},
		{"oneslide", nil, 0},
		{"oneslide", off("examine_number_of_slides"), 1},
		// Table cells are compared only through the bullets (their text)
		// and, always, for bold, italic and underline.
		{"tabletext", nil, 0},
		{"tabletext", off("examine_bullets"), 1},
		{"tablebold", nil, 0},
		{"tablebold", off("examine_font_bold"), 0},
		// Level 1 against 0 passes the indent check but not the bullets.
		{"bulletlevel", nil, 0},
		{"bulletlevel", off("examine_bullets"), 1},
		{"transition", nil, 0},
		{"base", map[string]any{"examine_shape": 0.0, "enable_debug": false}, 1},
	}
	expected := fixture(t, "base")
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			got, err := metricComparePptx(context.Background(), fixture(t, tt.result), expected, true, tt.opts)
			if err != nil || got != tt.want {
				t.Errorf("compare_pptx_files(%s, base, %v) = %v, %v; want %v", tt.result, tt.opts, got, err, tt.want)
			}
		})
	}
}

func TestComparePptxBadInput(t *testing.T) {
	base := fixture(t, "base")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	slide := "ppt/slides/slide1.xml"
	tests := []struct {
		name   string
		result any
		want   float64
	}{
		{"nil", nil, 0},
		{"missing", filepath.Join(dir, "absent.pptx"), 0},
		{"not a zip", write("junk.pptx", "not a zip at all"), 0},
		{"list", []any{base}, 0},
		{"broken slide xml", rezip(t, base, replaceIn(slide, "</p:sld>", "")), 0},
		{"run without text", rezip(t, base, replaceIn(slide, "<a:t>world</a:t>", "")), 0},
		{"bad bold", rezip(t, base, replaceIn(slide, `b="0"`, `b="maybe"`)), 0},
		{"bad colour", rezip(t, base, replaceIn(slide, `val="ff0000"`, `val="zz0000"`)), 0},
		{"theme background", rezip(t, base, replaceIn(slide, "<p:cSld>", `<p:cSld><p:bg><p:bgPr><a:solidFill><a:schemeClr val="bg1"/></a:solidFill></p:bgPr></p:bg>`)), 0},
		// An empty a:t has no text for ElementTree: slides.py's bullet
		// extraction raises inside its bare except and skips the check.
		{"empty a:t skips the bullets", rezip(t, fixture(t, "bulletlevel"), replaceIn("ppt/slides/slide2.xml",
			"<a:t>one</a:t></a:r>", `<a:t>one</a:t></a:r><a:fld id="{1}" type="slidenum"><a:t></a:t></a:fld>`)), 1},
		{"no notes body", rezip(t, base, replaceIn("ppt/notesSlides/notesSlide1.xml", `type="body"`, `type="obj"`)), 0},
		{"no presentation", rezip(t, base, func(n string, d []byte) []byte {
			if n == "ppt/presentation.xml" {
				return nil
			}
			return d
		}), 0},
		// python-pptx parses every slide, layout and master part when it
		// opens the package, but not the theme.
		{"corrupt unused layout", rezip(t, base, replaceIn("ppt/slideLayouts/slideLayout12.xml", "</p:sldLayout>", "")), 0},
		{"corrupt theme", rezip(t, base, func(n string, d []byte) []byte {
			if n == "ppt/theme/theme1.xml" {
				return d[:50]
			}
			return d
		}), 1},
		{"slide without its content type", rezip(t, base, replaceIn("[Content_Types].xml", `PartName="/ppt/slides/slide2.xml"`, `PartName="/ppt/slides/slideX.xml"`)), 0},
		{"same file rezipped", rezip(t, base, func(_ string, d []byte) []byte { return d }), 1},
		{"upper-case colour", rezip(t, base, replaceIn(slide, `val="ff0000"`, `val="FF0000"`)), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricComparePptx(context.Background(), tt.result, base, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("compare_pptx_files(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
	if _, err := metricComparePptx(context.Background(), base, filepath.Join(dir, "absent.pptx"), true, nil); err == nil || !strings.Contains(err.Error(), "expected pptx") {
		t.Errorf("compare_pptx_files with a missing expected file: err = %v, want an expected pptx error", err)
	}
}

// The options published tasks use to check one slide's positions; wants
// are slides.py's on the same files (result first, then the reference).
func TestComparePositionOptions(t *testing.T) {
	title := map[string]any{"examine_shape": false, "examine_title_bottom_position": true}
	table := map[string]any{"examine_shape": false, "examine_table_bottom_position": true}
	right := map[string]any{"examine_shape": false, "examine_right_position": true}
	top := map[string]any{"examine_shape": false, "examine_top_position": true}
	size := map[string]any{"examine_shape": false, "examine_image_size": true, "approximately_tolerance": 0.01}
	height := map[string]any{"examine_shape": false, "examine_modify_height": true}
	shift := map[string]any{"examine_shape": false, "examine_shape_for_shift_size": true}
	tests := []struct {
		result string
		opts   map[string]any
		want   float64
	}{
		{"layout", title, 0}, // the title must have moved down
		{"layouttitledown", title, 1},
		{"layouttitledown", nil, 0},
		{"layout", table, 0},
		{"layouttabledown", table, 1},
		{"layouttabledown", nil, 1}, // examine_shape skips shapes without text
		{"layout", right, 0},
		{"layoutpicright", right, 1},
		{"layoutpicright", shift, 0},
		{"layout", top, 0},
		{"layoutpicup", top, 1},
		{"layoutpicup", title, 0},
		{"layout", size, 1},
		{"layoutpictaller", size, 0},
		{"layoutpicright", size, 1}, // a picture's size, not its place
		{"layout", height, 1},
		{"layoutpictaller", height, 0},
		{"layouttabledown", height, 1}, // only the height of shapes without text
		{"layouttitledown", height, 0},
		{"layout", shift, 1},
	}
	expected := fixture(t, "layout")
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			got, err := metricComparePptx(context.Background(), fixture(t, tt.result), expected, true, tt.opts)
			if err != nil || got != tt.want {
				t.Errorf("compare_pptx_files(%s, layout, %v) = %v, %v; want %v", tt.result, tt.opts, got, err, tt.want)
			}
		})
	}
}
