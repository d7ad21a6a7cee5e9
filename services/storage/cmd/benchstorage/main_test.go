package main

import (
	"bytes"
	"crypto/sha256"
	"image/png"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestShotMarksValidDistinctPNGs: the generator's in-place step numbers
// must keep the PNG valid (chunk CRC) and make every step's content differ.
func TestShotMarksValidDistinctPNGs(t *testing.T) {
	base, err := noisePNG(4 << 10)
	if err != nil {
		t.Fatal(err)
	}
	s := newShot(base, "bench-true-7")
	seen := map[[32]byte]int{}
	for _, step := range []int{0, 1, 9, 10, 29, 12345} {
		s.mark(step)
		if _, err := png.Decode(bytes.NewReader(s.png)); err != nil {
			t.Fatalf("step %d: PNG does not decode: %v", step, err)
		}
		sum := sha256.Sum256(s.png)
		if prev, ok := seen[sum]; ok {
			t.Errorf("steps %d and %d have the same content", prev, step)
		}
		seen[sum] = step
	}
}

func TestSteadyRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// 20 episodes of 30 steps ending every 100 ms: between the 10th and the
	// 90th percentile end (episodes 2 and 18), 16 episodes in 1.6 s.
	var even []time.Time
	for i := range 20 {
		even = append(even, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	tests := []struct {
		name string
		ends []time.Time
		want float64
	}{
		{"even ends", even, 16 * 30 / 1.6},
		{"too few episodes", even[:9], 0},
		{"all at one instant", slices.Repeat([]time.Time{t0}, 20), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := steadyRate(tt.ends, 30); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("steadyRate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCPULimit(t *testing.T) {
	tests := []struct {
		cores float64
		want  string
	}{
		{1.9, "the limit is CPU: "},
		{1.2, "the limit is not CPU "},
	}
	for _, tt := range tests {
		if got := cpuLimit(0.0005, tt.cores, 2); !strings.HasPrefix(got, tt.want) {
			t.Errorf("cpuLimit(cores used %v) = %q, want it to start with %q", tt.cores, got, tt.want)
		}
	}
}
