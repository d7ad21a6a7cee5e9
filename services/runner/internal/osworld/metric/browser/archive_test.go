package browser

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

func writeZip(t *testing.T, p string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeTarGz(t *testing.T, p string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompareArchive(t *testing.T) {
	SetPeers(func(name string) (metric.Func, bool) {
		s, ok := metric.General()[name]
		return s.Fn, ok
	})
	defer SetPeers(nil)
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	writeZip(t, p("gold.zip"), map[string]string{"slides/a.txt": "one\n", "slides/b.txt": "two\n"})
	writeZip(t, p("same.zip"), map[string]string{"slides/b.txt": "two\n", "slides/a.txt": "one\n"})
	writeZip(t, p("half.zip"), map[string]string{"slides/a.txt": "one\n", "slides/b.txt": "TWO\n"})
	writeZip(t, p("names.zip"), map[string]string{"slides/a.txt": "one\n", "slides/c.txt": "two\n"})
	writeZip(t, p("escape.zip"), map[string]string{"../../slides/a.txt": "one\n", "slides/b.txt": "two\n"})
	// compare_text_file raises on a folder and on text that is not UTF-8,
	// and with it the whole of compare_archive, whatever the other pairs.
	writeZip(t, p("folder.zip"), map[string]string{"slides/a.txt": "one\n", "slides/b/": ""})
	writeZip(t, p("latin1.zip"), map[string]string{"slides/a.txt": "one\n", "slides/b.txt": "caf\xe9\n"})
	writeTarGz(t, p("gold.tar.gz"), map[string]string{"a.txt": "one\n"})
	writeTarGz(t, p("pred.tar.gz"), map[string]string{"a.txt": "one\n"})
	if err := os.WriteFile(p("corrupt.zip"), []byte("PK\x03\x04 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := map[string]any{"file_path": "slides", "file_type": "text"}
	runCases(t, []metricCase{
		{name: "same files", fn: "compare_archive", result: p("same.zip"), expected: p("gold.zip"), opts: text, want: 1},
		{name: "one of two differs", fn: "compare_archive", result: p("half.zip"), expected: p("gold.zip"), opts: text, want: 0.5},
		{name: "options pass on", fn: "compare_archive", result: p("half.zip"), expected: p("gold.zip"),
			opts: map[string]any{"file_path": "slides", "file_type": "text", "ignore_case": true}, want: 1},
		{name: "other names", fn: "compare_archive", result: p("names.zip"), expected: p("gold.zip"), opts: text, want: 0},
		// shutil leaves out an entry whose name holds "..", so the names
		// differ (checked with OSWorld's chrome.py).
		{name: "an entry named with .. is left out", fn: "compare_archive", result: p("escape.zip"), expected: p("gold.zip"), opts: text, want: 0},
		{name: "a folder where text is compared", fn: "compare_archive", result: p("folder.zip"), expected: p("folder.zip"), opts: text, want: 0},
		{name: "text that is not UTF-8", fn: "compare_archive", result: p("latin1.zip"), expected: p("latin1.zip"), opts: text, want: 0},
		{name: "tar.gz", fn: "compare_archive", result: p("pred.tar.gz"), expected: p("gold.tar.gz"), want: 1},
		{name: "corrupt prediction", fn: "compare_archive", result: p("corrupt.zip"), expected: p("gold.zip"), opts: text, want: 0},
		{name: "missing prediction", fn: "compare_archive", result: nil, expected: p("gold.zip"), opts: text, want: 0},
		{name: "unknown type", fn: "compare_archive", result: p("same.zip"), expected: p("gold.zip"), opts: map[string]any{"file_type": "odt"}, wantErr: true},
	})
}

// TestCompareArchiveOverCap: an archive over the 10,000-entry cap, which
// shutil would unpack, is not scored: the metric returns an error wrapping
// metric.ErrOverCap that names the cap. It scored 0. The entries are one
// folder, stored again and again, so the test stays cheap.
func TestCompareArchiveOverCap(t *testing.T) {
	SetPeers(func(name string) (metric.Func, bool) {
		s, ok := metric.General()[name]
		return s.Fn, ok
	})
	defer SetPeers(nil)
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	writeZip(t, p("gold.zip"), map[string]string{"a.txt": "one\n"})
	many := func(name string, tarGz bool) string {
		var buf bytes.Buffer
		if tarGz {
			gz := gzip.NewWriter(&buf)
			tw := tar.NewWriter(gz)
			for range maxArchiveEntries + 1 {
				tw.WriteHeader(&tar.Header{Name: "d/", Mode: 0o755, Typeflag: tar.TypeDir})
			}
			tw.Close()
			gz.Close()
		} else {
			zw := zip.NewWriter(&buf)
			for range maxArchiveEntries + 1 {
				if _, err := zw.CreateHeader(&zip.FileHeader{Name: "d/", Method: zip.Store}); err != nil {
					t.Fatal(err)
				}
			}
			zw.Close()
		}
		if err := os.WriteFile(p(name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	tests := []struct {
		name             string
		result, expected string
	}{
		{"zip result", many("many.zip", false), p("gold.zip")},
		{"tar.gz result", many("many.tar.gz", true), p("gold.zip")},
		{"zip expected", p("gold.zip"), many("gold-many.zip", false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricCompareArchive(context.Background(), tt.result, tt.expected, true, nil)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("compare_archive = %v, %v; want an error wrapping metric.ErrOverCap", got, err)
			}
			if want := "more than 10000 entries"; !strings.Contains(err.Error(), want) {
				t.Errorf("compare_archive error = %q, want it to contain %q", err, want)
			}
		})
	}
}
