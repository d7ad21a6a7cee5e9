package taskfile

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

func TestLoadRefusesNonRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", t.TempDir()} {
		done := make(chan error, 1)
		go func() { _, err := Load(path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, boundedread.ErrNotRegular) {
				t.Errorf("Load(%s) = %v, want ErrNotRegular", path, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Load(%s) still reading after 30s", path)
		}
	}
}
