package docs

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/docs/docx"
)

func TestFuzzRatio(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"", "", 1},
		{"abc", "", 0},
		{"kitten", "sitting", 8.0 / 13},
		{"héllo wörld", "hello world", 18.0 / 22},
		{"same", "same", 1},
	}
	for _, tt := range tests {
		got, err := fuzzRatio(context.Background(), tt.a, tt.b)
		if err != nil || !(math.Abs(got-tt.want) <= 1e-15) {
			t.Errorf("fuzzRatio(%q, %q) = %v, %v; want %v", tt.a, tt.b, got, err, tt.want)
		}
	}
}

// TestFuzzRatioAgainstIndelRatio: fuzzRatio, on rapidfuzz's float path,
// agrees with metric.IndelRatio, and refuses an over-long text as
// metric.ErrOverCap.
func TestFuzzRatioAgainstIndelRatio(t *testing.T) {
	for _, p := range [][2]string{{"kitten", "sitting"}, {strings.Repeat("ab", 100), strings.Repeat("ba", 70)}, {"é", ""}} {
		got, err := fuzzRatio(context.Background(), p[0], p[1])
		want, werr := metric.IndelRatio(context.Background(), p[0], p[1])
		if err != nil || werr != nil || !(math.Abs(got-want) <= 1e-12) {
			t.Errorf("fuzzRatio(%q, %q) = %v, %v; IndelRatio = %v, %v", p[0], p[1], got, err, want, werr)
		}
	}
	long := strings.Repeat("x", maxRatioRunes+1)
	if _, err := fuzzRatio(context.Background(), long, "x"); !errors.Is(err, metric.ErrOverCap) {
		t.Errorf("fuzzRatio of an over-long text: %v, want an error wrapping metric.ErrOverCap", err)
	}
}

func TestCIEDE2000(t *testing.T) {
	// Sharma, Wu and Dalal's test pairs.
	tests := []struct {
		l1, l2 [3]float64
		want   float64
	}{
		{[3]float64{50, 2.6772, -79.7751}, [3]float64{50, 0, -82.7485}, 2.0425},
		{[3]float64{50, 3.1571, -77.2803}, [3]float64{50, 0, -82.7485}, 2.8615},
		{[3]float64{50, 0, 0}, [3]float64{50, -1, 2}, 2.3669},
		{[3]float64{50, 2.5, 0}, [3]float64{73, 25, -18}, 27.1492},
		{[3]float64{60.2574, -34.0099, 36.2677}, [3]float64{60.4626, -34.1751, 39.4387}, 1.2644},
		{[3]float64{2.0776, 0.0795, -1.1350}, [3]float64{0.9033, -0.0636, -0.5514}, 0.9082},
	}
	for _, tt := range tests {
		if got := ciede2000(tt.l1, tt.l2); !(math.Abs(got-tt.want) <= 1e-4) {
			t.Errorf("ciede2000(%v, %v) = %.4f, want %.4f", tt.l1, tt.l2, got, tt.want)
		}
	}
	// scikit-image's rgb2lab of pure red.
	if got := lab(docx.RGB{255, 0, 0}); math.Abs(got[0]-53.2408) > 1e-3 || math.Abs(got[1]-80.0925) > 1e-3 || math.Abs(got[2]-67.2032) > 1e-3 {
		t.Errorf("lab(red) = %v, want [53.2408 80.0925 67.2032]", got)
	}
	if d := deltaE2000(docx.RGB{0, 0, 255}, docx.RGB{0, 0, 255}); d != 0 {
		t.Errorf("deltaE2000 of equal colours = %v", d)
	}
}

func TestCollapseBlanks(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  a \t b\n\nc  ", "a b c"},
		{"\u00a0a\u2003b\x1c", "a b"},
		{"", ""},
		{"a\u200bb", "a\u200bb"},
	}
	for _, tt := range tests {
		if got := collapseBlanks(tt.in); got != tt.want {
			t.Errorf("collapseBlanks(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLCSManyDistinct compares long texts of distinct characters, the
// case whose per-character vectors would need quadratic memory.
func TestLCSManyDistinct(t *testing.T) {
	a := make([]rune, 100000)
	for i := range a {
		a[i] = rune(0x4e00 + i)
	}
	got, err := fuzzRatio(context.Background(), string(a), string(a[:50000]))
	if want := 100000.0 / 150000; err != nil || !(math.Abs(got-want) <= 1e-12) {
		t.Errorf("fuzzRatio = %v, %v; want %v", got, err, want)
	}
}

// TestFuzzRatioStops: the LCS of two long texts, about a second of work
// (many under -race), ends with its context: it answers the context's
// error, not a ratio.
func TestFuzzRatioStops(t *testing.T) {
	a := []rune(strings.Repeat("abcdefghij", maxRatioRunes/10))
	b := []rune(strings.Repeat("jihgfedcba", maxRatioRunes/10))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := fuzzRatio(ctx, string(a), string(b))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fuzzRatio past its deadline = %v, want the deadline's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("fuzzRatio returned %s after start, with a 20ms deadline", d)
	}
}
