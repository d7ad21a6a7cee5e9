package osworld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// startDesktopd builds and runs the real guest server, desktopd, on its own
// Xvfb with home as the guest user's home and any further flags, and
// returns a client of it.
func startDesktopd(t *testing.T, home string, flags ...string) *guest.Client {
	t.Helper()
	for _, prog := range []string{"go", "Xvfb", "openbox", "xterm"} {
		needProgram(t, prog)
	}
	// go test runs in the package's directory.
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "desktopd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/desktopd")
	build.Dir = filepath.Join(root, "guest", "desktopd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build desktopd: %v\n%s", err, out)
	}
	port := proctest.FreePort(t)
	args := append([]string{"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--xvfb", "--screen", "1280x720", "--home", home, "--log-level", "warn"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("desktopd at %s not ready within 60s", base)
		}
	}
	c, err := guest.New(base, "")
	if err != nil {
		t.Fatal(err)
	}
	c.RetryWait = 200 * time.Millisecond
	return c
}

// TestGettersOnDesktopd runs the OS getters against the real guest server
// (desktopd on Xvfb), over the routes and path expansion a VM's server
// has.
func TestGettersOnDesktopd(t *testing.T) {
	home := t.TempDir()
	files := map[string]string{
		"Desktop/game.desktop":       "[Desktop Entry]\nName=2048 Game\nExec=chromium https://play2048.co\n",
		"Desktop/notes.txt":          "not a shortcut\n",
		".config/vlc/vlcrc":          "[qt]\nqt-bgcone=0\n",
		".config/GIMP/2.10/gimprc":   "(theme \"Dark\")\n",
		"Desktop/cpjpg/a.jpg":        "jpg",
		"Desktop/cpjpg/sub/b.jpg":    "jpg",
		".config/GIMP/2.10/menurc":   "",
		"Documents/unrelated/c.docx": "docx",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gc := startDesktopd(t, home)
	s := &Session{Guest: gc, CacheDir: t.TempDir()}
	ctx := context.Background()
	get := func(cfg map[string]any) any {
		t.Helper()
		v, err := s.get(ctx, "result", cfg)
		if err != nil {
			t.Fatalf("get %v: %v", cfg["type"], err)
		}
		return v
	}
	cached := func(v any) string {
		t.Helper()
		p, ok := v.(string)
		if !ok {
			t.Fatalf("got %#v, want a cache path", v)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if got, want := get(map[string]any{"type": "shortcuts_on_desktop"}), map[string]any{"game.desktop": files["Desktop/game.desktop"]}; !reflect.DeepEqual(got, want) {
		t.Errorf("shortcuts_on_desktop = %v, want %v", got, want)
	}
	if got := cached(get(map[string]any{"type": "vlc_config", "dest": "vlcrc"})); got != files[".config/vlc/vlcrc"] {
		t.Errorf("vlc_config saved %q", got)
	}
	if got := cached(get(map[string]any{"type": "gimp_config_file", "file_name": "gimprc", "dest": "gimprc"})); got != files[".config/GIMP/2.10/gimprc"] {
		t.Errorf("gimp_config_file saved %q", got)
	}
	for _, name := range []string{"menurc", "sessionrc"} { // empty, missing
		if got := get(map[string]any{"type": "gimp_config_file", "file_name": name, "dest": name}); got != nil {
			t.Errorf("gimp_config_file of %s = %v, want nil", name, got)
		}
	}
	tree, _ := get(map[string]any{"type": "list_directory", "path": filepath.Join(home, "Desktop", "cpjpg")}).(map[string]any)
	var names []string
	children, _ := tree["children"].([]any)
	for _, c := range children {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"a.jpg", "sub"}) {
		t.Errorf("list_directory children %v, want [a.jpg sub]", names)
	}
	if got := get(map[string]any{"type": "list_directory", "path": filepath.Join(home, "nope")}); got != nil {
		t.Errorf("list_directory of a missing directory = %v, want nil", got)
	}
	if got := get(map[string]any{"type": "vm_command_error", "command": []any{"sh", "-c", "echo out; echo oops >&2"}}); got != "oops\n" {
		t.Errorf("vm_command_error = %q, want oops", got)
	}
	if got := get(map[string]any{"type": "vm_command_error", "command": "echo a | tr a b >&2", "shell": true}); got != "b\n" {
		t.Errorf("vm_command_error with shell = %q, want b", got)
	}
	// Output read as OSWorld's server reads it (text=True): universal
	// newlines, and None where it is not UTF-8 (a 500 there).
	if got := get(map[string]any{"type": "vm_command_line", "command": `printf 'a\r\nb\rc'`, "shell": true}); got != "a\nb\nc" {
		t.Errorf("vm_command_line with CR LF = %q, want a\\nb\\nc", got)
	}
	if got := get(map[string]any{"type": "vm_command_line", "command": `printf 'ok\377'`, "shell": true}); got != nil {
		t.Errorf("vm_command_line printing a byte that is not UTF-8 = %q, want nil", got)
	}
	if got := get(map[string]any{"type": "vm_command_error", "command": `printf '\377' >&2`, "shell": true}); got != nil {
		t.Errorf("vm_command_error printing a byte that is not UTF-8 = %q, want nil", got)
	}
	// A getter's None says why, in the notes the evaluator keeps beside the
	// metric's score (want is the note's start).
	for _, tt := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"type": "gimp_config_file", "file_name": "menurc", "dest": "menurc"},
			`the result getter "gimp_config_file" gave None: ~/.config/GIMP/2.10/menurc is empty`},
		{map[string]any{"type": "gimp_config_file", "file_name": "sessionrc", "dest": "sessionrc"},
			`the result getter "gimp_config_file" gave None: the guest has no ~/.config/GIMP/2.10/sessionrc`},
		{map[string]any{"type": "vm_file", "path": home + "/never-saved.xlsx", "dest": "a.xlsx"},
			`the result getter "vm_file" gave None: the guest has no file ` + home + `/never-saved.xlsx`},
		{map[string]any{"type": "content_from_vm_file", "path": home + "/Desktop/notes.txt", "file_type": "xlsx", "file_content": "last_row"},
			`the result getter "content_from_vm_file" gave None: ` + home + `/Desktop/notes.txt does not read as a workbook: `},
		{map[string]any{"type": "vm_command_line", "command": `printf 'ok\377'`, "shell": true},
			`the result getter "vm_command_line" gave None: the command's output is not UTF-8`},
		{map[string]any{"type": "vm_command_error", "command": `printf '\377' >&2`, "shell": true},
			`the result getter "vm_command_error" gave None: the guest answered /execute with 500: 'utf-8' codec can't decode byte 0xff in position 0`},
		{map[string]any{"type": "list_directory", "path": filepath.Join(home, "nope")},
			`the result getter "list_directory" gave None: the guest answered /list_directory with 400: Path not found: ` + home + `/nope`},
		{map[string]any{"type": "vm_window_size", "app_class_name": "vlc"},
			`the result getter "vm_window_size" gave None: the guest answered /window_size with 404: no window with WM_CLASS "vlc"`},
	} {
		nctx, notes := metric.WithNotes(ctx)
		v, err := s.get(nctx, "result", tt.cfg)
		if got := notes.List(); err != nil || v != nil || len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
			t.Errorf("%v: got %#v, %v, notes %q; want None with a note starting %q", tt.cfg["type"], v, err, got, tt.want)
		}
	}
	if got, want := get(map[string]any{"type": "vm_screen_size"}), map[string]any{"width": 1280.0, "height": 720.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("vm_screen_size = %v, want %v", got, want)
	}
	if got := get(map[string]any{"type": "vm_window_size", "app_class_name": "vlc"}); got != nil {
		t.Errorf("vm_window_size without the window = %v, want nil", got)
	}
	if err := s.Run(ctx, []Step{{Type: "launch", Parameters: json.RawMessage(`{"command": ["xterm"]}`)}}); err != nil {
		t.Fatal(err)
	}
	var size any
	for deadline := time.Now().Add(20 * time.Second); size == nil && time.Now().Before(deadline); {
		size = get(map[string]any{"type": "vm_window_size", "app_class_name": "xterm"})
	}
	if m, ok := size.(map[string]any); !ok || m["width"].(float64) <= 0 || m["height"].(float64) <= 0 {
		t.Errorf("vm_window_size of xterm = %v, want its size", size)
	}
	// desktopd serves only a wallpaper set through the guest API: none
	// here, so OSWorld's empty file.
	if got := cached(get(map[string]any{"type": "vm_wallpaper", "dest": "bg.png"})); got != "" {
		t.Errorf("vm_wallpaper without one saved %d bytes", len(got))
	}
	if tree, ok := get(map[string]any{"type": "accessibility_tree"}).(string); !ok || !strings.HasPrefix(strings.TrimSpace(tree), "<") {
		t.Errorf("accessibility_tree = %.200q, want XML", tree)
	}
	// A download step streams the stored file into the guest.
	big := strings.Repeat("0123456789abcdef", 1<<16)
	srv := newFileServer(t, map[string]string{"task.bin": big})
	s.Downloads = &dlcache.Cache{Dir: filepath.Join(t.TempDir(), "store")}
	dl := fmt.Sprintf(`{"files": [{"url": %q, "path": %q}]}`, srv.URL+"/task.bin", filepath.Join(home, "Desktop", "task.bin"))
	if err := s.Run(ctx, []Step{{Type: "download", Parameters: json.RawMessage(dl)}}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "Desktop", "task.bin")); err != nil || string(b) != big {
		t.Errorf("the guest holds %d bytes (%v), want the %d downloaded", len(b), err, len(big))
	}
	rules := map[string]any{"relativeTime": map[string]any{"from": "tomorrow"}, "expected": map[string]any{"time": "{Year}-{Month0D}-{Day0D}"}}
	got := get(map[string]any{"type": "rule_relativeTime", "rules": rules}).(map[string]any)["expected"].(map[string]any)["time"]
	// The guest is this machine; allow for midnight passing meanwhile.
	now := time.Now()
	if got != now.AddDate(0, 0, 1).Format("2006-01-02") && got != now.Format("2006-01-02") {
		t.Errorf("rule_relativeTime tomorrow = %v, want %s", got, now.AddDate(0, 0, 1).Format("2006-01-02"))
	}
}

// TestActivateWindowOnDesktopd: config activate_window steps on the real
// guest server end with the named window active, checked through xprop as
// the runner does, and a window launched in the step before is waited for.
func TestActivateWindowOnDesktopd(t *testing.T) {
	needProgram(t, "xprop")
	needProgram(t, "wmctrl")
	c := startDesktopd(t, t.TempDir())
	s := &Session{Guest: c, CacheDir: t.TempDir()}
	ctx := context.Background()
	steps := []Step{
		{Type: "launch", Parameters: json.RawMessage(`{"command": ["xterm", "-title", "first window"]}`)},
		{Type: "launch", Parameters: json.RawMessage(`{"command": ["xterm", "-title", "second window"]}`)},
		{Type: "activate_window", Parameters: json.RawMessage(`{"window_name": "first window"}`)},
	}
	t0 := time.Now()
	if err := s.Run(ctx, steps); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Logf("launch, launch, activate_window took %v", time.Since(t0))
	for _, name := range []string{"second window", "first window", "XTerm"} {
		byClass := name == "XTerm"
		p, _ := json.Marshal(map[string]any{"window_name": name, "by_class": byClass})
		if err := s.Run(ctx, []Step{{Type: "activate_window", Parameters: p}}); err != nil {
			t.Fatalf("activate %s: %v", name, err)
		}
		w, err := s.activeWindow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !w.matches(name, false, byClass) {
			t.Errorf("after activate_window %q the active window is %v", name, w)
		}
	}
}
