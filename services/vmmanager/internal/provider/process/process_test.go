package process

import (
	"os"
	"os/exec"
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

func TestProcessAlive(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Error("this process reported dead")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	if processAlive(cmd.Process.Pid) {
		t.Errorf("reaped pid %d reported alive", cmd.Process.Pid)
	}
	// A zombie (exited, not yet reaped) is dead too.
	z := exec.Command("true")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	defer z.Wait()
	for i := 0; i < 200 && processAlive(z.Process.Pid); i++ {
		exec.Command("sleep", "0.01").Run()
	}
	if processAlive(z.Process.Pid) {
		t.Errorf("zombie pid %d reported alive", z.Process.Pid)
	}
}
