package osworld

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestEvaluateOverCap: an input over one of the metrics' size caps, which
// OSWorld's Python would read and score, fails the evaluation with an
// error naming the cap (the episode ends FAILED with reason "evaluation",
// as for any evaluation error that is not the environment's), never a
// score. These inputs scored 0, or for the long text a wrong 1: the
// fuzzy ratio read only the first 5000 characters.
func TestEvaluateOverCap(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A PNG header claiming 8000×8000 pixels: 64 megapixels, over the
	// 40-megapixel cap and under PIL's bound.
	var hdr bytes.Buffer
	hdr.WriteString("\x89PNG\r\n\x1a\n")
	chunk := make([]byte, 4+13)
	copy(chunk, "IHDR")
	binary.BigEndian.PutUint32(chunk[4:], 8000)
	binary.BigEndian.PutUint32(chunk[8:], 8000)
	chunk[12], chunk[13] = 8, 2
	binary.Write(&hdr, binary.BigEndian, uint32(13))
	hdr.Write(chunk)
	binary.Write(&hdr, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	put("big.png", hdr.Bytes())
	var small bytes.Buffer
	if err := png.Encode(&small, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	put("small.png", small.Bytes())
	// A zip of 10,001 entries (one folder, stored again and again).
	zipOf := func(name string, n int) {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for range n {
			if _, err := zw.CreateHeader(&zip.FileHeader{Name: "d/", Method: zip.Store}); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		put(name, b.Bytes())
	}
	zipOf("many.zip", 10_001)
	zipOf("one.zip", 1)
	// Two texts of 2^18+1 characters that differ after their first 5000.
	long := func(tail string) string { return strings.Repeat("a", 5000) + strings.Repeat(tail, 1<<18+1-5000) }
	longA, _ := json.Marshal(long("b"))
	longB, _ := json.Marshal(long("c"))
	cache := func(p string) string { return `{"type":"cache_file","path":"` + p + `"}` }
	tests := []struct {
		name     string
		task     string
		wantText string
	}{
		{"image over 40 megapixels",
			`{"func":"check_structure_sim","result":` + cache("big.png") + `,"expected":` + cache("small.png") + `}`,
			"metric check_structure_sim: big.png: image of 8000x8000 pixels is over the cap of 41943040 pixels"},
		{"archive over 10000 entries",
			`{"func":"compare_archive","result":` + cache("many.zip") + `,"expected":` + cache("one.zip") + `}`,
			"metric compare_archive: archive has more than 10000 entries"},
		{"text over 2^18 characters",
			`{"func":"fuzzy_match","result":{"type":"rule","rules":` + string(longA) + `},"expected":{"type":"rule","rules":{"expected":` + string(longB) + `}}}`,
			"metric fuzzy_match: fuzzy ratio: a text of 262145 characters is over the cap of 262144"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, err := ParseTask([]byte(`{"instruction":"x","evaluator":` + tt.task + `}`))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := (&Session{CacheDir: dir}).Evaluate(context.Background(), task, env.EvalInput{})
			if err == nil {
				t.Fatalf("Evaluate = score %v, details %v; want an evaluation failure", ev.Score, ev.Details)
			}
			t.Logf("the episode's failure: %v", err)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Errorf("Evaluate error = %v; want one wrapping metric.ErrOverCap", err)
			}
			if errors.Is(err, env.ErrEnvironment) {
				t.Errorf("Evaluate error = %v is an environment error; want an evaluation failure", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Evaluate error = %q; want it to name the cap: %q", err, tt.wantText)
			}
		})
	}
}
