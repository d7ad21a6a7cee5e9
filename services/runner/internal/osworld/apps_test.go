package osworld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestRelativeTimeMatchesOSWorld replays cases that OSWorld's own
// get_rule_relativeTime computed (testdata/apps_relative_time.json: every
// relative name, in ranges and alone, on each weekday and across month and
// year ends, all placeholders). Two cases raise there, December computed
// as month 0; here they give December.
func TestRelativeTimeMatchesOSWorld(t *testing.T) {
	b, err := os.ReadFile("testdata/apps_relative_time.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Today string         `json:"today"`
		Rules map[string]any `json:"rules"`
		Want  any            `json:"want"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	defer func(f func() time.Time) { timeNow = f }(timeNow)
	for _, c := range cases {
		rel := c.Rules["relativeTime"].(map[string]any)
		t.Run(fmt.Sprintf("%s/%v-%v", c.Today, rel["from"], rel["to"]), func(t *testing.T) {
			day, err := time.Parse("2006-01-02", c.Today)
			if err != nil {
				t.Fatal(err)
			}
			timeNow = func() time.Time { return day.Add(10 * time.Hour) }
			cfg := map[string]any{"type": "rule_relativeTime", "rules": c.Rules}
			before, _ := json.Marshal(cfg)
			got, err := getRuleRelativeTime(context.Background(), &Session{}, cfg)
			if after, _ := json.Marshal(cfg); string(after) != string(before) {
				t.Errorf("the task's rules changed: %s", after)
			}
			if msg, ok := c.Want.(string); ok {
				// OSWorld raises ValueError for December; we give it.
				if !strings.HasPrefix(msg, "error: ValueError") || err != nil {
					t.Fatalf("got %v, %v; OSWorld: %s", got, err, msg)
				}
				tm := got.(map[string]any)["expected"].(map[string]any)["time"].(string)
				if !strings.HasPrefix(tm, "Mon, Dec 07, 2026|") {
					t.Errorf("time = %q, want the first Monday of December 2026", tm)
				}
				return
			}
			if err != nil {
				t.Fatalf("getRuleRelativeTime: %v", err)
			}
			if !reflect.DeepEqual(got, c.Want) {
				t.Errorf("got  %v\nwant %v", got, c.Want)
			}
		})
	}
}

// TestRelativeTimeGuestDate: without a time zone in the task, today is the
// guest's local date.
func TestRelativeTimeGuestDate(t *testing.T) {
	g, gc := newTestGuest(t)
	g.exec = func(command any, shell bool) guest.ExecResult {
		if fmt.Sprint(command) != "[date +%Y-%m-%dT%H:%M:%S%:z]" {
			return guest.ExecResult{ReturnCode: 127}
		}
		return guest.ExecResult{Output: "2026-11-28T23:30:00+09:00\n"}
	}
	cfg := map[string]any{"rules": map[string]any{
		"relativeTime": map[string]any{"from": "tomorrow"},
		"expected":     map[string]any{"time": "{DoW}, {Month} {Day0D}, {Year}", "start": "JFK"},
	}}
	got, err := getRuleRelativeTime(context.Background(), &Session{Guest: gc}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"time": "Sun, Nov 29, 2026", "start": "JFK"}
	if e := got.(map[string]any)["expected"]; !reflect.DeepEqual(e, want) {
		t.Errorf("expected = %v, want %v", e, want)
	}
}

func TestRelativeTimeRefusesUnknown(t *testing.T) {
	for _, rel := range []map[string]any{
		{"from": "yesterday"},
		{"from": "this Saturday"}, // known, but not computed alone: OSWorld raises
		{"from": "tomorrow", "to": "someday"},
		{"from": "5th next month", "to": "this Sunday"},
	} {
		cfg := map[string]any{"rules": map[string]any{"relativeTime": rel, "timezone": "UTC", "expected": map[string]any{"time": "x", "from": "x", "to": "x"}}}
		if got, err := getRuleRelativeTime(context.Background(), &Session{}, cfg); err == nil {
			t.Errorf("relativeTime %v = %v, want an error", rel, got)
		}
	}
}

// jsonRoute answers a route with a status and a JSON body.
func jsonRoute(status int, body any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func TestOSGetters(t *testing.T) {
	tree := map[string]any{"type": "directory", "name": "Desktop", "children": []any{
		map[string]any{"type": "file", "name": "game.desktop"},
		map[string]any{"type": "file", "name": "notes.txt"},
	}}
	tests := []struct {
		name   string
		routes map[string]http.HandlerFunc
		exec   func(command any, shell bool) guest.ExecResult
		files  map[string]string
		cfg    map[string]any
		want   any // a string starting with "cache:" is a cache file whose content follows
	}{
		{name: "command error", cfg: map[string]any{"type": "vm_command_error", "command": []any{"python", "-c", "import x"}},
			exec: func(c any, shell bool) guest.ExecResult {
				return guest.ExecResult{Output: "out", Error: fmt.Sprintf("ModuleNotFoundError %v %v", c, shell)}
			},
			want: "ModuleNotFoundError [python -c import x] false"},
		{name: "command error shell string", cfg: map[string]any{"type": "vm_command_error", "command": "ls x", "shell": "true"},
			exec: func(c any, shell bool) guest.ExecResult {
				return guest.ExecResult{Error: fmt.Sprintf("%v %v", c, shell)}
			},
			want: "ls x true"},
		{name: "terminal", routes: map[string]http.HandlerFunc{"/terminal": jsonRoute(200, map[string]any{"output": "$ ls\n", "status": "success"})},
			cfg: map[string]any{"type": "vm_terminal_output"}, want: "$ ls\n"},
		{name: "terminal none", routes: map[string]http.HandlerFunc{"/terminal": jsonRoute(200, map[string]any{"output": nil, "status": "success"})},
			cfg: map[string]any{"type": "vm_terminal_output"}, want: nil},
		{name: "terminal refused", routes: map[string]http.HandlerFunc{"/terminal": jsonRoute(500, map[string]any{"status": "error"})},
			cfg: map[string]any{"type": "vm_terminal_output"}, want: nil},
		{name: "list directory", routes: map[string]http.HandlerFunc{"/list_directory": jsonRoute(200, map[string]any{"directory_tree": tree})},
			cfg: map[string]any{"type": "list_directory", "path": "/home/user/Desktop"}, want: tree},
		{name: "list directory missing", routes: map[string]http.HandlerFunc{"/list_directory": jsonRoute(400, map[string]any{"error": "Path not found"})},
			cfg: map[string]any{"type": "list_directory", "path": "/nope"}, want: nil},
		{name: "screen size", routes: map[string]http.HandlerFunc{"/screen_size": jsonRoute(200, map[string]any{"width": 1920, "height": 1080})},
			cfg: map[string]any{"type": "vm_screen_size"}, want: map[string]any{"width": 1920.0, "height": 1080.0}},
		{name: "window size", routes: map[string]http.HandlerFunc{"/window_size": func(w http.ResponseWriter, r *http.Request) {
			if r.FormValue("app_class_name") != "vlc" {
				jsonRoute(404, map[string]any{"error": "no window"})(w, r)
				return
			}
			jsonRoute(200, map[string]any{"width": 1920, "height": 1053})(w, r)
		}}, cfg: map[string]any{"type": "vm_window_size", "app_class_name": "vlc"}, want: map[string]any{"width": 1920.0, "height": 1053.0}},
		{name: "window size none", routes: map[string]http.HandlerFunc{"/window_size": jsonRoute(500, map[string]any{"error": "None"})},
			cfg: map[string]any{"type": "vm_window_size", "app_class_name": "vlc"}, want: nil},
		{name: "wallpaper", routes: map[string]http.HandlerFunc{"/wallpaper": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("\x89PNG...")) }},
			cfg: map[string]any{"type": "vm_wallpaper", "dest": "bg.png"}, want: "cache:bg.png:\x89PNG..."},
		{name: "wallpaper none", routes: map[string]http.HandlerFunc{"/wallpaper": jsonRoute(404, map[string]any{"error": "Wallpaper not set"})},
			cfg: map[string]any{"type": "vm_wallpaper", "dest": "bg.png"}, want: "cache:bg.png:"},
		{name: "accessibility", routes: map[string]http.HandlerFunc{"/accessibility": jsonRoute(200, map[string]any{"AT": "<desktop-frame/>"})},
			cfg: map[string]any{"type": "accessibility_tree"}, want: "<desktop-frame/>"},
		{name: "shortcuts", routes: map[string]http.HandlerFunc{
			"/desktop_path":   jsonRoute(200, map[string]any{"desktop_path": "/home/user/Desktop"}),
			"/list_directory": jsonRoute(200, map[string]any{"directory_tree": tree}),
		},
			files: map[string]string{"~/Desktop/game.desktop": "[Desktop Entry]\nName=2048 Game\n"},
			cfg:   map[string]any{"type": "shortcuts_on_desktop"}, want: map[string]any{"game.desktop": "[Desktop Entry]\nName=2048 Game\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			g.exec, g.extra = tt.exec, tt.routes
			for p, b := range tt.files {
				g.files[p] = []byte(b)
			}
			s := &Session{Guest: gc, CacheDir: t.TempDir()}
			got, err := s.get(context.Background(), "result", tt.cfg)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if w, ok := tt.want.(string); ok && strings.HasPrefix(w, "cache:") {
				name, content, _ := strings.Cut(strings.TrimPrefix(w, "cache:"), ":")
				b, _ := os.ReadFile(filepath.Join(s.CacheDir, name))
				if got != filepath.Join(s.CacheDir, name) || string(b) != content {
					t.Errorf("get = %v holding %q, want cache/%s holding %q", got, b, name, content)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("get = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestConfigFileGetters(t *testing.T) {
	// The guest server expands "~" in /file paths.
	g, gc := newTestGuest(t)
	g.files["~/.config/vlc/vlcrc"] = []byte("[qt]\nqt-bgcone=0\n")
	g.files["~/.config/GIMP/2.10/gimprc"] = []byte("(default-image-width 800)\n")
	g.files["~/.config/GIMP/2.10/sessionrc"] = []byte{}
	s := &Session{Guest: gc, CacheDir: t.TempDir()}
	tests := []struct {
		cfg     map[string]any
		want    any
		content string
	}{
		{map[string]any{"type": "vlc_config", "dest": "vlcrc"}, filepath.Join(s.CacheDir, "vlcrc"), "[qt]\nqt-bgcone=0\n"},
		{map[string]any{"type": "gimp_config_file", "file_name": "gimprc", "dest": "gimprc"}, filepath.Join(s.CacheDir, "gimprc"), "(default-image-width 800)\n"},
		{map[string]any{"type": "gimp_config_file", "file_name": "sessionrc", "dest": "sessionrc"}, nil, ""},
		{map[string]any{"type": "gimp_config_file", "file_name": "menurc", "dest": "menurc"}, nil, ""},
	}
	for _, tt := range tests {
		got, err := s.get(context.Background(), "result", tt.cfg)
		if err != nil {
			t.Errorf("get(%v): %v", tt.cfg, err)
			continue
		}
		if got != tt.want {
			t.Errorf("get(%v) = %v, want %v", tt.cfg, got, tt.want)
			continue
		}
		if p, ok := got.(string); ok {
			if b, _ := os.ReadFile(p); string(b) != tt.content {
				t.Errorf("get(%v) saved %q, want %q", tt.cfg, b, tt.content)
			}
		}
	}
	delete(g.files, "~/.config/vlc/vlcrc")
	if got, err := s.get(context.Background(), "result", map[string]any{"type": "vlc_config", "dest": "vlcrc2"}); err == nil {
		t.Errorf("vlc_config without vlcrc = %v, want an error (OSWorld raises)", got)
	}
}

func TestDefaultVideoPlayer(t *testing.T) {
	// Types answer a until a has 40 votes, then b until b has 40; the rest
	// answer nothing.
	count := map[string]int{}
	for _, typ := range videoTypes {
		count[typ]++
	}
	tie := map[string]string{}
	votes := map[string]int{}
	for _, typ := range videoTypes {
		if _, seen := tie[typ]; seen {
			continue
		}
		tie[typ] = ""
		for _, app := range []string{"a.desktop\n", "b.desktop\n"} {
			if votes[app]+count[typ] <= 40 {
				tie[typ] = app
				votes[app] += count[typ]
				break
			}
		}
	}
	tests := []struct {
		name   string
		answer func(typ string) string
		want   string
	}{
		{"vlc everywhere", func(string) string { return "vlc.desktop\n" }, "vlc.desktop\n"},
		{"majority", func(typ string) string {
			if strings.HasPrefix(typ, "x-") {
				return "vlc.desktop\n"
			}
			return "org.gnome.Totem.desktop\n"
		}, "vlc.desktop\n"},
		// 3gp comes first: on a tie the first answer seen wins.
		{"tie", func(typ string) string { return tie[typ] }, "a.desktop\n"},
		{"none", func(string) string { return "" }, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			var typesA, typesB int
			g.exec = func(c any, shell bool) guest.ExecResult {
				l := c.([]any)
				typ := strings.TrimPrefix(l[3].(string), "video/")
				out := tt.answer(typ)
				if out == "a.desktop\n" {
					typesA++
				} else if out == "b.desktop\n" {
					typesB++
				}
				return guest.ExecResult{Output: out}
			}
			got, err := getDefaultVideoPlayer(context.Background(), &Session{Guest: gc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "tie" && typesA != typesB {
				t.Fatalf("the tie case is not a tie: %d vs %d", typesA, typesB)
			}
			if got != tt.want {
				t.Errorf("default_video_player = %q, want %q", got, tt.want)
			}
			if n := g.count("/execute"); n != len(videoTypes) {
				t.Errorf("%d commands, want %d", n, len(videoTypes))
			}
		})
	}
}

func TestVSCodeConfig(t *testing.T) {
	cfg := map[string]any{"type": "vscode_config", "vscode_extension_command": "OpenProject", "path": "/home/user/OpenProject.txt", "dest": "OpenProject.txt"}
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			g, gc := newTestGuest(t)
			var calls []string
			g.exec = func(c any, shell bool) guest.ExecResult {
				calls = append(calls, fmt.Sprint(c))
				if s, ok := c.(string); ok && shell && strings.Contains(s, "workspaceStorage") {
					return guest.ExecResult{Output: `{"folder": "file:///home/user/project"}`}
				}
				return guest.ExecResult{}
			}
			g.extra["/setup/activate_window"] = func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }
			if written {
				g.files["/home/user/OpenProject.txt"] = []byte("/home/user/project\n")
			}
			var slept time.Duration
			s := &Session{Guest: gc, CacheDir: t.TempDir(), Sleep: func(_ context.Context, d time.Duration) error { slept += d; return nil }}
			got, err := s.get(context.Background(), "result", cfg)
			if err != nil {
				t.Fatal(err)
			}
			wantCalls := []string{
				"[python -c " + pyPrefix + "pyautogui.hotkey('ctrl', 'shift', 'p')]",
				"[python -c " + pyPrefix + "pyautogui.typewrite('OpenProject')]",
				"[python -c " + pyPrefix + "pyautogui.press('enter')]",
			}
			content := "/home/user/project\n"
			if !written {
				wantCalls = append(wantCalls, vscodeWorkspaceScan)
				content = `{"folder": "file:///home/user/project"}`
			}
			if !reflect.DeepEqual(calls, wantCalls) {
				t.Errorf("commands %q, want %q", calls, wantCalls)
			}
			if g.count("/setup/activate_window") != 1 || slept != 1500*time.Millisecond {
				t.Errorf("%d activations and %s of sleep, want 1 and 1.5s", g.count("/setup/activate_window"), slept)
			}
			b, _ := os.ReadFile(filepath.Join(s.CacheDir, "OpenProject.txt"))
			if got != filepath.Join(s.CacheDir, "OpenProject.txt") || string(b) != content {
				t.Errorf("vscode_config = %v holding %q, want the cache file holding %q", got, b, content)
			}
		})
	}
}

func TestSourceStringOrList(t *testing.T) {
	tests := []struct {
		src  string
		want Sources
	}{
		{`"https://a"`, Sources{"https://a"}},
		{`["https://a", "https://b"]`, Sources{"https://a", "https://b"}},
		{`""`, nil},
		{`null`, nil},
	}
	for _, tt := range tests {
		task, err := ParseTask([]byte(`{"instruction":"x","source":` + tt.src + `,"evaluator":{"func":"infeasible"}}`))
		if err != nil {
			t.Errorf("source %s: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(task.Source, tt.want) {
			t.Errorf("source %s = %q, want %q", tt.src, task.Source, tt.want)
		}
	}
	if _, err := ParseTask([]byte(`{"instruction":"x","source":{"a":1},"evaluator":{"func":"infeasible"}}`)); err == nil {
		t.Errorf("an object source parsed")
	}
}

// TestPublishedTasksParse parses every task of OSWorld's published set
// and lists each one's download URLs. OSWorld's task files are not ours to
// ship, so it runs only when $OSWORLD_REF names a checkout holding them
// (as the table family's differential test does).
func TestPublishedTasksParse(t *testing.T) {
	ref := os.Getenv("OSWORLD_REF")
	if ref == "" {
		t.Skip("OSWORLD_REF is not set: the published tasks are not in this repository")
	}
	files, _ := filepath.Glob(filepath.Join(ref, "evaluation_examples", "examples", "*", "*.json"))
	if len(files) == 0 {
		t.Fatalf("OSWORLD_REF=%s holds no evaluation_examples/examples/*/*.json", ref)
	}
	urls := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		task, err := ParseTask(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		urls += len(task.DownloadURLs())
	}
	if urls == 0 {
		t.Errorf("no download URLs in %d tasks", len(files))
	}
}

// TestCommandOutcome: the guest's 500s that answer what a command did (it
// outlived its timeout, or printed bytes that are not UTF-8) are
// OSWorld's None; any other failure to run a command is an error.
func TestCommandOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&guest.HTTPError{Status: 500, Body: `{"status":"error","message":"'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"}`}, true},
		{&guest.HTTPError{Status: 500, Body: `{"status":"error","message":"Command '['sleep', '200']' timed out after 120 seconds"}`}, true},
		{&guest.HTTPError{Status: 500, Body: `{"status":"error","message":"[Errno 2] No such file or directory: 'gsettings'"}`}, false},
		{&guest.HTTPError{Status: 400, Body: "timed out after"}, false},
		{fmt.Errorf("dial: connection refused"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := commandOutcome(tt.err); (got != "") != tt.want {
			t.Errorf("commandOutcome(%v) = %q, want an outcome: %v", tt.err, got, tt.want)
		}
	}
}
