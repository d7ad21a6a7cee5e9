package osworld

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestOpenWindowNeverAppears: an open step whose window never appears
// fails within the session's bound, naming what was opened, as a setup
// failure rather than an unreachable guest; it used to wait for the
// guest's 1800 s. The program opened is on desktopd's PATH and never maps
// a window.
func TestOpenWindowNeverAppears(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "rm-no-window"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	c := startDesktopd(t, t.TempDir())
	const bound = 3 * time.Second
	s := &Session{Guest: c, CacheDir: t.TempDir(), WindowWait: bound}
	t0 := time.Now()
	err := runSteps(t, s, `[{"type": "open", "parameters": {"path": "rm-no-window"}}]`)
	took := time.Since(t0)
	if err == nil {
		t.Fatal("open of a program without a window succeeded")
	}
	t.Logf("after %v: %v", took, err)
	if !strings.Contains(err.Error(), "step 0 (open): no window for rm-no-window appeared within 3s") {
		t.Errorf("error %q does not name the step, the file and the bound", err)
	}
	if errors.Is(err, env.ErrGuestUnreachable) {
		t.Errorf("error %q says the guest is unreachable; the guest answered, the window did not appear", err)
	}
	if took > bound+5*time.Second {
		t.Errorf("the step took %v, want about its %v bound", took, bound)
	}
	// The guest is still usable: the wait ended on its side too.
	if _, err := c.Execute(context.Background(), []string{"true"}, false, true); err != nil {
		t.Errorf("the guest after the open step: %v", err)
	}
}

// wmctrlTitles lists the titles of the windows the window manager lists.
func wmctrlTitles(t *testing.T, c *guest.Client) string {
	t.Helper()
	res, err := c.Execute(context.Background(), []string{"wmctrl", "-l"}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	return res.Output
}

// waitTitles polls wmctrl -l until present(titles) holds, at most 30 s.
func waitTitles(t *testing.T, c *guest.Client, what string, present func(titles string) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		titles := wmctrlTitles(t, c)
		if present(titles) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within 30s; wmctrl -l:\n%s", what, titles)
		}
	}
}

// TestCloseWindowOnDesktopd: close_window closes the window named by title
// or by class on the real guest server; a window that is not there is
// passed over, as OSWorld's postconfig does (the agent may have closed it).
func TestCloseWindowOnDesktopd(t *testing.T) {
	needProgram(t, "wmctrl")
	c := startDesktopd(t, t.TempDir())
	s := &Session{Guest: c, CacheDir: t.TempDir()}
	if err := runSteps(t, s, `[{"type": "launch", "parameters": {"command": ["xterm", "-title", "first to close"]}},
		{"type": "launch", "parameters": {"command": ["xterm", "-title", "second to close"]}}]`); err != nil {
		t.Fatal(err)
	}
	waitTitles(t, c, "the two xterms did not appear", func(l string) bool {
		return strings.Contains(l, "first to close") && strings.Contains(l, "second to close")
	})

	if err := runSteps(t, s, `[{"type": "close_window", "parameters": {"window_name": "first to close", "strict": true}}]`); err != nil {
		t.Fatalf("close_window by title: %v", err)
	}
	waitTitles(t, c, "the window closed by title is still there", func(l string) bool {
		return !strings.Contains(l, "first to close") && strings.Contains(l, "second to close")
	})

	if err := runSteps(t, s, `[{"type": "close_window", "parameters": {"window_name": "XTerm", "by_class": true}}]`); err != nil {
		t.Fatalf("close_window by class: %v", err)
	}
	waitTitles(t, c, "the window closed by class is still there", func(l string) bool {
		return !strings.Contains(l, "second to close")
	})

	if err := runSteps(t, s, `[{"type": "close_window", "parameters": {"window_name": "no such window"}}]`); err != nil {
		t.Errorf("close_window of a missing window: %v, want it passed over", err)
	}
}

// TestExecuteWithVerificationOnDesktopd: the step runs its command with the
// placeholders filled and succeeds once the verification holds (a window
// with the title, a command that succeeds); a verification that never holds
// fails the step with the guest's reason.
func TestExecuteWithVerificationOnDesktopd(t *testing.T) {
	c := startDesktopd(t, t.TempDir())
	s := &Session{Guest: c, CacheDir: t.TempDir(), ScreenWidth: 1280, ScreenHeight: 720}
	marker := filepath.Join(t.TempDir(), "made")
	tests := []struct {
		name    string
		params  string
		wantErr string
	}{
		{name: "window appears", params: `{"command": "xterm -title 'verified {SCREEN_WIDTH}x{SCREEN_HEIGHT}' >/dev/null 2>&1 &", "shell": true,
			"verification": {"window_exists": "verified 1280x720"}, "max_wait_time": 30, "check_interval": 0.2}`},
		{name: "command succeeds", params: `{"command": ["touch", "` + marker + `"],
			"verification": {"command_success": ["test", "-f", "` + marker + `"]}, "max_wait_time": 10, "check_interval": 0.2}`},
		{name: "never verified", params: `{"command": ["true"], "verification": {"window_exists": "no window has this title"}, "max_wait_time": 1, "check_interval": 0.2}`,
			wantErr: "verification did not pass within 1 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runSteps(t, s, `[{"type": "execute_with_verification", "parameters": `+tt.params+`}]`)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("step failed: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("step error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if !strings.Contains(wmctrlTitles(t, c), "verified 1280x720") {
		t.Errorf("the verified window is not listed")
	}
}

// TestCacheFileGetter: cache_file reads what a postconfig command saved
// in the episode's cache (its "stdout" file), as published tasks use it
// (grep.out, apt.out, wmctrl.out), here from the real guest server; a file
// the cache lacks is an environment error naming it, never a 0, and a path
// cannot leave the cache.
func TestCacheFileGetter(t *testing.T) {
	c := startDesktopd(t, t.TempDir())
	cache := t.TempDir()
	s := &Session{Guest: c, CacheDir: cache}
	task, err := ParseTask([]byte(`{"id": "cache-file", "instruction": "x", "evaluator": {
		"postconfig": [{"type": "command", "parameters": {"command": ["sh", "-c", "echo first line; echo COMPANY.msf"], "stdout": "grep.out"}}],
		"func": "check_list", "result": {"type": "cache_file", "path": "grep.out"},
		"expected": {"type": "rule", "rules": {"expect": ["^first line$", "\\bCOMPANY\\.msf\\b"], "unexpect": ["UNIVERSITY"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, err := s.Evaluate(ctx, task, env.EvalInput{})
	if err != nil || ev.Score != 1 {
		t.Fatalf("evaluate: score %v, error %v; want 1", ev.Score, err)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "grep.out")); err != nil || string(b) != "first line\nCOMPANY.msf\n" {
		t.Errorf("cache/grep.out = %q (%v)", b, err)
	}

	tests := []struct {
		name, path string
		want       string // the cache file's path, or "" for an error
	}{
		{"saved", "grep.out", filepath.Join(cache, "grep.out")},
		{"missing", "apt.out", ""},
		{"escape", "../../grep.out", filepath.Join(cache, "grep.out")},
		{"escape to a missing file", "../../../etc/passwd", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.get(ctx, "result", map[string]any{"type": "cache_file", "path": tt.path})
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Errorf("cache_file %q = %v, %v; want %s", tt.path, got, err, tt.want)
				}
				return
			}
			if err == nil || !errors.Is(err, env.ErrEnvironment) {
				t.Errorf("cache_file %q = %v, %v; want an environment error", tt.path, got, err)
			}
		})
	}
}

// TestActivateWindowOfSlowProgram launches, on a real desktopd, a program
// that maps its window only after the step's first bound (a cold start),
// and checks the activate_window step waited for it: the window is the
// active one when the step returns. The program (on desktopd's PATH)
// sleeps, then runs xterm and waits for it, so the process launched keeps
// its name and never owns the window itself.
func TestActivateWindowOfSlowProgram(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nsleep 4\nxterm -T rm-slow-window -e sleep 60 &\nwait\n"
	if err := os.WriteFile(filepath.Join(bin, "rm-slow-window"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	c := startDesktopd(t, t.TempDir())
	s := &Session{Guest: c, CacheDir: t.TempDir(), WindowWait: 30 * time.Second, appearWait: time.Second}
	t0 := time.Now()
	err := runSteps(t, s, `[{"type": "launch", "parameters": {"command": ["rm-slow-window"]}},
		{"type": "activate_window", "parameters": {"window_name": "rm-slow-window", "strict": true}}]`)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	w, err := s.activeWindow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if w.Title != "rm-slow-window" {
		t.Errorf("after %v the active window is %v, want the slow program's (the step gave up at its first bound?)", took, w)
	}
	if took < 4*time.Second {
		t.Errorf("the steps took %v, less than the program's own 4 s start", took)
	}
}

// TestExecuteStepOutputNotText: an execute step whose command prints
// bytes that are not UTF-8 ran; OSWorld's server answers 500 for it and
// OSWorld's setup goes on, as the runner does. With "until", that answer
// is a failed try.
func TestExecuteStepOutputNotText(t *testing.T) {
	c := startDesktopd(t, t.TempDir())
	s := &Session{Guest: c, CacheDir: t.TempDir()}
	marker := filepath.Join(t.TempDir(), "ran")
	if err := runSteps(t, s, `[{"type": "execute", "parameters": {"command": "touch `+marker+`; printf '\\377'", "shell": true}}]`); err != nil {
		t.Fatalf("step failed: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
	err := runSteps(t, s, `[{"type": "execute", "parameters": {"command": "printf '\\377'", "shell": true, "until": {"returncode": 0}}}]`)
	if err == nil || !strings.Contains(err.Error(), "codec can't decode") {
		t.Errorf("until over output that is not UTF-8: %v, want the guest's 500", err)
	}
}
