package tasksource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// secret is what a file outside the roots holds; no error may quote it.
const secret = "root:$6$SECRETHASH:19000:0:99999:7:::"

func TestLoadStaysInRoots(t *testing.T) {
	outside := t.TempDir()
	shadow := write(t, outside, "shadow", secret+"\n")
	rootDir := t.TempDir()
	write(t, rootDir, "math.jsonl", "{\"id\":\"a\",\"question\":\"1+1\",\"env_mode\":\"math\"}\n")
	write(t, rootDir, "sub/more.jsonl", "{\"id\":\"b\",\"question\":\"2+2\",\"env_mode\":\"math\"}\n")
	// Inside the root but not a task file: its content must not leak either.
	write(t, rootDir, "notes.txt", secret+"\n")
	if err := os.Symlink(shadow, filepath.Join(rootDir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(rootDir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots([]string{rootDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ok := range []string{"math.jsonl", filepath.Join(rootDir, "math.jsonl"), "sub/more.jsonl", filepath.Join(rootDir, "sub")} {
		if got, err := Load(ctx, roots, ok, ""); err != nil || len(got) != 1 {
			t.Errorf("Load(%s) = %d tasks, %v; want 1 task", ok, len(got), err)
		}
	}
	tests := []struct {
		name, path string
		outside    bool // refused as outside the roots (not merely unreadable)
	}{
		{"absolute path outside", shadow, true},
		{"dot-dot from a relative path", "../" + filepath.Base(outside) + "/shadow", true},
		{"dot-dot inside an absolute path", filepath.Join(rootDir, "..", filepath.Base(outside), "shadow"), true},
		{"symlink to a file outside", "link.jsonl", true},
		{"symlink to a file outside, absolute", filepath.Join(rootDir, "link.jsonl"), false},
		{"through a symlinked directory", "linkdir/shadow", true},
		{"a non-task file inside the root", "notes.txt", false},
		{"the root's parent", filepath.Dir(rootDir), true},
		{"missing", "nope.jsonl", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(ctx, roots, tt.path, "")
			if err == nil {
				t.Fatalf("Load(%s) = %d tasks, want an error", tt.path, len(got))
			}
			if strings.Contains(err.Error(), "$6$") || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "'r'") {
				t.Errorf("Load(%s) error quotes the file: %v", tt.path, err)
			}
			if tt.outside && !errors.Is(err, ErrOutsideRoots) {
				t.Errorf("Load(%s) error = %v, want ErrOutsideRoots", tt.path, err)
			}
		})
	}
	if _, err := Load(ctx, nil, "math.jsonl", ""); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("Load without roots = %v, want ErrOutsideRoots", err)
	}
	if _, err := NewRoots([]string{filepath.Join(rootDir, "math.jsonl")}); err == nil {
		t.Error("NewRoots accepted a file as a root")
	}
}

// TestLoadRefusesSpecialFiles: devices never end and FIFOs block; both are
// refused before anything is read, and quickly.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "tree/test_all.json", `{"chrome":["c1"]}`)
	if err := os.MkdirAll(filepath.Join(dir, "tree", "examples", "chrome"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "tree", "examples", "chrome", "c1.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "big/test_all.json", `{"chrome":["c1"]}`)
	write(t, dir, "big/chrome/c1.json", `{"id":"c1","instruction":"`+strings.Repeat("x", MaxTaskBytes)+`"}`)
	// A folder of task files where one "file" is a FIFO: skipped, not read.
	write(t, dir, "folder/a.jsonl", "{\"id\":\"a\",\"env_mode\":\"math\"}\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "folder", "b.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	devRoots, err := NewRoots([]string{"/dev", dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       error
	}{
		{"character device", "/dev/zero", boundedread.ErrNotRegular},
		{"fifo", "fifo.jsonl", boundedread.ErrNotRegular},
		{"fifo where an OSWorld task is", "tree", boundedread.ErrNotRegular},
		{"task file over its cap", "big", boundedread.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Load(context.Background(), devRoots, tt.path, "")
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Errorf("Load(%s) = %v, want %v", tt.path, err, tt.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("Load(%s) hung", tt.path)
			}
		})
	}
	got, err := Load(context.Background(), devRoots, "folder", "")
	if err != nil || len(got) != 1 {
		t.Errorf("Load(folder with a FIFO) = %d tasks, %v; want the one regular file's task", len(got), err)
	}
}

func TestSafeNames(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"chrome", true}, {"os-1.v2:x", true}, {"", false}, {".", false}, {"..", false},
		{"../../tmp/x", false}, {"a/b", false}, {"a..b", false}, {strings.Repeat("a", 257), false},
	}
	for _, tt := range tests {
		if got := SafeName(tt.name); got != tt.want {
			t.Errorf("SafeName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestErrorsQuoteNoContent(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, content string }{
		{"jsonl", secret + "\n"},
		{"array", "[" + secret + "]"},
		{"object", "{\n\"id\": " + secret + "\n}"},
		{"type", `{"id":"a","tags":"` + secret + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, write(t, dir, tt.name+".jsonl", tt.content), "")
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "$6$") || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "'") {
				t.Errorf("error quotes the file: %v", err)
			}
		})
	}
	idx := t.TempDir()
	write(t, idx, "test_all.json", `{"../../`+secret+`":["x"]}`)
	if _, err := load(t, idx, ""); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("bad domain in the index: %v, want an error not quoting it", err)
	}
}
