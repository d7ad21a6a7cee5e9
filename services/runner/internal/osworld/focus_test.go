package osworld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

func TestParseXprop(t *testing.T) {
	tests := []struct {
		in   string
		want activeWindow
	}{
		{"none\n", activeWindow{None: true}},
		{"_NET_WM_NAME = \"Untitled 1 - Mousepad\"\nWM_NAME = \"Untitled 1\"\nWM_CLASS = \"mousepad\", \"Mousepad\"\n",
			activeWindow{Title: "Untitled 1 - Mousepad", Instance: "mousepad", Class: "Mousepad"}},
		// xprop does not escape quotes inside a value.
		{"_NET_WM_NAME:  not found.\nWM_NAME = \"héllo \"q\" - Chrome\"\nWM_CLASS = \"xterm\", \"XTerm\"\n",
			activeWindow{Title: `héllo "q" - Chrome`, Instance: "xterm", Class: "XTerm"}},
		{"WM_NAME:  not found.\n", activeWindow{}},
	}
	for _, tt := range tests {
		if got := parseXprop(tt.in); got != tt.want {
			t.Errorf("parseXprop(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestFieldsThenRest(t *testing.T) {
	f, rest := fieldsThenRest("0x01e00003  0 libreoffice.libreoffice-calc  host a.xlsx -  LibreOffice Calc", 4)
	if want := []string{"0x01e00003", "0", "libreoffice.libreoffice-calc", "host"}; !reflect.DeepEqual(f, want) || rest != "a.xlsx -  LibreOffice Calc" {
		t.Errorf("got %q %q", f, rest)
	}
	if f, rest := fieldsThenRest("0x1 0 a.b", 4); len(f) != 3 || rest != "" {
		t.Errorf("short line: got %q %q", f, rest)
	}
}

// TestActivateWindowWaitsForFocus runs config activate_window steps against
// a guest whose window appears late, takes the focus late, never does, or
// cannot be asked, and checks each ends as it should: done once the window
// is active, a clear error when a listed window never takes the focus, and
// OSWorld's silent pass when no window matches.
func TestActivateWindowWaitsForFocus(t *testing.T) {
	const calc = "a.xlsx - LibreOffice Calc"
	xpropOf := func(title string) string {
		return fmt.Sprintf("_NET_WM_NAME = %q\nWM_CLASS = \"libreoffice\", \"libreoffice-calc\"\n", title)
	}
	tests := []struct {
		name        string
		missingFor  int    // activations answered 404 first (-1: always)
		focusAfter  int    // active-window reads before the window is active (-1: never)
		xpropRC     int    // exit code of the active-window script
		wmctrl      string // wmctrl -lx output
		wantErr     string
		wantActMin  int
		wantActMax  int
		wantReadMax int
	}{
		{name: "focused at once", wantActMin: 1, wantActMax: 1, wantReadMax: 1},
		{name: "focus after a few polls", focusAfter: 3, wantActMin: 1, wantActMax: 1, wantReadMax: 4},
		{name: "window appears late", missingFor: 5, wantActMin: 6, wantActMax: 6, wantReadMax: 1},
		// One activation per poll, and a last look at the bound.
		{name: "window never appears", missingFor: -1, wantActMin: int(windowAppearWait/windowPoll) + 2, wantActMax: int(windowAppearWait/windowPoll) + 2},
		{name: "listed window never takes the focus", focusAfter: -1,
			wmctrl:  "0x01e00003  0 libreoffice.libreoffice-calc  host " + calc + "\n0x0040000c  0 xterm.XTerm  host bash\n",
			wantErr: "never became the active window", wantActMin: 2, wantActMax: 10, wantReadMax: int(windowFocusWait/windowPoll) + 1},
		{name: "stock server: 200 but no such window", focusAfter: -1, wmctrl: "0x0040000c  0 xterm.XTerm  host bash\n",
			wantActMin: 2, wantActMax: 10, wantReadMax: int(windowFocusWait/windowPoll) + 1},
		{name: "no xprop in the guest", xpropRC: 3, wantActMin: 1, wantActMax: 1, wantReadMax: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			var activations, reads atomic.Int32
			g.extra["/setup/activate_window"] = func(w http.ResponseWriter, r *http.Request) {
				var req map[string]any
				_ = json.NewDecoder(r.Body).Decode(&req)
				n := int(activations.Add(1))
				if req["window_name"] != calc || req["strict"] != true {
					t.Errorf("activation of %v", req)
				}
				if tt.missingFor < 0 || n <= tt.missingFor {
					http.Error(w, `{"error":"no window matches"}`, http.StatusNotFound)
					return
				}
				_, _ = w.Write([]byte("Window activated successfully"))
			}
			g.exec = func(c any, shell bool) guest.ExecResult {
				argv := fmt.Sprint(c)
				if strings.HasPrefix(argv, "[wmctrl -lx]") {
					return guest.ExecResult{Output: tt.wmctrl}
				}
				if !strings.Contains(argv, "_NET_ACTIVE_WINDOW") {
					t.Errorf("unexpected command %s", argv)
				}
				n := int(reads.Add(1))
				if tt.xpropRC != 0 {
					return guest.ExecResult{ReturnCode: tt.xpropRC, Error: "xprop: not found"}
				}
				if tt.focusAfter < 0 || n <= tt.focusAfter {
					return guest.ExecResult{Output: xpropOf("bash")}
				}
				return guest.ExecResult{Output: xpropOf(calc)}
			}
			var slept time.Duration
			s := &Session{Guest: gc, CacheDir: t.TempDir(), Sleep: func(_ context.Context, d time.Duration) error { slept += d; return nil }}
			err := s.Run(context.Background(), []Step{{Type: "activate_window", Parameters: json.RawMessage(`{"window_name": "` + calc + `", "strict": true}`)}})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if a := int(activations.Load()); a < tt.wantActMin || a > tt.wantActMax {
				t.Errorf("%d activations, want %d..%d", a, tt.wantActMin, tt.wantActMax)
			}
			if r := int(reads.Load()); r > tt.wantReadMax {
				t.Errorf("%d active-window reads, want at most %d", r, tt.wantReadMax)
			}
			if limit := windowAppearWait + windowFocusWait + time.Second; slept > limit {
				t.Errorf("slept %v, more than %v", slept, limit)
			}
		})
	}

	t.Run("postconfig is best effort", func(t *testing.T) {
		g, gc := newTestGuest(t)
		g.extra["/setup/activate_window"] = func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"no window matches"}`, http.StatusNotFound)
		}
		s := &Session{Guest: gc, CacheDir: t.TempDir(), Sleep: func(context.Context, time.Duration) error { return nil }}
		s.postconfig = true
		if err := s.Run(context.Background(), []Step{{Type: "activate_window", Parameters: json.RawMessage(`{"window_name": "gone"}`)}}); err != nil {
			t.Fatal(err)
		}
		if n := g.count("/setup/activate_window"); n != 1 {
			t.Errorf("%d activations, want 1 (no waiting after the agent)", n)
		}
		if n := g.count("/setup/execute"); n != 0 {
			t.Errorf("%d commands, want none", n)
		}
	})
}

// TestActivateWindowWaitsForLaunchedProgram runs a launch step and an
// activate_window step against a guest whose window is missing past
// windowAppearWait, and checks the wait goes on only while the launched
// program runs without a window of its own, up to the session's
// windowWait.
func TestActivateWindowWaitsForLaunchedProgram(t *testing.T) {
	const bound = 50 * time.Second // the session's windowWait
	tests := []struct {
		name       string
		appearsAt  time.Duration // when the window first matches (0: never)
		running    bool          // pgrep finds the launched program
		ownWindow  bool          // wmctrl -lp lists a window of its pid
		lateMap    bool          // the window matches once wmctrl -lp has listed it
		wantWaited time.Duration // how long the step polled, to windowPoll
		wantFocus  bool          // the step found the window and read the focus
	}{
		{name: "slow start: the window appears at 40 s", appearsAt: 40 * time.Second, running: true, wantWaited: 40 * time.Second, wantFocus: true},
		{name: "the window maps as the first bound ends", running: true, ownWindow: true, lateMap: true, wantWaited: windowAppearWait, wantFocus: true},
		{name: "still starting at the bound", running: true, wantWaited: bound},
		{name: "program up with another window", running: true, ownWindow: true, wantWaited: windowAppearWait},
		{name: "program exited", wantWaited: windowAppearWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			// Read by the guest's handler, written by the session's sleep.
			var waited atomic.Int64
			var launched atomic.Value
			var listed atomic.Bool // wmctrl -lp answered with the program's window
			var reads atomic.Int32
			g.extra["/setup/launch"] = func(w http.ResponseWriter, r *http.Request) {
				var req map[string]any
				_ = json.NewDecoder(r.Body).Decode(&req)
				launched.Store(fmt.Sprint(req["command"]))
				_, _ = w.Write([]byte("launched"))
			}
			g.extra["/setup/activate_window"] = func(w http.ResponseWriter, r *http.Request) {
				appeared := tt.appearsAt != 0 && time.Duration(waited.Load()) >= tt.appearsAt || tt.lateMap && listed.Load()
				if !appeared {
					http.Error(w, `{"error":"no window matches"}`, http.StatusNotFound)
					return
				}
				_, _ = w.Write([]byte("Window activated successfully"))
			}
			g.exec = func(c any, shell bool) guest.ExecResult {
				switch argv := fmt.Sprint(c); argv {
				case "[pgrep -x -- mousepad]":
					if !tt.running {
						return guest.ExecResult{ReturnCode: 1}
					}
					return guest.ExecResult{Output: "4242\n"}
				case "[wmctrl -lp]":
					out := "0x0040000c  0 977  host bash\n"
					if tt.ownWindow {
						out += "0x01e00003  0 4242  host Untitled 1 - Mousepad\n"
						listed.Store(true)
					}
					return guest.ExecResult{Output: out}
				default:
					if !strings.Contains(argv, "_NET_ACTIVE_WINDOW") {
						t.Errorf("unexpected command %s", argv)
					}
					reads.Add(1)
					return guest.ExecResult{Output: "_NET_WM_NAME = \"note.txt - Mousepad\"\nWM_CLASS = \"mousepad\", \"Mousepad\"\n"}
				}
			}
			s := &Session{Guest: gc, CacheDir: t.TempDir(), WindowWait: bound,
				Sleep: func(_ context.Context, d time.Duration) error { waited.Add(int64(d)); return nil }}
			err := s.Run(context.Background(), []Step{
				{Type: "launch", Parameters: json.RawMessage(`{"command": ["/usr/bin/mousepad", "~/note.txt"]}`)},
				{Type: "activate_window", Parameters: json.RawMessage(`{"window_name": "mousepad", "by_class": true}`)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := launched.Load(); got != "[/usr/bin/mousepad ~/note.txt]" {
				t.Errorf("launched %v", got)
			}
			if got := time.Duration(waited.Load()); got < tt.wantWaited || got > tt.wantWaited+windowPoll {
				t.Errorf("waited %v for the window, want %v", got, tt.wantWaited)
			}
			if got := reads.Load() > 0; got != tt.wantFocus {
				t.Errorf("read the active window: %v, want %v (whether the step found the window)", got, tt.wantFocus)
			}
		})
	}
}

func TestProcessName(t *testing.T) {
	tests := []struct {
		cmd  any
		want string
	}{
		{[]string{"/usr/bin/mousepad", "a.txt"}, "mousepad"},
		{[]string{"libreoffice", "--writer"}, "libreoffice"},
		{"gnome-terminal --maximize", "gnome-terminal"},
		{[]string{"/opt/app/a-very-long-program-name"}, "a-very-long-pro"},
		{"FOO=1 app", ""},
		{"(cd /tmp && app)", ""},
		{[]string{}, ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := processName(tt.cmd); got != tt.want {
			t.Errorf("processName(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}
