package dlcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback HTTP server that counts the requests per path.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *server {
	s := &server{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// files lists what Dir holds besides the lock files, which stay by design.
func files(t *testing.T, dir string) []string {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(dir, "*"))
	dots, _ := filepath.Glob(filepath.Join(dir, ".*"))
	var out []string
	for _, f := range append(all, dots...) {
		if !strings.HasSuffix(f, ".lock") {
			out = append(out, filepath.Base(f))
		}
	}
	return out
}

func TestGetDownloadsOnceAndRecords(t *testing.T) {
	body := "gold file\n"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) })
	c := &Cache{Dir: t.TempDir(), Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
	u := srv.URL + "/a/gold.xlsx"
	var paths []string
	for range 2 {
		p, err := c.Get(context.Background(), u)
		if err != nil {
			t.Fatalf("Get(%s): %v", u, err)
		}
		paths = append(paths, p)
	}
	if got := srv.count("/a/gold.xlsx"); got != 1 {
		t.Errorf("two Gets made %d requests, want 1", got)
	}
	if paths[0] != paths[1] || paths[0] != filepath.Join(c.Dir, Key(u)) {
		t.Errorf("paths %v, want both %s", paths, filepath.Join(c.Dir, Key(u)))
	}
	b, err := os.ReadFile(paths[0])
	if err != nil || string(b) != body {
		t.Errorf("content %q, %v; want %q", b, err, body)
	}
	_, e, ok := c.Lookup(u)
	h := sha256.Sum256([]byte(body))
	want := Entry{URL: u, Size: int64(len(body)), SHA256: hex.EncodeToString(h[:]), Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), From: "download"}
	if !ok || e != want {
		t.Errorf("Lookup = %+v, %v; want %+v", e, ok, want)
	}
	entries, err := c.Entries()
	if err != nil || len(entries) != 1 || entries[0] != want {
		t.Errorf("Entries = %+v, %v; want [%+v]", entries, err, want)
	}
}

func TestConcurrentGetsDownloadOnce(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		_, _ = w.Write([]byte("shared"))
	})
	dir := t.TempDir()
	u := srv.URL + "/shared.bin"
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A Cache per goroutine, as separate runners sharing Dir have.
			c := &Cache{Dir: dir}
			_, errs[i] = c.Get(context.Background(), u)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Get %d: %v", i, err)
		}
	}
	if got := srv.count("/shared.bin"); got != 1 {
		t.Errorf("%d concurrent Gets made %d requests, want 1", n, got)
	}
}

func TestGetFailures(t *testing.T) {
	var flaky atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/big":
			w.Header().Set("Content-Length", "4096")
			_, _ = w.Write([]byte(strings.Repeat("x", 4096)))
		case "/big-chunked":
			for range 8 {
				_, _ = w.Write([]byte(strings.Repeat("x", 512)))
				w.(http.Flusher).Flush()
			}
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/flaky":
			if flaky.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		}
	})
	tests := []struct {
		path     string
		wantErr  error  // nil: any error
		wantText string // in the error
		requests int
		ok       bool
	}{
		{path: "/missing", wantText: "404", requests: 1},
		{path: "/slow", wantErr: context.DeadlineExceeded, wantText: "not done within", requests: 1},
		{path: "/big", wantErr: ErrTooLarge, wantText: "cap", requests: 1},
		{path: "/big-chunked", wantErr: ErrTooLarge, wantText: "1024", requests: 1},
		{path: "/broken", wantText: "3 attempts failed, the last: HTTP 502", requests: 3},
		{path: "/flaky", requests: 3, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			c := &Cache{Dir: t.TempDir(), MaxSize: 1024, Timeout: 400 * time.Millisecond, Backoff: 10 * time.Millisecond}
			u := srv.URL + tt.path
			start := time.Now()
			p, err := c.Get(context.Background(), u)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Get took %s", d)
			}
			if got := srv.count(tt.path); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("Get(%s) = %v, want success", u, err)
				}
				if b, _ := os.ReadFile(p); string(b) != "ok" {
					t.Errorf("content %q, want ok", b)
				}
				return
			}
			if err == nil {
				t.Fatalf("Get(%s) succeeded, want an error", u)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Get(%s) = %v, want an error wrapping %v", u, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Get(%s) = %q, want the URL and %q in it", u, err, tt.wantText)
			}
			if left := files(t, c.Dir); len(left) != 0 {
				t.Errorf("a failed download left %v", left)
			}
		})
	}
}

func TestOffline(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) })
	dir := t.TempDir()
	cached, missing := srv.URL+"/cached", srv.URL+"/missing"
	if _, err := (&Cache{Dir: dir}).Get(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	off := &Cache{Dir: dir, Offline: true}
	if _, err := off.Get(context.Background(), cached); err != nil {
		t.Errorf("offline Get of a cached URL: %v", err)
	}
	_, err := off.Get(context.Background(), missing)
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), missing) {
		t.Errorf("offline Get of an uncached URL = %v, want ErrNotCached naming %s", err, missing)
	}
	if got := srv.count("/missing"); got != 0 {
		t.Errorf("offline Get made %d requests, want 0", got)
	}
}

// TestRecordMustMatch: a file whose record is missing or disagrees is
// fetched again rather than trusted.
func TestRecordMustMatch(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("fresh")) })
	c := &Cache{Dir: t.TempDir()}
	u := srv.URL + "/f"
	if err := os.WriteFile(c.Path(u), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Get(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "fresh" || srv.count("/f") != 1 {
		t.Errorf("content %q after %d requests, want fresh after 1", b, srv.count("/f"))
	}
}

func TestUUID5URL(t *testing.T) {
	// Values from Python: str(uuid.uuid5(uuid.NAMESPACE_URL, url)).
	tests := []struct{ url, want string }{
		{"https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/libreoffice_calc/x/Export_Calc_to_CSV.xlsx", "13d96ea2-ab3e-5d21-82fc-0d171743cf45"},
		{"http://python.org/", "4c565f0d-3f5a-5890-b41b-20cf47701c5e"},
	}
	for _, tt := range tests {
		if got := UUID5URL(tt.url); got != tt.want {
			t.Errorf("UUID5URL(%q) = %s, want %s", tt.url, got, tt.want)
		}
	}
}

func TestImport(t *testing.T) {
	osw := t.TempDir()
	task := "0bf05a7d-b28b-44d2-955a-50b41e24012a"
	dl := "https://example.invalid/Customers.xlsx"
	gold := "https://example.invalid/Customers_gold.xlsx"
	if err := os.MkdirAll(filepath.Join(osw, task), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{UUID5URL(dl) + "_Customers.xlsx": "task file", "gold.xlsx": "gold"} {
		if err := os.WriteFile(filepath.Join(osw, task, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	absent := Source{TaskID: task, Name: "other.csv", URL: "https://example.invalid/other.csv"}
	sources := []Source{
		{TaskID: task, Name: UUID5URL(dl) + "_Customers.xlsx", URL: dl},
		{TaskID: task, Name: "gold.xlsx", URL: gold},
		absent,
	}
	c := &Cache{Dir: t.TempDir(), Offline: true}
	res, err := c.Import(context.Background(), osw, sources)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Imported) != 2 || len(res.Present) != 0 || len(res.Absent) != 1 || res.Absent[0] != absent {
		t.Errorf("Import = %+v, want 2 imported and %v absent", res, absent)
	}
	for u, want := range map[string]string{dl: "task file", gold: "gold"} {
		p, err := c.Get(context.Background(), u)
		if err != nil {
			t.Errorf("offline Get(%s) after import: %v", u, err)
			continue
		}
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("Get(%s) content %q, want %q", u, b, want)
		}
	}
	res, err = c.Import(context.Background(), osw, sources[:1])
	if err != nil || len(res.Present) != 1 {
		t.Errorf("second Import = %+v, %v; want it present", res, err)
	}
	if _, err := c.Import(context.Background(), osw, []Source{{TaskID: "..", Name: "passwd", URL: dl + "2"}}); err == nil {
		t.Errorf("Import of a source outside the folder succeeded")
	}
}

// TestHelperGet is not a test: TestProcessesDownloadOnce runs the test
// binary as a second runner process that fetches one URL.
func TestHelperGet(t *testing.T) {
	dir, u := os.Getenv("DLCACHE_HELPER_DIR"), os.Getenv("DLCACHE_HELPER_URL")
	if dir == "" {
		t.Skip("helper process only")
	}
	if _, err := (&Cache{Dir: dir}).Get(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// TestProcessesDownloadOnce: runners are processes sharing Dir; the file
// lock makes one of them download.
func TestProcessesDownloadOnce(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		_, _ = w.Write([]byte("shared"))
	})
	dir, u := t.TempDir(), srv.URL+"/across.bin"
	var cmds []*exec.Cmd
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGet$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DLCACHE_HELPER_DIR="+dir, "DLCACHE_HELPER_URL="+u)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper process: %v", err)
		}
	}
	if got := srv.count("/across.bin"); got != 1 {
		t.Errorf("3 processes made %d requests, want 1", got)
	}
}
