package osworld

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/chrome"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// chromeGuest is a guest whose "VM" is this machine: files live under a
// temporary home, and Chrome is a real headless Chromium whose profile is
// that home's ~/.config/google-chrome.
type chromeGuest struct {
	home   string
	addr   string
	tree   string
	mu     sync.Mutex
	shells []string
	// launchErr is Launch's answer: a guest that cannot start Chrome again.
	launchErr error
}

func (g *chromeGuest) local(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(g.home, rest)
	}
	return p
}

func (g *chromeGuest) Execute(_ context.Context, command any, shell, _ bool) (guest.ExecResult, error) {
	if l, ok := command.([]string); ok && len(l) == 3 && l[0] == "python3" && strings.Contains(l[2], "expanduser('~')") {
		return guest.ExecResult{Output: g.home + "\nx86_64\n"}, nil
	}
	if l, ok := command.([]string); ok && shell && len(l) == 1 {
		g.mu.Lock()
		g.shells = append(g.shells, l[0])
		g.mu.Unlock()
		return guest.ExecResult{}, nil
	}
	return guest.ExecResult{}, fmt.Errorf("unexpected command %v", command)
}

func (g *chromeGuest) ExecuteWithVerification(context.Context, map[string]any) error { return nil }
func (g *chromeGuest) Launch(context.Context, any, bool) error                       { return g.launchErr }
func (g *chromeGuest) OpenFile(context.Context, string) error                        { return nil }
func (g *chromeGuest) Window(context.Context, string, string, bool, bool) error      { return nil }

func (g *chromeGuest) Upload(_ context.Context, p string, data []byte) error {
	p = g.local(p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func (g *chromeGuest) File(_ context.Context, p string) ([]byte, error) {
	data, err := os.ReadFile(g.local(p))
	if os.IsNotExist(err) {
		return nil, &guest.HTTPError{Path: "/file", Status: http.StatusNotFound, Body: `{"error":"File not found"}`}
	}
	return data, err
}

func (g *chromeGuest) Accessibility(context.Context) (string, error) { return g.tree, nil }
func (g *chromeGuest) ChromeAddr() string                            { return g.addr }

// startChromium starts Debian's chromium headless with its profile in the
// guest's home, or fails (CI set) or skips without it.
func startChromium(t *testing.T, g *chromeGuest) func() {
	t.Helper()
	bin := needProgram(t, "chromium")
	args := []string{"--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--user-data-dir=" + filepath.Join(g.home, ".config/google-chrome"),
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "about:blank"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox")
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "DevTools listening on ws://"); ok {
				select {
				case found <- rest[:strings.IndexByte(rest, '/')]:
				default:
				}
			}
		}
	}()
	select {
	case g.addr = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not open its DevTools port within 30s")
	}
	return stop
}

func shop(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "cart", Value: "1", Path: "/", Expires: time.Now().Add(time.Hour)})
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/profile":
			fmt.Fprint(w, `<!DOCTYPE html><html><body><h1 id="name">Yann  LeCun</h1><a id="top" href="/paper">Deep learning</a></body></html>`)
			return
		case "/paper":
			fmt.Fprint(w, `<!DOCTYPE html><html><body><div id="links"><a class="pdf" href="https://hal.science/doc">PDF</a></div></body></html>`)
			return
		}
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>Shop %s</title></head><body><div class=\"cart\">The Dota 2 Official Soundtrack</div></body></html>", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func evalTask(t *testing.T, s *Session, evaluator string) (float64, map[string]any) {
	t.Helper()
	task, err := ParseTask([]byte(`{"id": "chrome-test", "instruction": "x", "evaluator": ` + evaluator + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if kind, name, bad := task.Unsupported(); bad {
		t.Fatalf("unsupported %s %s", kind, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ev, err := s.Evaluate(ctx, task, env.EvalInput{})
	if err != nil {
		t.Fatal(err)
	}
	return ev.Score, ev.Details
}

func runSteps(t *testing.T, s *Session, steps string) error {
	t.Helper()
	var l []Step
	if err := json.Unmarshal([]byte(steps), &l); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return s.Run(ctx, l)
}

func TestChromeTabsStepsGettersMetrics(t *testing.T) {
	g := &chromeGuest{home: t.TempDir()}
	stopChrome := startChromium(t, g)
	srv := shop(t)
	s := &Session{Guest: g, TaskID: "chrome-test", CacheDir: t.TempDir(), Sleep: func(context.Context, time.Duration) error { return nil }}

	a, b, c := srv.URL+"/a", srv.URL+"/b", srv.URL+"/c"
	if err := runSteps(t, s, fmt.Sprintf(`[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [%q, %q, %q]}},
		{"type": "chrome_close_tabs", "parameters": {"urls_to_close": [%q]}}]`, a, b, c, b)); err != nil {
		t.Fatal(err)
	}
	score, details := evalTask(t, s, fmt.Sprintf(`{"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
		"expected": {"type": "rule", "rules": {"type": "url", "urls": [%q, %q]}}}`, c, a))
	if score != 1 {
		t.Errorf("is_expected_tabs after opening a, b, c and closing b = %v, details %v", score, details)
	}

	score, details = evalTask(t, s, fmt.Sprintf(`{"func": "is_added_to_steam_cart", "result": {"type": "page_info", "url": %q},
		"expected": {"type": "rule", "rules": {"items": ["The Dota 2 Official Soundtrack"]}}}`, srv.URL+"/cart/"))
	if score != 1 {
		t.Errorf("is_added_to_steam_cart on page_info = %v, details %v", score, details)
	}

	// The address bar shows the URL without its scheme; goto_prefix adds it.
	host := strings.TrimPrefix(srv.URL, "http://")
	g.tree = `<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">` +
		`<application name="gnome-shell"><entry name="Address and search bar">wrong.example</entry></application>` +
		`<application name="Google Chrome"><frame name="Shop - Google Chrome"><panel>` +
		`<entry name="Address and search bar" st:focused="true">` + host + `/search?q=dota+2&amp;category=music</entry>` +
		`</panel></frame></application></desktop-frame>`
	for _, tt := range []struct {
		name, evaluator string
	}{
		{"url pattern", fmt.Sprintf(`{"func": "is_expected_url_pattern_match",
			"result": {"type": "active_url_from_accessTree", "goto_prefix": "http://"},
			"expected": {"type": "rule", "rules": {"expected": ["/search\\?q=dota\\+2", "category=music$"]}}}`)},
		{"active tab info", fmt.Sprintf(`{"func": "is_expected_active_tab",
			"result": {"type": "active_tab_info", "goto_prefix": "http://"},
			"expected": {"type": "rule", "rules": {"type": "url", "url": %q}}}`, srv.URL+"/search?q=dota+2&category=music")},
		{"url parse", `{"func": "check_direct_json_object",
			"result": {"type": "active_tab_url_parse", "goto_prefix": "http://", "parse_keys": ["q", "category"], "replace": {"q": "query"}},
			"expected": {"type": "rule", "rules": {"expected": {"query": "dota 2", "category": "music"}}}}`},
		{"dash part", `{"func": "exact_match",
			"result": {"type": "url_dashPart", "goto_prefix": "http://", "partIndex": 3, "needDeleteId": true, "returnType": "string"},
			"expected": {"type": "rule", "rules": {"expected": "search"}}}`},
	} {
		if score, details := evalTask(t, s, tt.evaluator); score != 1 {
			t.Errorf("%s: score %v, details %v", tt.name, score, details)
		}
	}

	// active_tab_html_parse reads the open tab that shows the active URL.
	if err := runSteps(t, s, fmt.Sprintf(`[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [%q]}}]`,
		srv.URL+"/search?q=dota+2&category=music")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, evaluator string
	}{
		{"html parse class", `{"func": "check_direct_json_object",
			"result": {"type": "active_tab_html_parse", "goto_prefix": "http://", "category": "class",
				"class_singleObject": {"cart": "item"}, "class_multiObject": {"cart": {"0": "first", "3": "missing"}}},
			"expected": {"type": "rule", "rules": {"expected": {"item": "The Dota 2 Official Soundtrack", "first": "The Dota 2 Official Soundtrack", "missing": ""}}}}`},
		{"html parse xpath", `{"func": "check_direct_json_object",
			"result": {"type": "active_tab_html_parse", "goto_prefix": "http://", "category": "xpath",
				"xpathObject": {"//div[@class='cart']": "item", "/html/body/p": "none", "//[": "bad"}},
			"expected": {"type": "rule", "rules": {"expected": {"item": "The Dota 2 Official Soundtrack", "none": "", "bad": ""}}}}`},
		{"html parse class&url", `{"func": "check_direct_json_object",
			"result": {"type": "active_tab_html_parse", "goto_prefix": "http://", "category": "class&url",
				"class_multiObject": {"cart": ["the dota 2 official soundtrack"]}, "url_include_expected": ["Music", "video"]},
			"expected": {"type": "rule", "rules": {"expected": {"the dota 2 official soundtrack": true, "is_other_exist": false, "music": true, "video": false}}}}`},
	} {
		if score, details := evalTask(t, s, tt.evaluator); score != 1 {
			t.Errorf("%s: score %v, details %v", tt.name, score, details)
		}
	}

	ctx := context.Background()
	got, err := s.get(ctx, "result", map[string]any{"type": "info_from_website", "url": srv.URL + "/profile",
		"infos": []any{
			map[string]any{"action": "inner_text", "selector": "#name"},
			map[string]any{"action": "click_and_attribute", "selector": []any{"#top", "#links > a.pdf"}, "attribute": "href"},
		},
		"backups": []any{"backup"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{"Yann LeCun", "https://hal.science/doc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("info_from_website = %#v, want %#v", got, want)
	}
	got, err = s.get(ctx, "result", map[string]any{"type": "info_from_website", "url": srv.URL + "/profile",
		"infos": []any{map[string]any{"action": "inner_text", "selector": "#absent"}}, "backups": []any{"backup"}})
	if err != nil || !reflect.DeepEqual(got, []any{"backup"}) {
		t.Errorf("info_from_website without the element = %#v, %v; want the backups", got, err)
	}

	if mode, err := s.get(ctx, "result", map[string]any{"type": "chrome_appearance_mode_ui"}); err != nil || mode != "light" {
		t.Errorf("chrome_appearance_mode_ui of a fresh profile = %v, %v; want light (the classic theme)", mode, err)
	}

	pdf, err := s.get(ctx, "result", map[string]any{"type": "pdf_from_url", "path": srv.URL + "/cart/", "dest": "cart.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(pdf.(string)); err != nil || !bytes.HasPrefix(data, []byte("%PDF-")) || len(data) <= len(pdfPlaceholder) {
		t.Errorf("pdf_from_url wrote %d bytes (%v), want a printed PDF", len(data), err)
	}

	// Chrome writes History and Cookies as it goes and when it stops.
	stopChrome()
	score, details = evalTask(t, s, `{"func": "check_history_deleted", "result": {"type": "history", "dest": "history.sqlite"},
		"expected": {"type": "rule", "rules": {"type": "keywords", "keywords": ["/cart/"]}}}`)
	if score != 0 {
		t.Errorf("check_history_deleted with the cart page in History = %v, details %v", score, details)
	}
	score, details = evalTask(t, s, `{"func": "is_cookie_deleted", "result": {"type": "cookie_data", "dest": "Cookies"},
		"expected": {"type": "rule", "rules": {"type": "domains", "domains": ["127.0.0.1"]}}}`)
	if score != 0 {
		t.Errorf("is_cookie_deleted with the shop's cookie present = %v, details %v", score, details)
	}
	score, details = evalTask(t, s, `{"func": "is_cookie_deleted", "result": {"type": "cookie_data", "dest": "Cookies"},
		"expected": {"type": "rule", "rules": {"type": "domains", "domains": [".amazon.com"]}}}`)
	if score != 1 {
		t.Errorf("is_cookie_deleted for a domain never visited = %v, details %v", score, details)
	}

	// update_browse_history writes into the cached empty History (here a
	// copy of the one Chromium made) and uploads it to the profile.
	hist := filepath.Join(g.home, ".config/google-chrome", chrome.HistoryFile)
	data, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.CacheDir, "history_new.sqlite"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runSteps(t, s, `[{"type": "update_browse_history", "parameters": {"history": [
		{"url": "https://www.youtube.com/watch?v=1", "title": "YouTube", "visit_time_from_now_in_seconds": 3600}]}}]`); err != nil {
		t.Fatal(err)
	}
	score, details = evalTask(t, s, `{"func": "check_history_deleted", "result": {"type": "history", "dest": "history2.sqlite"},
		"expected": {"type": "rule", "rules": {"type": "keywords", "keywords": ["youtube"]}}}`)
	if score != 0 {
		t.Errorf("check_history_deleted after update_browse_history added youtube = %v, details %v", score, details)
	}
	if !slices.ContainsFunc(g.shells, func(c string) bool {
		return strings.HasPrefix(c, "sudo chown -R user:user ") && strings.HasSuffix(c, "/Default/History")
	}) {
		t.Errorf("update_browse_history did not hand History back to the user: %q", g.shells)
	}
}

func TestChromeProfileGetters(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close() // no Chrome answers here
	g := &chromeGuest{home: t.TempDir(), addr: closed.Addr().String()}
	s := &Session{Guest: g, TaskID: "chrome-test", CacheDir: t.TempDir(), Sleep: func(context.Context, time.Duration) error { return nil }}
	ctx := context.Background()
	get := func(cfg map[string]any) any {
		t.Helper()
		v, err := s.get(ctx, "result", cfg)
		if err != nil {
			t.Fatalf("%v: %v", cfg, err)
		}
		return v
	}
	// No profile at all: OSWorld's fallbacks.
	for typ, want := range map[string]any{
		"default_search_engine": "Google", "profile_name": nil, "enable_do_not_track": "false",
		"bookmarks": []any{}, "new_startup_page": "Google",
	} {
		if got := get(map[string]any{"type": typ}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s without a profile = %#v, want %#v", typ, got, want)
		}
	}
	if got := get(map[string]any{"type": "history", "dest": "h.sqlite"}); got != nil {
		t.Errorf("history without a profile = %#v, want nil", got)
	}
	prof := filepath.Join(g.home, ".config/google-chrome/Default")
	if err := os.MkdirAll(prof, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(prof, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Preferences", `{"profile": {"name": "Thomas"}, "webkit": {"webprefs": {"default_font_size": 24}},
		"extensions": {"settings": {"x": {"path": "/home/user/helloExtension", "manifest": {"name": "Hello"}}}}}`)
	write("Bookmarks", `{"roots": {"bookmark_bar": {"type": "folder", "children": [{"type": "folder", "name": "Favorites", "children": []}]}}}`)
	write("History", "this is not a database")
	for _, tt := range []struct {
		name, evaluator string
	}{
		{"profile name", `{"func": "exact_match", "result": {"type": "profile_name"}, "expected": {"type": "rule", "rules": {"expected": "Thomas"}}}`},
		{"font size", `{"func": "check_font_size", "result": {"type": "chrome_font_size"}, "expected": {"type": "rule", "rules": {"type": "range", "min": 16, "max": 99999}}}`},
		{"bookmarks", `{"func": "is_expected_bookmarks", "result": {"type": "bookmarks"}, "expected": {"type": "rule", "rules": {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}}}`},
		{"extension names", `{"func": "is_expected_installed_extensions", "result": {"type": "find_installed_extension_name"}, "expected": {"type": "rule", "rules": {"expected": ["Hello"]}}}`},
	} {
		if score, details := evalTask(t, s, tt.evaluator); score != 1 {
			t.Errorf("%s: score %v, details %v", tt.name, score, details)
		}
	}
	// A Preferences file that does not read gives OSWorld's fallback, and
	// the getter says why.
	write("Preferences", `{"profile": {"name": "Thom`)
	ctx, notes := metric.WithNotes(context.Background())
	if got, err := s.get(ctx, "result", map[string]any{"type": "default_search_engine"}); err != nil || got != "Google" {
		t.Errorf("default_search_engine from a cut Preferences = %#v, %v; want Google", got, err)
	}
	const note = `the result getter "default_search_engine": Chrome's Default/Preferences: not JSON (unexpected end of JSON input); OSWorld's fallback Google stands in`
	if n := notes.List(); len(n) != 1 || n[0] != note {
		t.Errorf("notes %q; want [%q]", n, note)
	}
	write("Preferences", `[1]`)
	ctx, notes = metric.WithNotes(context.Background())
	if got, _ := s.get(ctx, "result", map[string]any{"type": "profile_name"}); got != nil {
		t.Errorf("profile_name from an array = %#v, want nil", got)
	}
	if n := notes.List(); len(n) != 1 || n[0] != `the result getter "profile_name" gave None: Chrome's Default/Preferences: a JSON array, not an object; OSWorld's fallback None stands in` {
		t.Errorf("notes %q; want one on the array", n)
	}
	// Without Chrome, the appearance comes from Preferences.
	write("Preferences", `{"browser": {"theme": {"color_scheme2": 2}}}`)
	if mode := get(map[string]any{"type": "chrome_appearance_mode_ui"}); mode != "dark" {
		t.Errorf("chrome_appearance_mode_ui from Preferences = %v, want dark", mode)
	}
	// Five reads that each raise: OSWorld's "system", with the reason.
	write("Preferences", `{"browser": {"theme": 7}}`)
	ctx, notes = metric.WithNotes(context.Background())
	if got, err := s.get(ctx, "result", map[string]any{"type": "chrome_appearance_mode_ui"}); err != nil || got != "system" {
		t.Errorf("chrome_appearance_mode_ui from an unreadable theme = %#v, %v; want system", got, err)
	}
	if n := notes.List(); len(n) != 1 || n[0] != `the result getter "chrome_appearance_mode_ui": Chrome's Default/Preferences: browser.theme is a JSON number, not an object; OSWorld's fallback system stands in` {
		t.Errorf("notes %q; want one on the theme", n)
	}
	// A corrupt History database is None, which scores 0.
	if score, _ := evalTask(t, s, `{"func": "check_history_deleted", "result": {"type": "history", "dest": "h.sqlite"}, "expected": {"type": "rule", "rules": {"type": "keywords", "keywords": ["x"]}}}`); score != 0 {
		t.Errorf("check_history_deleted on a corrupt History = %v, want 0", score)
	}
}

func TestChromeStepUnreachableDevTools(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	g := &chromeGuest{home: t.TempDir(), addr: addr}
	s := &Session{Guest: g, TaskID: "chrome-test", CacheDir: t.TempDir(), Sleep: func(context.Context, time.Duration) error { return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err = s.Run(ctx, []Step{{Type: "chrome_open_tabs", Parameters: json.RawMessage(`{"urls_to_open": ["https://example.com"]}`)}})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("chrome_open_tabs with nothing on %s: err = %v, want an error naming the address", addr, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("chrome_open_tabs took %s past a 2s deadline", d)
	}
}

// TestChromeGettersNoteStandIns: where Chrome does not answer, the getters
// that answer with OSWorld's stand-ins (the task's backups, a "Connection
// failed" page, no tabs) say so in the metric's notes, so that a 0 scored
// on a stand-in is not read as the agent's.
func TestChromeGettersNoteStandIns(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	g := &chromeGuest{home: t.TempDir(), addr: addr, launchErr: errors.New("no display")}
	s := &Session{Guest: g, TaskID: "chrome-test", CacheDir: t.TempDir(), Sleep: func(context.Context, time.Duration) error { return nil }}
	backups := []any{"A backup"}
	tests := []struct {
		cfg  map[string]any
		want any
		note string // the note's start
	}{
		{map[string]any{"type": "page_info", "url": "https://example.com/"},
			map[string]any{"title": "Connection failed", "url": "https://example.com/", "content": ""},
			`the result getter "page_info": Chrome did not answer: `},
		{map[string]any{"type": "open_tabs_info"}, []any{}, `the result getter "open_tabs_info": Chrome did not answer: `},
		{map[string]any{"type": "info_from_website", "url": "https://example.com/", "backups": backups,
			"infos": []any{map[string]any{"action": "inner_text", "selector": "h1"}}},
			backups, `the result getter "info_from_website": Chrome did not answer (`},
		{map[string]any{"type": "info_from_website", "url": "https://example.com/", "backups": backups, "infos": []any{"h1"}},
			backups, `the result getter "info_from_website": an entry of infos is not an object; the task's backups stand in`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.cfg["type"]), func(t *testing.T) {
			t.Parallel()
			ctx, notes := metric.WithNotes(context.Background())
			got, err := s.get(ctx, "result", tt.cfg)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, tt.want)
			}
			if n := notes.List(); len(n) != 1 || !strings.HasPrefix(n[0], tt.note) {
				t.Errorf("notes %q; want one starting %q", n, tt.note)
			}
		})
	}
}

func TestAddressBarTexts(t *testing.T) {
	tests := []struct {
		name, tree string
		want       []string
	}{
		{"chrome", `<r><application name="Google Chrome"><entry name="Address and search bar">a.com<x/>tail</entry><entry name="Address and search bar">b.com</entry></application></r>`, []string{"a.com", "b.com"}},
		{"chromium fallback", `<r><application name="Chromium"><entry name="Address and search bar">c.org</entry></application></r>`, []string{"c.org"}},
		{"outside chrome", `<r><application name="Firefox"><entry name="Address and search bar">f.org</entry></application></r>`, nil},
		{"empty", `<r><application name="Google Chrome"><entry name="Address and search bar"></entry></application></r>`, []string{""}},
		{"not xml", `<<<`, nil},
	}
	for _, tt := range tests {
		if got := addressBarTexts(tt.tree); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestURLParseGetters(t *testing.T) {
	if got := parseQS("a=1&b=&c&a=2&d=x+y%21&e=%zz"); !reflect.DeepEqual(got, map[string][]string{"a": {"1", "2"}, "d": {"x y!"}, "e": {"%zz"}}) {
		t.Errorf("parseQS = %v", got)
	}
	u := "https://www.macys.com/shop/mens-clothing/mens-short-sleeve-shirts/Men_regular_size_t,Price_discount_range/L,50_PERCENT_%20off%20%26%20more?id=1"
	got, err := macysPathFacts(u, map[string]any{"parse_keys": []any{"mens_clothing", "Men_regular_size_t", "Price_discount_range"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mens_clothing": true, "shirts": true, "short_sleeve": true, "Men_regular_size_t": "L", "Price_discount_range": "50_PERCENT_ off & more"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("url_path_parse = %#v, want %#v", got, want)
	}
}

// TestURLGettersAsPython pins answers of OSWorld's getters/chrome.py
// (Python 3.11) that TestURLGettersMatchChromePy found differing: urlsplit
// drops tabs and takes "//host" and "a.b:" as a netloc and a scheme,
// unquote replaces each invalid UTF-8 sequence apart, and url_dashPart
// needs partIndex and reads it with int().
func TestURLGettersAsPython(t *testing.T) {
	tests := []struct {
		getter func(string, map[string]any) (any, error)
		url    string
		cfg    map[string]any
		want   any // nil with fails: the getter raises
		fails  bool
	}{
		{urlQueryFacts, "https://www.a.com/p?q=a\tb&k=%FF%FE%C3", map[string]any{"parse_keys": []any{"q", "k"}},
			map[string]any{"q": "ab", "k": "\uFFFD\uFFFD\uFFFD"}, false},
		{macysPathFacts, "//,short-sleeve,/shirts", map[string]any{"parse_keys": []any{}},
			map[string]any{"mens_clothing": nil, "shirts": true, "short_sleeve": nil}, false},
		{macysPathFacts, "a.b:8080;mens-clothing", map[string]any{"parse_keys": []any{}},
			map[string]any{"mens_clothing": true, "shirts": nil, "short_sleeve": nil}, false},
		{dashPart, "https://www.a.com/x/y", map[string]any{"returnType": "string"}, nil, true},
		{dashPart, "https://www.a.com/x/y", map[string]any{"partIndex": true, "returnType": "string"}, "", false},
		{dashPart, "https://www.a.com/x/y", map[string]any{"partIndex": " 4 ", "returnType": "string"}, "y", false},
		{dashPart, "https://www.a.com/x/y", map[string]any{"partIndex": "1_0", "returnType": "string"}, nil, false},
	}
	for _, tt := range tests {
		got, err := tt.getter(tt.url, tt.cfg)
		if (err != nil) != tt.fails || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q, %v: got %#v, %v; want %#v (fails %v)", tt.url, tt.cfg, got, err, tt.want, tt.fails)
		}
	}
}

// TestCompareArchiveThroughRegistry scores zip archives of PDFs that
// LibreOffice made, as OSWorld's compare_archive tasks do (file_type pdf,
// compared by the media family's compare_pdfs).
func TestCompareArchiveThroughRegistry(t *testing.T) {
	soffice := needProgram(t, "soffice")
	dir := t.TempDir()
	for name, body := range map[string]string{"lecture1.txt": "Lecture one: sets and relations.", "lecture2.txt": "Lecture two: graphs and trees."} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(soffice, "--headless", "-env:UserInstallation=file://"+filepath.Join(dir, "lo-profile"),
		"--convert-to", "pdf", "--outdir", filepath.Join(dir, "pdf"), filepath.Join(dir, "lecture1.txt"), filepath.Join(dir, "lecture2.txt"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v: %s", err, out)
	}
	zipOf := func(name string, files ...string) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, "pdf", f))
			if err != nil {
				t.Fatal(err)
			}
			w, _ := zw.Create("lecture_slides/" + f)
			w.Write(data)
		}
		zw.Close()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gold := zipOf("gold.zip", "lecture1.pdf", "lecture2.pdf")
	same := zipOf("same.zip", "lecture1.pdf", "lecture2.pdf")
	short := zipOf("short.zip", "lecture1.pdf")
	s := &Session{Guest: &chromeGuest{home: dir}, TaskID: "archive", CacheDir: t.TempDir()}
	for _, tt := range []struct {
		pred string
		want float64
	}{{same, 1}, {short, 0}} {
		score, details := evalTask(t, s, fmt.Sprintf(`{"func": "compare_archive",
			"result": {"type": "vm_file", "path": %q, "dest": "pred.zip"},
			"expected": {"type": "vm_file", "path": %q, "dest": "gold.zip"},
			"options": {"file_path": "lecture_slides", "file_type": "pdf"}}`, tt.pred, gold))
		if score != tt.want {
			t.Errorf("compare_archive(%s) = %v, want %v (%v)", filepath.Base(tt.pred), score, tt.want, details)
		}
	}
}
