package media

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qtSection is the [qt] part of vlcrc as VLC's Qt interface writes it:
// every option commented out at its default.
const qtSection = `
[qt] # Qt interface

# Start in minimal view (without menus) (boolean)
#qt-minimal-view=0

# Display background cone or art (boolean)
#qt-bgcone=1

# Expanding background cone or art (boolean)
#qt-bgcone-expands=0

# Maximum Volume displayed (integer)
#qt-max-volume=125

# Define the colors of the volume slider (string)
#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29
`

// vlcrc writes the real vlcrc with the Qt section, each edit replacing a
// default line the way VLC saves a changed preference (uncommented).
func vlcrc(t *testing.T, edits ...string) string {
	t.Helper()
	b, err := os.ReadFile(fixture("vlcrc"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b) + qtSection
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("vlcrc has no line %q", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	p := filepath.Join(t.TempDir(), "vlcrc")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeText(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVLCConfigMetrics(t *testing.T) {
	rule := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name, metric string
		file         string
		rules        map[string]any
		want         float64
	}{
		{"bgcone default", "check_qt_bgcone", vlcrc(t), rule("expected_qt_bgcone", 1.0), 1},
		{"bgcone default vs 0", "check_qt_bgcone", vlcrc(t), rule("expected_qt_bgcone", 0.0), 0},
		{"bgcone off", "check_qt_bgcone", vlcrc(t, "#qt-bgcone=1", "qt-bgcone=0"), rule("expected_qt_bgcone", 0.0), 1},
		{"bgcone-expands is another key", "check_qt_bgcone", vlcrc(t, "#qt-bgcone-expands=0", "qt-bgcone-expands=1"), rule("expected_qt_bgcone", 1.0), 1},
		{"max volume 200", "check_qt_max_volume", vlcrc(t, "#qt-max-volume=125", "qt-max-volume=200"), rule("expected_qt_max_volume", 200.0), 1},
		{"max volume default", "check_qt_max_volume", vlcrc(t), rule("expected_qt_max_volume", 200.0), 0},
		{"minimal view on", "check_qt_minimal_view", vlcrc(t, "#qt-minimal-view=0", "qt-minimal-view=1"), rule("expected_qt_minimal_view", 1.0), 1},
		{"minimal view off", "check_qt_minimal_view", vlcrc(t), rule("expected_qt_minimal_view", 1.0), 0},
		{"play and exit default", "check_play_and_exit", vlcrc(t), rule("expected_play_and_exit", 0.0), 1},
		{"play and exit on", "check_play_and_exit", vlcrc(t, "#play-and-exit=0", "play-and-exit=1"), rule("expected_play_and_exit", 0.0), 0},
		{"one instance off", "check_one_instance_when_started_from_file", vlcrc(t, "#one-instance-when-started-from-file=1", "one-instance-when-started-from-file=0"), rule("expected_one_instance_when_started_from_file", 0.0), 1},
		{"one instance default", "check_one_instance_when_started_from_file", vlcrc(t), rule("expected_one_instance_when_started_from_file", 0.0), 0},
		{"global play-pause set", "check_global_key_play_pause", vlcrc(t, "#global-key-play-pause=", "global-key-play-pause=Ctrl+Alt+p"), rule("expected_global_key_play_pause", 1.0), 1},
		{"global play-pause unset", "check_global_key_play_pause", vlcrc(t), rule("expected_global_key_play_pause", 1.0), 0},
		{"slider default not blackish", "check_qt_slider_colours", vlcrc(t), rule("type", "blackish"), 0},
		{"slider blackish", "check_qt_slider_colours", vlcrc(t, "#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29", "qt-slider-colours=0;0;0;20;20;20;50;50;50;99;99;99"), rule("type", "blackish"), 1},
		{"slider match", "check_qt_slider_colours", vlcrc(t, "#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29", "qt-slider-colours=1;2;3"), rule("type", "match", "expected_qt_slider_colours", "1;2;3"), 1},
		{"slider not numbers", "check_qt_slider_colours", vlcrc(t, "#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29", "qt-slider-colours=a;b;c"), rule("type", "blackish"), 0},
		{"record path set", "is_vlc_recordings_folder", vlcrc(t, "#input-record-path=", "input-record-path=/home/user/Desktop"), rule("recording_file_path", "/home/user/Desktop"), 1},
		{"record path other", "is_vlc_recordings_folder", vlcrc(t, "#input-record-path=", "input-record-path=/home/user"), rule("recording_file_path", "/home/user/Desktop"), 0},
		{"record path unset", "is_vlc_recordings_folder", vlcrc(t), rule("recording_file_path", "/home/user/Desktop"), 0},
		{"missing file", "check_qt_bgcone", filepath.Join(t.TempDir(), "none"), rule("expected_qt_bgcone", 1.0), 0},
		{"not utf-8", "check_qt_bgcone", writeText(t, "qt-bgcone=1\n\xff\xfe"), rule("expected_qt_bgcone", 1.0), 0},
	}
	table := Metrics()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := table[tt.metric].Fn(context.Background(), tt.file, tt.rules, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("%s got %v, %v; want %v", tt.metric, got, err, tt.want)
			}
		})
	}
}

func TestVLCPlaying(t *testing.T) {
	tests := []struct {
		name, file string
		rules      map[string]any
		want       float64
	}{
		{"file playing", "vlc-status-playing.xml", map[string]any{"type": "file_name", "file_name": "tone clip.mp4"}, 1},
		{"other file", "vlc-status-playing.xml", map[string]any{"type": "file_name", "file_name": "other.mp4"}, 0},
		{"paused", "vlc-status-paused.xml", map[string]any{"type": "file_name", "file_name": "tone clip.mp4"}, 0},
		// VLC shows a stream's file name only: OSWorld matches it against
		// the URL's last path segment.
		{"url by file name", "vlc-status-url.xml", map[string]any{"type": "url", "url": "http://127.0.0.1:18768/stream.mp4"}, 1},
		{"other url", "vlc-status-url.xml", map[string]any{"type": "url", "url": "http://127.0.0.1:18768/other.m3u8"}, 0},
		{"unknown type", "vlc-status-playing.xml", map[string]any{"type": "title"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricVLCPlaying(context.Background(), fixture(tt.file), tt.rules, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("is_vlc_playing got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "<root><state>playing", "<root></root>", "not xml"} {
		got, err := metricVLCPlaying(context.Background(), writeText(t, bad), map[string]any{"type": "file_name", "file_name": "x"}, true, nil)
		if err != nil || got != 0 {
			t.Errorf("is_vlc_playing(%q) got %v, %v; want 0", bad, got, err)
		}
	}
}

func TestVLCFullscreen(t *testing.T) {
	screen := map[string]any{"width": 1920.0, "height": 1080.0}
	tests := []struct {
		name   string
		window any
		want   float64
	}{
		{"fullscreen", map[string]any{"width": 1920.0, "height": 1080.0}, 1},
		{"windowed", map[string]any{"width": 800.0, "height": 600.0}, 0},
		{"no window", nil, 0},
		{"a boolean", map[string]any{"width": 1920.0, "height": true}, 0},
	}
	for _, tt := range tests {
		got, err := metricVLCFullscreen(context.Background(), screen, tt.window, true, nil)
		if err != nil || got != tt.want {
			t.Errorf("%s: is_vlc_fullscreen got %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	one := map[string]any{"width": 1.0, "height": true}
	if got, _ := metricVLCFullscreen(context.Background(), one, map[string]any{"width": true, "height": 1.0}, true, nil); got != 1 {
		t.Errorf("is_vlc_fullscreen(1 and True) = %v, want 1 as Python's == gives", got)
	}
}

// gimprc is the start of a gimprc as GIMP 2.10 writes it.
const gimprc = `# GIMP gimprc
#
# This is your personal gimprc file.  Any variable defined in this file takes
# precedence over the value defined in the system-wide gimprc.

(default-image
    (width 1920)
    (height 1080))
(undo-levels 100)
(theme "Light")
(layer-new-name "Square")
(hide-docks yes)

# end of gimprc
`

func TestGIMPConfigStatus(t *testing.T) {
	p := writeText(t, gimprc)
	tests := []struct {
		name  string
		rules map[string]any
		want  float64
	}{
		{"theme", map[string]any{"key": "theme", "value": `"Light"`}, 1},
		{"theme other", map[string]any{"key": "theme", "value": `"Dark"`}, 0},
		{"undo levels", map[string]any{"key": "undo-levels", "value": "100"}, 1},
		{"layer name", map[string]any{"key": "layer-new-name", "value": `"Square"`}, 1},
		{"two-word key", map[string]any{"key": []any{"default-image", "(width"}, "value": "1920"}, 0},
		{"nested value", map[string]any{"key": "width", "value": "1920"}, 1},
		{"absent", map[string]any{"key": "show-tips", "value": "no"}, 0},
	}
	for _, tt := range tests {
		got, err := metricGIMPConfigStatus(context.Background(), p, tt.rules, true, nil)
		if err != nil || got != tt.want {
			t.Errorf("%s: check_config_status got %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	// A line of spaces raises in OSWorld (items[0] of an empty list).
	spaces := writeText(t, "   \n(theme \"Light\")\n")
	if got, _ := metricGIMPConfigStatus(context.Background(), spaces, map[string]any{"key": "theme", "value": `"Light"`}, true, nil); got != 0 {
		t.Errorf("blank line first: got %v, want 0", got)
	}
}
