package desktop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
)

// TestResetUsesTheGivenDownloadStore: the store in Config.Downloads is the
// one a task's files come from; an offline store that lacks a file fails
// the task at reset, naming the URL, before any setup step reaches the
// guest.
func TestResetUsesTheGivenDownloadStore(t *testing.T) {
	var setupCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/setup/") {
			setupCalls.Add(1)
		}
		_, _ = w.Write([]byte(`{"output": null, "status": "success"}`))
	}))
	defer srv.Close()
	g, err := guest.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	store := &dlcache.Cache{Dir: filepath.Join(t.TempDir(), "downloads"), Offline: true}
	e := New(g, Config{CacheDir: t.TempDir(), Screen: action.Screen{Width: 1280, Height: 720}, Downloads: store})
	task := `{"id": "t1", "instruction": "x",
	  "config": [{"type": "download", "parameters": {"files": [{"url": "https://files.invalid/a.xlsx", "path": "/home/user/a.xlsx"}]}}],
	  "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"}, "expected": {"type": "rule", "rules": {"expected": ""}}}}`
	_, err = e.Reset(context.Background(), env.Task{ID: "t1", Spec: []byte(task)})
	if err == nil || !strings.Contains(err.Error(), "https://files.invalid/a.xlsx") || !strings.Contains(err.Error(), store.Dir) {
		t.Fatalf("Reset = %v, want an offline error naming the URL and the store", err)
	}
	if n := setupCalls.Load(); n != 0 {
		t.Errorf("%d setup calls reached the guest, want none", n)
	}
}
