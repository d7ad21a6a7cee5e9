package desktop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestEpisodeCacheFolder: each episode of a task gets a folder of its own
// under the task's, made only when a file is written there (an episode
// that writes none makes none) and removed at Close.
func TestEpisodeCacheFolder(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nframe")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/screenshot" {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(png)
			return
		}
		_, _ = w.Write([]byte(`{"output": "", "status": "success", "returncode": 0}`))
	}))
	defer srv.Close()
	root := t.TempDir()
	task := []byte(`{"id": "t1", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}}`)
	var dirs []string
	var envs []*Env
	for i := 0; i < 2; i++ {
		g, err := guest.New(srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		e := New(g, Config{CacheDir: root, Screen: action.Screen{Width: 1280, Height: 720}, Sleep: func(context.Context, time.Duration) error { return nil }})
		if _, err := e.Reset(context.Background(), env.Task{ID: "t1", Spec: task}); err != nil {
			t.Fatal(err)
		}
		dir := e.sess.CacheDir
		if filepath.Dir(dir) != filepath.Join(root, "t1") {
			t.Errorf("episode %d cache folder %s, want one under %s", i, dir, filepath.Join(root, "t1"))
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("episode %d: cache folder made before anything was written to it (%v)", i, err)
		}
		dirs, envs = append(dirs, dir), append(envs, e)
	}
	if dirs[0] == dirs[1] {
		t.Fatalf("two episodes of one task share the cache folder %s", dirs[0])
	}
	// What a getter writes (through the session, which makes the folder).
	if err := os.MkdirAll(dirs[0], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirs[0], "result.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, e := range envs {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close episode %d: %v", i, err)
		}
		if _, err := os.Stat(dirs[i]); !os.IsNotExist(err) {
			t.Errorf("episode %d: cache folder still there after Close (%v)", i, err)
		}
	}
}
