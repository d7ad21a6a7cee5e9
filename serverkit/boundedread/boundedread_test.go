package boundedread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		max     int64
		want    string
		wantErr error
	}{
		{"regular under the cap", small, 5, "hello", nil},
		{"regular over the cap", small, 4, "", ErrTooLarge},
		{"character device", "/dev/zero", 1 << 20, "", ErrNotRegular},
		{"directory", dir, 1 << 20, "", ErrNotRegular},
		{"fifo without a writer", fifo, 1 << 20, "", ErrNotRegular},
		{"missing", filepath.Join(dir, "nope"), 10, "", os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			var got []byte
			var err error
			go func() { got, err = ReadFile(tt.path, tt.max); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("ReadFile hung")
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestReadFileInStaysInRoot(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if got, err := ReadFileIn(root, "ok.json", 10); err != nil || string(got) != "{}" {
		t.Fatalf("ok.json: got %q, %v", got, err)
	}
	for _, name := range []string{"link", "../" + filepath.Base(outside) + "/secret", secret} {
		got, err := ReadFileIn(root, name, 1<<20)
		if err == nil {
			t.Fatalf("%s: read %q outside the root", name, got)
		}
		if strings.Contains(err.Error(), "root:x") {
			t.Fatalf("%s: error quotes the file: %v", name, err)
		}
	}
}
