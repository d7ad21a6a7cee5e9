package chrome

import (
	"bufio"
	"bytes"
	"context"
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
	"testing"
	"time"
)

// Browser is a real headless Chromium for the tests.
type Browser struct {
	Addr    string
	Profile string
	cmd     *exec.Cmd
}

// StartChromium starts Debian's chromium headless with a fresh profile and
// a DevTools port, or fails (CI set) or skips the test when there is none.
func StartChromium(t *testing.T, extra ...string) *Browser {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed")
		}
		t.Skip("chromium is not installed")
	}
	profile := t.TempDir()
	args := []string{
		"--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--user-data-dir=" + profile, "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
	}
	args = append(append(args, extra...), "about:blank")
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox")
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &Browser{Profile: profile, cmd: cmd}
	t.Cleanup(b.Stop)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "DevTools listening on ws://"); i >= 0 && !sent {
				rest := strings.TrimPrefix(line[i:], "DevTools listening on ws://")
				found <- rest[:strings.IndexByte(rest, '/')]
				sent = true
			}
		}
	}()
	select {
	case b.Addr = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not open its DevTools port within 30s")
	}
	return b
}

// Stop ends the browser and waits for it, so its profile files are
// complete.
func (b *Browser) Stop() {
	if b.cmd.Process == nil || b.cmd.ProcessState != nil {
		return
	}
	b.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-done
	}
}

func pages(t *testing.T) *httptest.Server {
	t.Helper()
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-quit:
			}
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>Page %s</title></head><body><p class=\"x\">%s</p></body></html>", r.URL.Path, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) })
	return srv
}

func TestTabsRoundTrip(t *testing.T) {
	b := StartChromium(t)
	srv := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	urls := []string{srv.URL + "/a", srv.URL + "/b", srv.URL + "/c"}
	if err := c.OpenTabs(ctx, urls); err != nil {
		t.Fatal(err)
	}
	info, err := c.OpenTabsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tab := range info {
		got = append(got, fmt.Sprintf("%s|%s", tab["title"], tab["url"]))
	}
	// Chrome's target order is its own (Playwright's too): compare as sets.
	slices.Sort(got)
	want := []string{"Page /a|" + urls[0], "Page /b|" + urls[1], "Page /c|" + urls[2]}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("open tabs after chrome_open_tabs (about:blank closed):\n got %q\nwant %q", got, want)
	}

	same := func(a, b string) bool { return a == b }
	if err := c.CloseTabs(ctx, []string{urls[1]}, same); err != nil {
		t.Fatal(err)
	}
	tabs, err := c.Tabs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, tab := range tabs {
		left = append(left, tab.URL)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{urls[0], urls[2]}) {
		t.Errorf("tabs after closing %s: %+v", urls[1], tabs)
	}

	p, err := c.Visit(ctx, srv.URL+"/cart", VisitOptions{Idle: true, Close: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Page /cart" || p.URL != srv.URL+"/cart" || !strings.HasPrefix(p.Content, "<!DOCTYPE html><html><head><title>Page /cart</title>") ||
		!strings.Contains(p.Content, `<p class="x">/cart</p>`) {
		t.Errorf("Visit = %+v", p)
	}
	if tabs2, _ := c.Tabs(ctx); len(tabs2) != 2 {
		t.Errorf("page_info's tab is not closed: %+v", tabs2)
	}
}

func TestVisitTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a page load timeout")
	}
	b := StartChromium(t)
	srv := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A page that never answers ends the load at its timeout, without a
	// hang, and the tab can still be read.
	id, err := c.NewTab(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Navigate(ctx, id, srv.URL+"/slow", 2*time.Second); err == nil {
		t.Error("Navigate to a page that never answers returned nil")
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Navigate took %s with a 2s timeout", d)
	}
	if _, err := c.Info(ctx, id, true); err != nil {
		t.Errorf("Info after a timed-out load: %v", err)
	}
}

func TestConnectRefusedIsAnErrorNamingTheAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here now
	start := time.Now()
	_, err = Connect(context.Background(), Config{Addr: addr, Ready: 1500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Connect to a closed port: err = %v, want an error naming %s", err, addr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Connect took %s, want about the 1.5s deadline", d)
	}

	// A port that accepts but never answers HTTP ends at the deadline too.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			conn, err := hang.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	start = time.Now()
	_, err = Connect(context.Background(), Config{Addr: hang.Addr().String(), Ready: 1500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), hang.Addr().String()) {
		t.Fatalf("Connect to a silent port: err = %v", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("Connect to a silent port took %s", d)
	}
}

// TestHistoryAndCookiesFromChromium reads the History and Cookies
// databases a real Chromium wrote, and adds history entries to its History
// as update_browse_history does.
func TestHistoryAndCookiesFromChromium(t *testing.T) {
	b := StartChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "v", Path: "/", Expires: time.Now().Add(time.Hour)})
		fmt.Fprint(w, "<title>Cookie page</title>hello")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.OpenTabs(ctx, []string{srv.URL + "/visited"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Chrome writes History and Cookies lazily; stopping it flushes them.
	time.Sleep(500 * time.Millisecond)
	b.Stop()

	hist := filepath.Join(b.Profile, HistoryFile)
	rows, err := QueryRows(ctx, hist, HistoryQuery)
	if err != nil {
		t.Fatal(err)
	}
	if !hasRow(rows, 0, srv.URL+"/visited") {
		t.Errorf("History rows %v lack %s/visited", rows, srv.URL)
	}
	cookies, err := QueryRows(ctx, filepath.Join(b.Profile, CookiesFile), CookiesQuery)
	if err != nil {
		t.Fatal(err)
	}
	if !hasRow(cookies, 1, "127.0.0.1") {
		t.Errorf("Cookies rows lack host_key 127.0.0.1: %v", cookies)
	}

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	data, err := AddHistory(ctx, hist, []HistoryItem{
		{URL: "https://www.youtube.com/watch?v=x", Title: "YouTube", Ago: time.Hour},
		{URL: "https://example.org/", Title: "Example", Ago: 2 * time.Hour},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "History")
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err = QueryRows(ctx, out, HistoryQuery)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		cols := r.([]any)
		if cols[0] == "https://www.youtube.com/watch?v=x" {
			want := ChromeTime(now.Add(-time.Hour))
			if cols[2] != want {
				t.Errorf("last_visit_time = %v, want %d", cols[2], want)
			}
		}
	}
	if !hasRow(rows, 0, "https://www.youtube.com/watch?v=x") || !hasRow(rows, 0, "https://example.org/") || !hasRow(rows, 0, srv.URL+"/visited") {
		t.Errorf("History after AddHistory: %v", rows)
	}
	visits, err := QueryRows(ctx, out, "SELECT v.transition FROM visits v JOIN urls u ON v.url = u.id WHERE u.url = 'https://example.org/'")
	if err != nil {
		t.Fatal(err)
	}
	if len(visits) != 1 || visits[0].([]any)[0] != int64(typedLinkTransition) {
		t.Errorf("visits of example.org = %v", visits)
	}
}

func hasRow(rows []any, col int, want string) bool {
	for _, r := range rows {
		if cols, ok := r.([]any); ok && len(cols) > col && cols[col] == want {
			return true
		}
	}
	return false
}

func TestQueryRowsBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not sqlite "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{junk, filepath.Join(dir, "missing")} {
		if _, err := QueryRows(context.Background(), p, HistoryQuery); err == nil {
			t.Errorf("QueryRows(%s) = nil error", filepath.Base(p))
		}
	}
}

func TestAppearanceMode(t *testing.T) {
	b := StartChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mode, err := c.AppearanceMode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh Linux profile has the classic theme (system_theme 0), which
	// OSWorld reads as light.
	if mode != "light" && mode != "system" {
		t.Errorf("AppearanceMode of a fresh profile = %q", mode)
	}
	t.Logf("fresh profile: %q", mode)
}

// TestRecreation runs the recreation.gov script against a stand-in site:
// Chromium resolves recreation.gov to a loopback server (https fails
// there, so the script falls back to http as OSWorld's does).
func TestRecreation(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<!DOCTYPE html><html><body><input id="hero-search-input">
<button class="nav-search-button" onclick="location.href='/search?q=' + encodeURIComponent(document.getElementById('hero-search-input').value)">Search</button></body></html>`)
		case "/search":
			if r.URL.Query().Get("q") == "Diamond" {
				fmt.Fprint(w, `<!DOCTYPE html><html><body><a class="search-result-highlight--success" href="/camping/1" target="_blank">Diamond Lake</a></body></html>`)
				return
			}
			fmt.Fprint(w, `<!DOCTYPE html><html><body>no results</body></html>`)
		case "/camping/1":
			fmt.Fprint(w, `<!DOCTYPE html><html><body>
<button class="next-available" onclick="document.querySelectorAll('.camp-sortable-column-header')[2].textContent = ' Next: Jun 1 '">Next available</button>
<div class="camp-sortable-column-header">Site</div><div class="camp-sortable-column-header">Loop</div><div class="camp-sortable-column-header">none</div></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	b := StartChromium(t, "--host-resolver-rules=MAP www.recreation.gov 127.0.0.1:"+port+", MAP recreation.gov 127.0.0.1:"+port)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Connect(ctx, Config{Addr: b.Addr, Ready: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fast := func(context.Context, time.Duration) error { return nil }
	for _, tt := range []struct {
		order string
		want  string
	}{{"2", "Next: Jun 1"}, {"-1", "Next: Jun 1"}, {"7", "__EVALUATION_FAILED__"}} {
		got, err := c.RunRecreation(ctx, Recreation{Class: "camp-sortable-column-header", Order: tt.order, HasOrder: true, Sleep: fast})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"expected": map[string]any{"camp-sortable-column-header": tt.want}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("order %s: got %v, want %v", tt.order, got, want)
		}
	}
}
