package blobstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFilesRefuseFIFOPack: a FIFO in a pack's place is damage. Opening it
// must neither block (a FIFO without a writer, or a reader, waits for
// ever) nor read from it.
func TestFilesRefuseFIFOPack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "packs", packName(9)), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	key := keyOf([]byte("x"))
	// One at a time: a reader and a writer of a FIFO would meet.
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Open", func() error {
			r, err := f.Open(ctx, key, "9:0", 1)
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"Delete", func() error { return f.Delete(ctx, key, "9:0", 1) }},
	} {
		done := make(chan error, 1)
		go func() { done <- op.call() }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s of a blob in a FIFO pack = %v, want ErrCorrupt", op.name, err)
			}
		case <-time.After(30 * time.Second):
			// The blocked open stays behind; the test binary ends anyway.
			t.Fatalf("%s of a blob in a FIFO pack blocked", op.name)
		}
	}
}

// TestCheckPacks: CheckPacks names packs that are missing, truncated, not
// regular files, or that the index overlaps, and passes intact ones.
func TestCheckPacks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.packBytes = 2 * blockSize // one 5,000-byte blob per pack
	type blob struct {
		loc  string
		size int64
	}
	var blobs []blob
	for i := range 3 {
		data := bytes.Repeat([]byte{byte(i)}, 5000)
		loc, err := f.Put(ctx, keyOf(data), data)
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, blob{loc, int64(len(data))})
	}
	// Pack 0 stays intact, pack 1 is cut short, pack 2 is removed; the
	// index also names a pack 7 that is a FIFO, a blob over pack 0's first
	// and a location no store hands out.
	if err := os.Truncate(filepath.Join(dir, "packs", packName(1)), 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "packs", packName(2))); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "packs", packName(7)), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	blobs = append(blobs, blob{"7:0", 10}, blob{"0:0", 10}, blob{"../x:0", 1})
	got, err := f.CheckPacks(ctx, func(fn func(string, int64) error) error {
		for _, b := range blobs {
			if err := fn(b.loc, b.size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"../x:0":    "malformed",
		packName(0): "the index places blobs over each other",
		packName(1): "truncated",
		packName(2): "missing",
		packName(7): "not a regular file",
	}
	if len(got) != len(want) {
		t.Errorf("CheckPacks found %d problems, want %d: %+v", len(got), len(want), got)
	}
	for _, p := range got {
		if w, ok := want[p.Pack]; !ok || !strings.HasPrefix(p.Problem, w) {
			t.Errorf("CheckPacks: %s: %q, want a problem starting %q", p.Pack, p.Problem, w)
		}
	}
}
