package osworld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
)

// fileServer serves /<name> bodies on loopback and counts requests.
type fileServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newFileServer(t *testing.T, bodies map[string]string) *fileServer {
	s := &fileServer{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		b, ok := bodies[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fileServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits["/"+name]
}

// calcTask is shaped like libreoffice_calc/0bf05a7d-...: a download step,
// and multi vm_file and cloud_file getters without gives.
func calcTask(t *testing.T, base string) Task {
	t.Helper()
	task, err := ParseTask([]byte(fmt.Sprintf(`{
  "id": "0bf05a7d-b28b-44d2-955a-50b41e24012a",
  "instruction": "pad the ids",
  "config": [
    {"type": "download", "parameters": {"files": [{"url": "%[1]s/Customers.xlsx", "path": "/home/user/Customers.xlsx"}]}},
    {"type": "open", "parameters": {"path": "/home/user/Customers.xlsx"}}
  ],
  "evaluator": {
    "func": "compare_table",
    "result": {"type": "vm_file", "path": ["/home/user/Customers.xlsx", "/home/user/Customers-Sheet1.csv"], "dest": ["Customers.xlsx", "Customers-Sheet1.csv"], "multi": true},
    "expected": {"type": "cloud_file", "path": ["%[1]s/gold.xlsx", "%[1]s/gold.csv"], "dest": ["gold.xlsx", "gold.csv"], "multi": "true"},
    "postconfig": [{"type": "download", "parameters": {"files": [{"url": "%[1]s/post.txt", "path": "/home/user/post.txt"}]}}]
  }
}`, base)))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestEpisodesDownloadOnce runs the download steps and cloud_file getters
// of one task in two episodes (sessions with their own task caches), with
// the runner's shared store and with the default store next to the task
// caches: each URL is fetched once.
func TestEpisodesDownloadOnce(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			srv := newFileServer(t, map[string]string{"Customers.xlsx": "task", "gold.xlsx": "gold x", "gold.csv": "gold c", "post.txt": "post"})
			root := t.TempDir()
			var store *dlcache.Cache
			if shared {
				store = &dlcache.Cache{Dir: filepath.Join(root, "store")}
			}
			task := calcTask(t, srv.URL)
			for ep := range 2 {
				g, gc := newTestGuest(t)
				// As the desktop environment lays it out: <cache-dir>/<task id>,
				// emptied here so that only the store can serve the second
				// episode.
				s := &Session{Guest: gc, CacheDir: filepath.Join(root, "cache", task.ID), Downloads: store}
				if err := os.RemoveAll(s.CacheDir); err != nil {
					t.Fatal(err)
				}
				steps := []Step{task.Config[0], task.Evaluator.Postconfig[0]}
				if err := s.Run(context.Background(), steps); err != nil {
					t.Fatalf("episode %d: %v", ep, err)
				}
				if got := string(g.uploads["/home/user/Customers.xlsx"]); got != "task" {
					t.Errorf("episode %d uploaded %q, want task", ep, got)
				}
				v, err := s.get(context.Background(), "result", task.Evaluator.Expected[0])
				if err != nil {
					t.Fatalf("episode %d: %v", ep, err)
				}
				// gives defaults to [0]: the first file, bare.
				want := filepath.Join(s.CacheDir, "gold.xlsx")
				if v != want {
					t.Errorf("episode %d cloud_file = %v, want %s", ep, v, want)
				}
				if b, _ := os.ReadFile(filepath.Join(s.CacheDir, "gold.csv")); string(b) != "gold c" {
					t.Errorf("episode %d gold.csv = %q, want it fetched too", ep, b)
				}
			}
			for _, name := range []string{"Customers.xlsx", "gold.xlsx", "gold.csv", "post.txt"} {
				if got := srv.count(name); got != 1 {
					t.Errorf("%s fetched %d times over two episodes, want 1", name, got)
				}
			}
		})
	}
}

// TestCachedFileIsNotWrittenThrough: a getter writing the name that a
// cloud_file linked from the store replaces the link, and the store keeps
// its content.
func TestCachedFileIsNotWrittenThrough(t *testing.T) {
	srv := newFileServer(t, map[string]string{"gold.txt": "gold"})
	store := &dlcache.Cache{Dir: filepath.Join(t.TempDir(), "store")}
	s := &Session{CacheDir: t.TempDir(), Downloads: store}
	if _, err := getCloudFile(context.Background(), s, map[string]any{"path": srv.URL + "/gold.txt", "dest": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.writeCache("x", []byte("other")); err != nil {
		t.Fatal(err)
	}
	p, _, _ := store.Lookup(srv.URL + "/gold.txt")
	if b, _ := os.ReadFile(p); string(b) != "gold" {
		t.Errorf("store content %q after writing the task's copy, want gold", b)
	}
}

func TestFileGetterGives(t *testing.T) {
	srv := newFileServer(t, map[string]string{"a": "A", "b": "B"})
	g, gc := newTestGuest(t)
	g.files["/g/a"], g.files["/g/c"] = []byte("A"), []byte("C")
	s := &Session{Guest: gc, CacheDir: t.TempDir(), Downloads: &dlcache.Cache{Dir: filepath.Join(t.TempDir(), "store")}}
	at := func(name string) string { return filepath.Join(s.CacheDir, name) }
	tests := []struct {
		name string
		cfg  map[string]any
		want any
	}{
		{"vm_file single", map[string]any{"type": "vm_file", "path": "/g/a", "dest": "a"}, at("a")},
		{"vm_file single missing", map[string]any{"type": "vm_file", "path": "/g/b", "dest": "b"}, nil},
		{"vm_file multi gives default", map[string]any{"type": "vm_file", "path": []any{"/g/a", "/g/b"}, "dest": []any{"a", "b"}, "multi": true}, at("a")},
		{"vm_file multi gives all", map[string]any{"type": "vm_file", "path": []any{"/g/a", "/g/b", "/g/c"}, "dest": []any{"a", "b", "c"}, "multi": true, "gives": []any{0.0, 1.0, 2.0}}, []any{at("a"), nil, at("c")}},
		{"vm_file multi gives one", map[string]any{"type": "vm_file", "path": []any{"/g/a", "/g/c"}, "dest": []any{"a", "c"}, "multi": "true", "gives": []any{1.0}}, at("c")},
		{"vm_file multi gives out of range", map[string]any{"type": "vm_file", "path": []any{"/g/a"}, "dest": []any{"a"}, "multi": true, "gives": []any{3.0}}, []any{}},
		{"vm_file multi zip truncates", map[string]any{"type": "vm_file", "path": []any{"/g/a", "/g/c"}, "dest": []any{"a"}, "multi": true, "gives": []any{0.0, 1.0}}, at("a")},
		{"cloud_file multi gives", map[string]any{"type": "cloud_file", "path": []any{srv.URL + "/a", srv.URL + "/b"}, "dest": []any{"ca", "cb"}, "multi": true, "gives": []any{0.0, 1.0}}, []any{at("ca"), at("cb")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.get(context.Background(), "result", tt.cfg)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("get = %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := s.get(context.Background(), "result", map[string]any{"type": "cloud_file", "path": srv.URL + "/nope", "dest": "n"}); err == nil || !strings.Contains(err.Error(), srv.URL+"/nope") {
		t.Errorf("cloud_file of a 404 = %v, want an error naming the URL", err)
	}
}

func TestDownloadURLs(t *testing.T) {
	task := calcTask(t, "https://h")
	want := []string{"https://h/Customers.xlsx", "https://h/post.txt", "https://h/gold.xlsx", "https://h/gold.csv"}
	if got := task.DownloadURLs(); !reflect.DeepEqual(got, want) {
		t.Errorf("DownloadURLs = %v, want %v", got, want)
	}
	task.Config = append(task.Config, Step{Type: "update_browse_history", Parameters: []byte(`{"history": []}`)})
	if got := task.DownloadURLs(); len(got) != 5 || got[1] != emptyHistoryURL {
		t.Errorf("DownloadURLs with update_browse_history = %v, want its database second (after the config download)", got)
	}
}

func TestOfflineFailsUpFrontNamingTheURL(t *testing.T) {
	srv := newFileServer(t, map[string]string{"Customers.xlsx": "task", "gold.xlsx": "x", "gold.csv": "c", "post.txt": "p"})
	dir := filepath.Join(t.TempDir(), "store")
	task := calcTask(t, srv.URL)
	online := &dlcache.Cache{Dir: dir}
	for _, u := range task.DownloadURLs()[:3] {
		if _, err := online.Get(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	offline := &dlcache.Cache{Dir: dir, Offline: true}
	err := CheckOffline(task, offline)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/gold.csv") {
		t.Errorf("CheckOffline = %v, want an error naming %s/gold.csv", err, srv.URL)
	}
	// The download itself fails the same way, with no request.
	_, gc := newTestGuest(t)
	s := &Session{Guest: gc, CacheDir: t.TempDir(), Downloads: offline}
	_, err = getCloudFile(context.Background(), s, map[string]any{"path": srv.URL + "/gold.csv", "dest": "g"})
	if !errors.Is(err, dlcache.ErrNotCached) || !strings.Contains(err.Error(), srv.URL+"/gold.csv") {
		t.Errorf("offline cloud_file = %v, want ErrNotCached naming the URL", err)
	}
	if n := srv.count("gold.csv"); n != 0 {
		t.Errorf("offline mode made %d requests for gold.csv", n)
	}
	if _, err := getCloudFile(context.Background(), s, map[string]any{"path": srv.URL + "/gold.xlsx", "dest": "g"}); err != nil {
		t.Errorf("offline cloud_file of a stored URL: %v", err)
	}
}

func TestImportOSWorldCache(t *testing.T) {
	task := calcTask(t, "https://h")
	osw := t.TempDir()
	dir := filepath.Join(osw, task.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The names OSWorld's SetupController and get_cloud_file write.
	for name, body := range map[string]string{
		dlcache.UUID5URL("https://h/Customers.xlsx") + "_Customers.xlsx": "task",
		"gold.xlsx": "gx",
		"gold.csv":  "gc",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &dlcache.Cache{Dir: t.TempDir()}
	res, err := ImportOSWorldCache(context.Background(), c, osw, []Task{task})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Imported) != 3 || len(res.Absent) != 1 || res.Absent[0].URL != "https://h/post.txt" {
		t.Errorf("import = %+v, want 3 imported and post.txt absent", res)
	}
	c.Offline = true
	if err := CheckOffline(task, c); err == nil || !strings.Contains(err.Error(), "https://h/post.txt") {
		t.Errorf("CheckOffline after import = %v, want only post.txt missing", err)
	}
}
