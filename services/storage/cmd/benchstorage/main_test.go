package main

import (
	"bytes"
	"crypto/sha256"
	"image/png"
	"testing"
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
