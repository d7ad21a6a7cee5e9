package osworld

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

func TestTreeTruncated(t *testing.T) {
	tests := []struct {
		name, tree string
		want       bool
	}{
		{"complete", `<desktop-frame xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes" source="atspi"><application name="x"/></desktop-frame>`, false},
		{"truncated", `<desktop-frame xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes" source="atspi" truncated="true"><application name="x"/></desktop-frame>`, true},
		{"truncated and empty", `<desktop-frame source="atspi" truncated="true"/>`, true},
		{"marked false", `<desktop-frame truncated="false"/>`, false},
		{"only a child marked", `<desktop-frame><application truncated="true"/></desktop-frame>`, false},
		{"namespaced attribute", `<desktop-frame xmlns:attr="u" attr:truncated="true"/>`, false},
		{"after a prolog", "<?xml version=\"1.0\"?>\n<desktop-frame truncated=\"true\"/>", true},
		{"empty", ``, false},
		{"not xml", `<<<`, false},
	}
	for _, tt := range tests {
		if got := treeTruncated(tt.tree); got != tt.want {
			t.Errorf("%s: treeTruncated = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPartialInputsFailEvaluation: a task whose getter reads a truncated
// accessibility tree or directory listing fails as an environment error
// naming the input (the episode's env_error), where it used to be scored
// on the part read, a silent 0. The same tasks on complete answers score
// 1, so the failure is the truncation's.
func TestPartialInputsFailEvaluation(t *testing.T) {
	const thunderbird = `<application name="Thunderbird"><page-tab name="About Profiles"/></application>`
	const chrome = `<application name="Google Chrome"><entry name="Address and search bar">example.com/a</entry></application>`
	frame := func(truncated bool, apps string) map[string]any {
		mark := ""
		if truncated {
			mark = ` truncated="true"`
		}
		return map[string]any{"AT": `<desktop-frame source="atspi"` + mark + `>` + apps + `</desktop-frame>`}
	}
	listing := func(truncated bool) map[string]any {
		tree := map[string]any{"type": "directory", "name": "photos", "children": []any{map[string]any{"type": "file", "name": "a.jpg"}}}
		if truncated {
			tree["truncated"] = true
		}
		return map[string]any{"directory_tree": tree}
	}
	const treeTask = `{"func": "check_accessibility_tree", "result": {"type": "accessibility_tree"},
		"expected": {"type": "rule", "rules": [{"selectors": ["application[name=Thunderbird] page-tab[name=\"About Profiles\"]"]}]}}`
	const urlTask = `{"func": "exact_match", "result": {"type": "active_url_from_accessTree", "goto_prefix": "https://"},
		"expected": {"type": "rule", "rules": {"expected": "https://example.com/a"}}}`
	const listTask = `{"func": "check_moved_jpgs", "result": {"type": "list_directory", "path": "/home/user/photos"},
		"expected": {"type": "rule", "rules": {"expected": ["a.jpg"]}}}`
	tests := []struct {
		name      string
		evaluator string
		route     string
		complete  any // the answer when complete; the truncated one below
		truncated any
		wantIn    string
	}{
		{"accessibility_tree", treeTask, "/accessibility", frame(false, thunderbird), frame(true, `<application name="Mousepad"/>`), "accessibility tree"},
		{"active_url_from_accessTree", urlTask, "/accessibility", frame(false, chrome), frame(true, chrome), "accessibility tree"},
		{"list_directory", listTask, "/list_directory", listing(false), listing(true), "listing of /home/user/photos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, err := ParseTask([]byte(`{"id": "partial", "instruction": "x", "evaluator": ` + tt.evaluator + `}`))
			if err != nil {
				t.Fatal(err)
			}
			for _, truncated := range []bool{false, true} {
				g, gc := newTestGuest(t)
				answer := tt.complete
				if truncated {
					answer = tt.truncated
				}
				g.extra[tt.route] = jsonRoute(http.StatusOK, answer)
				s := &Session{Guest: gc, CacheDir: t.TempDir()}
				ev, err := s.Evaluate(context.Background(), task, env.EvalInput{})
				if !truncated {
					if err != nil || ev.Score != 1 {
						t.Fatalf("complete answer: score %v, error %v; want 1", ev.Score, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("truncated answer scored %v, want an environment error", ev.Score)
				}
				if !errors.Is(err, env.ErrEnvironment) || !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), tt.wantIn) {
					t.Errorf("truncated answer: error %q, want an environment error (ErrPartial) naming %q", err, tt.wantIn)
				}
			}
		})
	}
}

// TestTruncatedTreeOnDesktopd: the real guest server with a short
// accessibility deadline and an application that stops answering D-Bus
// (SIGSTOP) answers a tree marked truncated; the accessibility_tree getter
// refuses it instead of handing the metric the part read.
func TestTruncatedTreeOnDesktopd(t *testing.T) {
	needProgram(t, "zenity")
	needProgram(t, "dbus-daemon")
	gc := startDesktopd(t, t.TempDir(), "--a11y-timeout", "2s")
	s := &Session{Guest: gc, CacheDir: t.TempDir()}
	ctx := context.Background()
	res, err := gc.Execute(ctx, "zenity --info --title 'frozen dialog' --text hello >/dev/null 2>&1 & echo $!", true, true)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Output))
	if err != nil {
		t.Fatalf("pid of the dialog: %q", res.Output)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = syscall.Kill(pid, syscall.SIGTERM)
	})
	// The dialog registers on the accessibility bus shortly after it maps.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		tree, err := gc.Accessibility(ctx)
		if err == nil && strings.Contains(tree, "frozen dialog") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dialog is not in the accessibility tree within 60s (%v): %.300s", err, tree)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, err = s.get(ctx, "result", map[string]any{"type": "accessibility_tree"})
	if !errors.Is(err, env.ErrEnvironment) || !errors.Is(err, ErrPartial) {
		t.Fatalf("accessibility_tree with a frozen application: %v, want an environment error (ErrPartial)", err)
	}
	t.Logf("refused: %v", err)
}
