package slides

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The wants are what OSWorld's slides.py returns on the same files.

func TestImageStretchAndCenter(t *testing.T) {
	orig := fixture(t, "picorig")
	tests := []struct {
		result string
		want   float64
	}{
		{"picfull", 1},
		{"picorig", 0},  // same picture, not stretched
		{"picother", 0}, // stretched, but another image
		{"base", 0},     // no picture
	}
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			got, err := metricImageStretch(context.Background(), fixture(t, tt.result), orig, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_image_stretch_and_center(%s) = %v, %v; want %v", tt.result, got, err, tt.want)
			}
		})
	}
	if got, err := metricImageStretch(context.Background(), nil, orig, true, nil); err != nil || got != 0 {
		t.Errorf("check_image_stretch_and_center(nil) = %v, %v; want 0", got, err)
	}
}

func TestCheckTransition(t *testing.T) {
	rules := func(idx float64, typ string) map[string]any {
		return map[string]any{"slide_idx": idx, "transition_type": typ}
	}
	tests := []struct {
		name   string
		result any
		rules  map[string]any
		want   float64
	}{
		{"dissolve", fixture(t, "transition"), rules(0, "dissolve"), 1},
		{"other type", fixture(t, "transition"), rules(0, "fade"), 0},
		{"no such slide", fixture(t, "transition"), rules(3, "dissolve"), 0},
		{"no transition", fixture(t, "base"), rules(0, "dissolve"), 0},
		{"no file", nil, rules(0, "dissolve"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricTransition(context.Background(), tt.result, tt.rules, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_transition(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
	if _, err := metricTransition(context.Background(), fixture(t, "base"), map[string]any{"slide_idx": 0.0}, true, nil); err == nil {
		t.Error("check_transition without transition_type: no error")
	}
}

func TestFillToRGBDistance(t *testing.T) {
	blueFromWhite := map[string]any{"rgb": []any{0.0, 0.0, 255.0}, "original_rgb": []any{255.0, 255.0, 255.0}}
	red := map[string]any{"rgb": []any{255.0, 0.0, 0.0}}
	tests := []struct {
		result string
		rules  map[string]any
		want   float64
	}{
		{"redbg", blueFromWhite, 0.18350341907227397},
		{"redbg", red, 1},
		{"bluebg", blueFromWhite, 0.591751709536137},
		{"bluebg", red, 0.591751709536137},
		{"base", red, 0}, // no solid background anywhere: distance 1
		{"background", blueFromWhite, 0.09175170953613698},
		{"background", red, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			got, err := metricFillDistance(context.Background(), fixture(t, tt.result), tt.rules, true, nil)
			if err != nil || !(math.Abs(got-tt.want) <= 1e-12) {
				t.Errorf("evaluate_presentation_fill_to_rgb_distance(%s, %v) = %v, %v; want %v", tt.result, tt.rules, got, err, tt.want)
			}
		})
	}
}

func TestPageNumberColors(t *testing.T) {
	base := fixture(t, "base")
	master := "ppt/slideMasters/slideMaster1.xml"
	redNumber := rezip(t, base, func(name string, data []byte) []byte {
		if name != master {
			return data
		}
		s := string(data)
		i := strings.Index(s, `type="sldNum"`)
		if i < 0 {
			t.Fatal("no slide number placeholder in LibreOffice's master")
		}
		return []byte(s[:i] + strings.Replace(s[i:], `<a:srgbClr val="000000"`, `<a:srgbClr val="ff0000"`, 1))
	})
	tests := []struct {
		name   string
		result any
		color  string
		want   float64
	}{
		{"black numbers are black", base, "black", 1},
		{"black numbers are not red", base, "red", 0},
		{"red numbers are red", redNumber, "red", 1},
		{"red numbers are not blue", redNumber, "blue", 0},
		{"unknown colour name passes", redNumber, "purple", 1},
		{"no file", nil, "red", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricPageNumberColors(context.Background(), tt.result, map[string]any{"color": tt.color}, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_page_number_colors(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
}

func TestSlideOrientationPortrait(t *testing.T) {
	base := fixture(t, "base")
	pres := "ppt/presentation.xml"
	tests := []struct {
		name   string
		result any
		want   float64
	}{
		{"landscape", base, 0},
		{"portrait", rezip(t, base, replaceIn(pres, `cx="10080625" cy="5670550"`, `cx="5670550" cy="10080625"`)), 1},
		{"no size", rezip(t, base, replaceIn(pres, `<p:sldSz cx="10080625" cy="5670550"/>`, ``)), 0},
		{"no file", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricPortrait(context.Background(), tt.result, nil, false, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_slide_orientation_Portrait(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
}

const xcuHead = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
`

func TestRegistryChecks(t *testing.T) {
	dir := t.TempDir()
	n := 0
	xcu := func(items string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("registrymodifications%d.xcu", n))
		if err := os.WriteFile(p, []byte(xcuHead+items+"</oor:items>\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	presenter := func(v string) string {
		return `<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen" oor:op="fuse"><value>` + v + `</value></prop></item>`
	}
	autosave := func(v string) string {
		return `<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>` + v + `</value></prop></item>`
	}
	corrupt := filepath.Join(dir, "corrupt.xcu")
	if err := os.WriteFile(corrupt, []byte(xcuHead), 0o644); err != nil {
		t.Fatal(err)
	}
	minutes := map[string]any{"minutes": 3.0}
	tests := []struct {
		name     string
		fn       func(context.Context, any, any, bool, map[string]any) (float64, error)
		result   any
		expected any
		want     float64
	}{
		{"presenter disabled", metricPresenterConsoleDisabled, xcu(presenter("false")), nil, 1},
		{"presenter disabled, upper case", metricPresenterConsoleDisabled, xcu(presenter("False")), nil, 1},
		{"presenter enabled", metricPresenterConsoleDisabled, xcu(presenter("true")), nil, 0},
		{"presenter unset", metricPresenterConsoleDisabled, xcu(""), nil, 0},
		{"presenter empty value", metricPresenterConsoleDisabled, xcu(presenter("")), nil, 0},
		{"presenter corrupt", metricPresenterConsoleDisabled, corrupt, nil, 0},
		{"presenter no file", metricPresenterConsoleDisabled, nil, nil, 0},
		{"autosave 3", metricAutoSaveTime, xcu(autosave("3")), minutes, 1},
		{"autosave 10", metricAutoSaveTime, xcu(autosave("10")), minutes, 0},
		{"autosave last item wins", metricAutoSaveTime, xcu(autosave("3") + autosave("5")), minutes, 0},
		{"autosave not a number", metricAutoSaveTime, xcu(autosave("x")), minutes, 0},
		// int() takes spaces, underscores and any script's digits.
		{"autosave as int() reads it", metricAutoSaveTime, xcu(autosave(" 0_3 ")), minutes, 1},
		{"autosave in Arabic-Indic digits", metricAutoSaveTime, xcu(autosave("٣")), minutes, 1},
		{"autosave unset", metricAutoSaveTime, xcu(""), minutes, 0},
		// An empty value is None, and a later item still overrides it
		// (TestConfigMetricsMatchSlidesPy found it failed here at once).
		{"autosave empty, then set", metricAutoSaveTime, xcu(autosave("") + autosave("3")), minutes, 1},
		{"autosave set, then empty", metricAutoSaveTime, xcu(autosave("3") + autosave("")), minutes, 0},
		// Python's ==: minutes True is 1.
		{"autosave 1 against True", metricAutoSaveTime, xcu(autosave("1")), map[string]any{"minutes": true}, 1},
		{"autosave 1 against a string", metricAutoSaveTime, xcu(autosave("1")), map[string]any{"minutes": "1"}, 0},
		{"autosave corrupt", metricAutoSaveTime, corrupt, minutes, 0},
		{"autosave no file", metricAutoSaveTime, nil, minutes, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(context.Background(), tt.result, tt.expected, tt.expected != nil, nil)
			if err != nil || got != tt.want {
				t.Errorf("%s = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
}

func TestCheckLeftPanel(t *testing.T) {
	tests := []struct {
		name   string
		result any
		want   float64
	}{
		{"slides view", `<desktop-frame><application name="soffice"><document-frame name="Slides View"/></application></desktop-frame>`, 1},
		{"root is the view", `<document-frame name="Slides View"/>`, 1},
		{"other views", `<desktop-frame><document-frame name="Outline View"/></desktop-frame>`, 0},
		{"not xml", `<desktop-frame>`, 0},
		{"nil", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricLeftPanel(context.Background(), tt.result, nil, false, nil)
			if err != nil || got != tt.want {
				t.Errorf("check_left_panel(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
}

func TestMetricsRegistered(t *testing.T) {
	for _, name := range []string{"compare_pptx_files", "check_slide_orientation_Portrait", "check_presenter_console_disable",
		"check_page_number_colors", "check_left_panel", "check_auto_saving_time", "check_image_stretch_and_center",
		"check_transition", "evaluate_presentation_fill_to_rgb_distance"} {
		if s, ok := Metrics()[name]; !ok || s.Fn == nil {
			t.Errorf("Metrics()[%q] missing", name)
		}
	}
}
