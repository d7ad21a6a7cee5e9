package process

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "Desktop", "docs"), 0o755)
	os.WriteFile(filepath.Join(src, "Desktop", "docs", "a.txt"), []byte("hello"), 0o640)
	os.Symlink("Desktop/docs/a.txt", filepath.Join(src, "link"))
	dst := filepath.Join(t.TempDir(), "home")
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, "Desktop", "docs", "a.txt"))
	if err != nil || string(b) != "hello" {
		t.Errorf("copied file = %q, %v; want hello", b, err)
	}
	if st, _ := os.Stat(filepath.Join(dst, "Desktop", "docs", "a.txt")); st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", st.Mode().Perm())
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "Desktop/docs/a.txt" {
		t.Errorf("symlink = %q, %v", l, err)
	}
}
