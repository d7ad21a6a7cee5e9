package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/desktop"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestGroupEpisodesScoreTheirOwnFiles: the episodes of a GRPO group run the
// same task at once on different VMs and share the runner's cache. Each
// episode's vm_file result lands in its own folder, so each is scored on
// its own VM's file even when every getter runs before any metric; Close
// removes the episode's folder.
func TestGroupEpisodesScoreTheirOwnFiles(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	cache := t.TempDir()
	task := []byte(`{"id": "group-task", "instruction": "write the answer",
		"evaluator": {"func": "check_list",
			"result": {"type": "vm_file", "path": "/tmp/rolloutmesh-group-answer.txt", "dest": "answer.txt"},
			"expected": {"type": "rule", "rules": {"expect": ["^right$"]}}}}`)
	answers := []string{"right", "wrong"}
	var envs []*desktop.Env
	for _, a := range answers {
		g := startDesktopd(t)
		c, err := guest.New(g.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		e := desktop.New(c, desktop.Config{CacheDir: cache, Screen: action.Screen{Width: 1280, Height: 720}, GuestWaitTries: 30})
		if _, err := e.Reset(ctx, env.Task{ID: "group-task", Spec: task}); err != nil {
			t.Fatalf("reset: %v", err)
		}
		// The guests share the host's /tmp here, so each writes after the
		// other has reset: the file each getter fetches is its own.
		if _, err := c.Execute(ctx, []string{"sh", "-c", "printf '" + a + "\\n' > /tmp/rolloutmesh-group-answer.txt"}, false, false); err != nil {
			t.Fatal(err)
		}
		ev, err := e.Evaluate(ctx, env.EvalInput{})
		if err != nil {
			t.Fatalf("evaluate: %v", err)
		}
		want := 0.0
		if a == "right" {
			want = 1
		}
		if ev.Score != want {
			t.Errorf("episode answering %q scored %v, want %v", a, ev.Score, want)
		}
		envs = append(envs, e)
	}
	dirs, err := filepath.Glob(filepath.Join(cache, "group-task", "episode-*"))
	if err != nil || len(dirs) != 2 {
		t.Fatalf("episode folders %v (%v), want one per episode", dirs, err)
	}
	// The first episode's file is still its own after the second's getter ran.
	first, err := filepath.Glob(filepath.Join(dirs[0], "answer.txt"))
	if err != nil || len(first) != 1 {
		t.Fatalf("answer.txt in %s: %v %v", dirs[0], first, err)
	}
	for _, e := range envs {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("episode folder %s left after Close (%v)", d, err)
		}
	}
}
