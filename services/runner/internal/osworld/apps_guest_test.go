package osworld

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// testGuest is a loopback guest server speaking OSWorld's in-VM API for the
// routes the steps and getters use, over which a real guest.Client runs.
// Its files are a map; execute answers by a function.
type testGuest struct {
	mu      sync.Mutex
	files   map[string][]byte
	uploads map[string][]byte
	// exec answers /execute and /setup/execute; nil answers empty output.
	exec func(command any, shell bool) guest.ExecResult
	// extra serves other routes.
	extra map[string]http.HandlerFunc
	calls map[string]int
}

func newTestGuest(t *testing.T) (*testGuest, *guest.Client) {
	g := &testGuest{files: map[string][]byte{}, uploads: map[string][]byte{}, extra: map[string]http.HandlerFunc{}, calls: map[string]int{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	c, err := guest.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Retries, c.RetryWait = 1, 0
	return g, c
}

func (g *testGuest) count(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[path]
}

func (g *testGuest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.calls[r.URL.Path]++
	h := g.extra[r.URL.Path]
	g.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	switch r.URL.Path {
	case "/file":
		g.mu.Lock()
		b, ok := g.files[r.FormValue("file_path")]
		g.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "File not found"})
			return
		}
		_, _ = w.Write(b)
	case "/setup/upload":
		f, _, err := r.FormFile("file_data")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(f)
		g.mu.Lock()
		g.uploads[r.FormValue("file_path")] = b
		g.files[r.FormValue("file_path")] = b
		g.mu.Unlock()
		_, _ = w.Write([]byte("File Uploaded"))
	case "/execute", "/setup/execute":
		var req struct {
			Command any  `json:"command"`
			Shell   bool `json:"shell"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res := guest.ExecResult{Status: "success"}
		if g.exec != nil {
			res = g.exec(req.Command, req.Shell)
		}
		_ = json.NewEncoder(w).Encode(res)
	default:
		http.NotFound(w, r)
	}
}
