package metric

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIndelRatioLong: past the length the plain dynamic programme
// handles, IndelRatio reads the whole texts (it truncated them at 5000
// characters) and agrees with the plain LCS; past MaxRatioRunes it is
// ErrOverCap.
func TestIndelRatioLong(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randomText(r, quadraticRunes+300), randomText(r, quadraticRunes+100)
	got, err := IndelRatio(context.Background(), a, b)
	ra, rb := []rune(a), []rune(b)
	want := 2 * float64(lcsQuadratic(ra, rb)) / float64(len(ra)+len(rb))
	if err != nil || !(math.Abs(got-want) <= 1e-12) {
		t.Errorf("IndelRatio of %d and %d characters = %v, %v; want %v", len(ra), len(rb), got, err, want)
	}
	same := strings.Repeat("a", quadraticRunes)
	if got, err := IndelRatio(context.Background(), same+"b", same+"c"); err != nil || got == 1 {
		t.Errorf("IndelRatio of texts differing after %d characters = %v, %v; want below 1", quadraticRunes, got, err)
	}
	over := strings.Repeat("a", MaxRatioRunes+1)
	if got, err := IndelRatio(context.Background(), over, "a"); !errors.Is(err, ErrOverCap) {
		t.Errorf("IndelRatio of %d characters = %v, %v; want ErrOverCap", MaxRatioRunes+1, got, err)
	}
}

// TestLCSAgainstQuadratic checks the bit-parallel LCS, carries across
// 64-bit words included, against the plain dynamic programme.
func TestLCSAgainstQuadratic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 5, 63, 64, 65, 130, 700} {
		for range 5 {
			a, b := []rune(randomText(r, n)), []rune(randomText(r, r.IntN(2*n)+1))
			got, err := LCSLength(context.Background(), a, b)
			if want := lcsQuadratic(a, b); err != nil || got != want {
				t.Fatalf("LCSLength(%q, %q) = %v, %v; want %v", string(a), string(b), got, err, want)
			}
		}
	}
}

// randomText is n characters drawn from a small alphabet, so that two
// texts share long subsequences.
func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune([]rune("abcdé ")[r.IntN(6)])
	}
	return b.String()
}
