package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiskRateWritesTheVolume: the disk measurement writes at least the
// asked volume, in whole aligned chunks, and leaves no file behind.
func TestDiskRateWritesTheVolume(t *testing.T) {
	dir := t.TempDir()
	for _, writers := range []int{1, 3} {
		d, err := diskRate(dir, 5<<20+123, writers)
		if err != nil {
			t.Fatalf("%d writers: %v", writers, err)
		}
		if d.bytes < 5<<20+123 || d.bytes%(1<<20) != 0 {
			t.Errorf("%d writers: wrote %d bytes, want >= %d in whole MiB", writers, d.bytes, 5<<20+123)
		}
		if d.mbps() <= 0 {
			t.Errorf("%d writers: rate %v", writers, d.mbps())
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "disk-*"))
	if len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
	// A directory under a file cannot be made: an error, not a panic.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := diskRate(filepath.Join(file, "sub"), 1<<20, 1); err == nil {
		t.Error("diskRate under a file: no error")
	}
}
