package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAccessibilityDeadline opens several GTK applications (mousepad and
// zenity dialogs, one a list of 400 rows) and checks that the whole
// /accessibility request has one deadline: every application is in a
// tree read within it, and one application frozen (SIGSTOP, so its D-Bus
// calls never answer) costs the walk one call timeout (2 s), not the
// request: the answer comes before the deadline, with the other
// applications in it, the frozen one skipped and the root marked
// truncated (what it would have shown is missing). Its calls used to
// wait 2 s each, one after another, so it held every answer to the
// deadline.
func TestAccessibilityDeadline(t *testing.T) {
	requireTools(t, "Xvfb", "openbox", "dbus-daemon", "mousepad", "zenity")
	// The deadline must leave room for a whole walk of the responsive
	// applications (400 list rows over D-Bus), which takes several seconds
	// under -race on a busy machine: the test is about the frozen one.
	const timeout = 6 * time.Second
	c := start(t, Config{Xvfb: true, Width: 1280, Height: 800, WindowManager: "openbox", SessionBus: true, A11yTimeout: timeout})

	rows := make([]string, 400)
	for i := range rows {
		rows[i] = fmt.Sprintf("row%03d", i)
	}
	launch := [][]string{
		{"mousepad"},
		append([]string{"zenity", "--list", "--title", "big list", "--column", "item", "--height", "700"}, rows...),
		{"zenity", "--entry", "--title", "entry dialog"},
	}
	for _, argv := range launch {
		if code, body := c.postJSON("/setup/launch", map[string]any{"command": argv}); code != 200 {
			t.Fatalf("launch %s: %d %s", argv[0], code, body)
		}
	}
	// The application to freeze: started from a shell so its pid is known.
	code, body := c.postJSON("/execute", map[string]any{"command": "zenity --info --title 'frozen dialog' --text hello >/dev/null 2>&1 & echo $!", "shell": true})
	var res struct{ Output string }
	if err := json.Unmarshal(body, &res); code != 200 || err != nil {
		t.Fatalf("start the dialog to freeze: %d %s", code, body)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Output))
	if err != nil {
		t.Fatalf("pid of the dialog: %q", res.Output)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	get := func() (tree string, took time.Duration) {
		t.Helper()
		t0 := time.Now()
		code, _, body := c.do(http.MethodGet, "/accessibility", "", nil)
		took = time.Since(t0)
		var res struct{ AT string }
		if err := json.Unmarshal(body, &res); code != 200 || err != nil {
			t.Fatalf("accessibility got %d %.300s", code, body)
		}
		return res.AT, took
	}
	want := []string{"Mousepad", "big list", "entry dialog", "frozen dialog", "row399"}
	missing := func(names string, want []string) []string {
		var out []string
		for _, w := range want {
			if !strings.Contains(names, w) {
				out = append(out, w)
			}
		}
		return out
	}

	// Every application, read within the deadline (wait for them to
	// register first).
	deadline := time.Now().Add(40 * time.Second)
	for {
		tree, took := get()
		_, names := parseTree(t, tree)
		miss := missing(names, want)
		if len(miss) == 0 && !strings.Contains(tree, `truncated="true"`) {
			t.Logf("complete tree of %d bytes, %d elements, in %v", len(tree), strings.Count(tree, "<")/2, took)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no complete tree with %v within 40s (last took %v, missing %v, truncated %v)", want, took, miss, strings.Contains(tree, `truncated="true"`))
		}
		time.Sleep(300 * time.Millisecond)
	}

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	tree, took := get()
	t.Logf("with a frozen application: %d bytes in %v", len(tree), took)
	if took >= timeout {
		t.Errorf("answer took %v: the frozen application held the walk to the %v deadline", took, timeout)
	}
	if !strings.Contains(tree, `truncated="true"`) {
		t.Errorf("root does not say truncated, though an application did not answer: %.300s", tree)
	}
	_, names := parseTree(t, tree)
	if miss := missing(names, []string{"Mousepad", "big list", "entry dialog", "row399"}); len(miss) > 0 {
		t.Errorf("the responsive applications are missing %v from the tree", miss)
	}
	if strings.Contains(names, "frozen dialog") {
		t.Errorf("the frozen application is in the tree")
	}
}
