package rag

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// TestLoadRefusesLinksToDevices puts a .txt symbolic link to /dev/zero in
// a corpus directory: its Lstat size is tiny, its content endless.
func TestLoadRefusesLinksToDevices(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("fine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, boundedread.ErrNotRegular) {
		t.Errorf("Load(corpus with a link to /dev/zero) = %v, want ErrNotRegular", err)
	}
	if _, err := Load("/dev/zero"); !errors.Is(err, boundedread.ErrNotRegular) {
		t.Errorf("Load(/dev/zero) = %v, want ErrNotRegular", err)
	}
}
