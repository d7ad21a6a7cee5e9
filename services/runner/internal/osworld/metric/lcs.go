package metric

import (
	"context"
	"fmt"
	"math/bits"
)

// MaxRatioRunes bounds each text of a fuzzy ratio (IndelRatio, and
// docs.py's fuzz.ratio): the bit-parallel LCS costs len(a)·len(b)/64
// word operations, about a second at this size. rapidfuzz compares any
// length, so a longer text is ErrOverCap, not a score.
const MaxRatioRunes = 1 << 18

// quadraticRunes is the length up to which IndelRatio runs the plain
// dynamic programme, cheaper than the bit-parallel one on the short texts
// most of its calls compare.
const quadraticRunes = 5000

// IndelRatio is 2·LCS(a,b)/(|a|+|b|) over runes (1 for two empty
// strings), rapidfuzz's fuzz.ratio / 100. A text over MaxRatioRunes is
// an error wrapping ErrOverCap; it stops with ctx's error when ctx ends.
func IndelRatio(ctx context.Context, a, b string) (float64, error) {
	ra, rb := []rune(a), []rune(b)
	if err := checkRatioRunes(len(ra), len(rb)); err != nil {
		return 0, err
	}
	if len(ra)+len(rb) == 0 {
		return 1, nil
	}
	var lcs int
	if len(ra) <= quadraticRunes && len(rb) <= quadraticRunes {
		lcs = lcsQuadratic(ra, rb)
	} else {
		var err error
		if lcs, err = LCSLength(ctx, ra, rb); err != nil {
			return 0, err
		}
	}
	return 2 * float64(lcs) / float64(len(ra)+len(rb)), nil
}

// CheckRatioText fails with ErrOverCap when a text of a fuzzy ratio has
// more than MaxRatioRunes characters.
func CheckRatioText(a, b []rune) error {
	return checkRatioRunes(len(a), len(b))
}

func checkRatioRunes(na, nb int) error {
	if n := max(na, nb); n > MaxRatioRunes {
		return fmt.Errorf("fuzzy ratio: a text of %d characters is over the cap of %d: %w", n, MaxRatioRunes, ErrOverCap)
	}
	return nil
}

// lcsQuadratic is the length of the longest common subsequence by the
// textbook dynamic programme, in two rows.
func lcsQuadratic(ra, rb []rune) int {
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			if ra[i-1] == rb[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// LCSLength is the length of the longest common subsequence, by the
// bit-parallel algorithm of Allison and Dix (Hyyrö's form) that rapidfuzz
// uses: one bit per character of a, one pass per character of b. It
// stops with ctx's error when ctx ends.
//
// A character's match vector is kept whole only when it is frequent in a:
// the rare ones are set from their positions for each step and cleared
// after, so that a text of many distinct characters cannot make the
// vectors' memory quadratic.
func LCSLength(ctx context.Context, a, b []rune) (int, error) {
	if len(a) == 0 || len(b) == 0 {
		return 0, nil
	}
	words := (len(a) + 63) / 64
	positions := map[rune][]int{}
	for i, r := range a {
		positions[r] = append(positions[r], i)
	}
	dense := map[rune][]uint64{}
	for r, pos := range positions {
		if len(pos)*8 >= words {
			m := make([]uint64, words)
			for _, i := range pos {
				m[i/64] |= 1 << (i % 64)
			}
			dense[r] = m
		}
	}
	scratch := make([]uint64, words)
	v := make([]uint64, words)
	for i := range v {
		v[i] = ^uint64(0)
	}
	for n, r := range b {
		// A pass costs len(a)/64 words; at most 4096 words run between
		// two looks at ctx.
		if n%max(1, 4096*64/len(a)) == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		pos, ok := positions[r]
		if !ok {
			continue
		}
		m, isDense := dense[r]
		if !isDense {
			m = scratch
			for _, i := range pos {
				m[i/64] |= 1 << (i % 64)
			}
		}
		// V' = (V + (V & M)) | (V & ^M), the addition carrying across
		// words.
		var carry uint64
		for i := range v {
			u := v[i] & m[i]
			sum, c := bits.Add64(v[i], u, carry)
			carry = c
			v[i] = sum | (v[i] &^ m[i])
		}
		if !isDense {
			for _, i := range pos {
				m[i/64] = 0
			}
		}
	}
	zeros := 0
	for i, w := range v {
		if i == words-1 && len(a)%64 != 0 {
			w |= ^uint64(0) << (len(a) % 64)
		}
		zeros += 64 - bits.OnesCount64(w)
	}
	return zeros, nil
}
