package metric

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

func TestOverCap(t *testing.T) {
	capped := fmt.Errorf("image of 9000x9000 pixels: %w", ErrOverCap)
	read := fmt.Errorf("read x: over 10 bytes: %w", boundedread.ErrTooLarge)
	tests := []struct {
		name    string
		err     error
		wantCap bool
	}{
		{"nil", nil, false},
		{"corrupt", errors.New("zip: not a valid zip file"), false},
		{"over a cap", capped, true},
		{"over a capped read", read, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := OverCap(tt.err)
			if gotCap := errors.Is(got, ErrOverCap); gotCap != tt.wantCap || (got == nil) == tt.wantCap {
				t.Errorf("OverCap(%v) = %v, want one wrapping ErrOverCap: %v", tt.err, got, tt.wantCap)
			}
			if tt.wantCap && !strings.Contains(got.Error(), tt.err.Error()) {
				t.Errorf("OverCap(%v) = %v, which lost the cap's message", tt.err, got)
			}
		})
	}
}

// TestMetricsOverCap: an input over one of this package's caps, which
// OSWorld's Python would read and score, is an error wrapping ErrOverCap
// that names the cap, never a score. The inputs are made cheaply: a
// sparse file, a zip of empty entries.
func TestMetricsOverCap(t *testing.T) {
	dir := t.TempDir()
	// Two texts that agree on their first 5000 characters only: a fuzzy
	// ratio that reads no further would call them equal.
	long := func(tail string) string {
		return strings.Repeat("a", 5000) + strings.Repeat(tail, 1<<18+1-5000)
	}
	lines := func(name string, n int) string {
		return write(t, dir, name, strings.Repeat("line\n", n))
	}
	sparse := filepath.Join(dir, "sparse.txt")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, MaxFile+1); err != nil {
		t.Fatal(err)
	}
	// Stored, not deflated: a deflate writer per entry is most of the
	// cost of writing them.
	var manyBuf bytes.Buffer
	zw := zip.NewWriter(&manyBuf)
	for i := range maxZipEntries + 1 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%05d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	manyZip := write(t, dir, "many.zip", manyBuf.String())
	oneZip := makeZip(t, filepath.Join(dir, "one.zip"), map[string][]byte{"f": []byte("x")})
	tree := "<r>" + strings.Repeat("<a/>", maxA11yElements) + "</r>"
	tests := []struct {
		name             string
		metric           string
		result, expected any
		wantText         string
	}{
		{"fuzzy_match over 2^18 characters", "fuzzy_match", long("b"), rules("expected", long("c")), "over the cap of 262144"},
		{"diff_text_file over 200000 lines", "diff_text_file", lines("a.txt", 200_001), lines("b.txt", 200_001), "more than 200000 elements"},
		{"file_contains over 64 MiB", "file_contains", sparse, rules("expected", []any{"x"}), "over 67108864 bytes"},
		{"compare_zip_files over 10000 entries", "compare_zip_files", manyZip, oneZip, "over 10000 entries"},
		{"check_accessibility_tree over 2^18 elements", "check_accessibility_tree", tree,
			[]any{map[string]any{"selectors": []any{"a"}}}, "more than 262144 elements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := General()[tt.metric].Fn(context.Background(), tt.result, tt.expected, true, nil)
			if !errors.Is(err, ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("%s error = %q, want it to name the cap (%q)", tt.metric, err, tt.wantText)
			}
		})
	}
}

// TestZipEntryOverCap: an entry whose header declares more than the cap
// is over it only if it inflates past it; a header that lies about a
// small entry is a corrupt archive, not an entry over the cap.
func TestZipEntryOverCap(t *testing.T) {
	const limit = 1 << 10
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, limit+1))
	small := []byte("<x/>")
	w, err = zw.CreateRaw(&zip.FileHeader{Name: "lying", Method: zip.Store, CRC32: crc32.ChecksumIEEE(small),
		CompressedSize64: uint64(len(small)), UncompressedSize64: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(small)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		entry   *zip.File
		wantCap bool
	}{
		{zr.File[0], true},
		{zr.File[1], false},
	} {
		err := ZipEntryOverCap(tt.entry, limit)
		if err == nil || errors.Is(err, ErrOverCap) != tt.wantCap {
			t.Errorf("ZipEntryOverCap(%s, %d) = %v; want an error, wrapping ErrOverCap: %v", tt.entry.Name, limit, err, tt.wantCap)
		}
	}
}
