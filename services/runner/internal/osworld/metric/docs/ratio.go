package docs

import (
	"context"
	"fmt"
	"math/bits"
)

// maxRatioRunes bounds each string of fuzzRatio. The bit-parallel LCS
// below costs len(a)·len(b)/64 word operations, about a second at this
// size; whole documents compared with content_only can be long, so the
// quadratic metric.IndelRatio (which truncates at 5000 runes) would give
// a different answer than rapidfuzz there.
const maxRatioRunes = 1 << 18

// fuzzRatio is rapidfuzz's fuzz.ratio(a, b) / 100 over code points,
// computed along rapidfuzz's own float path (1 - dist/lensum, times 100,
// then divided by 100 in docs.py) so that equal inputs give equal bits.
// It stops with ctx's error when ctx ends.
func fuzzRatio(ctx context.Context, a, b string) (float64, error) {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > maxRatioRunes || len(rb) > maxRatioRunes {
		return 0, fmt.Errorf("fuzzy ratio: text over %d characters", maxRatioRunes)
	}
	lensum := len(ra) + len(rb)
	if lensum == 0 {
		return 1, nil
	}
	lcs, err := lcsLength(ctx, ra, rb)
	if err != nil {
		return 0, err
	}
	dist := lensum - 2*lcs
	sim := 1.0 - float64(dist)/float64(lensum)
	return sim * 100 / 100, nil
}

// lcsLength is the length of the longest common subsequence, by the
// bit-parallel algorithm of Allison and Dix (Hyyrö's form) that rapidfuzz
// uses: one bit per character of a, one pass per character of b.
//
// A character's match vector is kept whole only when it is frequent in a:
// the rare ones are set from their positions for each step and cleared
// after, so that a text of many distinct characters cannot make the
// vectors' memory quadratic.
func lcsLength(ctx context.Context, a, b []rune) (int, error) {
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
