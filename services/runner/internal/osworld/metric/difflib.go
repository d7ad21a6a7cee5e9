package metric

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// maxSequence bounds the sequences SequenceRatio compares: its cost grows
// with the product of their lengths.
const maxSequence = 200_000

// ErrSequenceTooLong is SequenceRatio's answer for a sequence over
// maxSequence elements. difflib compares any length, so it wraps
// ErrOverCap: such sequences are not scored.
var ErrSequenceTooLong = fmt.Errorf("a sequence of more than %d elements: %w", maxSequence, ErrOverCap)

// checkEvery is how many steps of a long loop run between two looks at
// the context: often enough to stop within milliseconds of a deadline,
// rarely enough to cost nothing.
const checkEvery = 1 << 12

// SequenceRatio is Python's difflib.SequenceMatcher(None, a, b).ratio():
// 2·M/T where M counts the elements of the matching blocks difflib finds
// (longest match first, recursively on both sides, with its "autojunk"
// rule that ignores elements of b making up over 1% of a b of 200 or
// more). It differs from an LCS ratio, and OSWorld's scores are difflib's.
// A sequence longer than maxSequence is ErrSequenceTooLong.
//
// The matcher's work is not only quadratic: some inputs (two line cycles
// in opposite orders, where every match is one element long) make it
// rescan all of a for each of len(b)/k matches, hours at maxSequence. It
// stops with ctx's error when ctx ends.
func SequenceRatio[T comparable](ctx context.Context, a, b []T) (float64, error) {
	if len(a) > maxSequence || len(b) > maxSequence {
		return 0, ErrSequenceTooLong
	}
	if len(a)+len(b) == 0 {
		return 1, nil
	}
	var canceled error
	steps := 0
	// tick counts n steps of the matcher and reports whether ctx has
	// ended, looking at it every checkEvery steps.
	tick := func(n int) bool {
		if steps += n; steps >= checkEvery {
			steps = 0
			canceled = ctx.Err()
		}
		return canceled != nil
	}
	b2j := map[T][]int{}
	for j, e := range b {
		b2j[e] = append(b2j[e], j)
	}
	if n := len(b); n >= 200 {
		ntest := n/100 + 1
		for e, idx := range b2j {
			if len(idx) > ntest {
				delete(b2j, e)
			}
		}
	}
	type block struct{ i, j, k int }
	longest := func(alo, ahi, blo, bhi int) block {
		best := block{alo, blo, 0}
		j2len := map[int]int{}
		for i := alo; i < ahi; i++ {
			if tick(1 + len(b2j[a[i]])) {
				return best
			}
			next := map[int]int{}
			for _, j := range b2j[a[i]] {
				if j < blo {
					continue
				}
				if j >= bhi {
					break
				}
				k := j2len[j-1] + 1
				next[j] = k
				if k > best.k {
					best = block{i - k + 1, j - k + 1, k}
				}
			}
			j2len = next
		}
		// No element is junk without an isjunk function, so the match only
		// grows through equal elements (popular ones included).
		for best.i > alo && best.j > blo && a[best.i-1] == b[best.j-1] {
			best = block{best.i - 1, best.j - 1, best.k + 1}
		}
		for best.i+best.k < ahi && best.j+best.k < bhi && a[best.i+best.k] == b[best.j+best.k] {
			best.k++
		}
		return best
	}
	var blocks []block
	queue := [][4]int{{0, len(a), 0, len(b)}}
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		m := longest(q[0], q[1], q[2], q[3])
		if canceled != nil {
			return 0, canceled
		}
		if m.k == 0 {
			continue
		}
		blocks = append(blocks, m)
		if q[0] < m.i && q[2] < m.j {
			queue = append(queue, [4]int{q[0], m.i, q[2], m.j})
		}
		if m.i+m.k < q[1] && m.j+m.k < q[3] {
			queue = append(queue, [4]int{m.i + m.k, q[1], m.j + m.k, q[3]})
		}
	}
	slices.SortFunc(blocks, func(x, y block) int {
		return cmp.Or(cmp.Compare(x.i, y.i), cmp.Compare(x.j, y.j), cmp.Compare(x.k, y.k))
	})
	matches := 0
	for _, m := range blocks {
		matches += m.k
	}
	return 2 * float64(matches) / float64(len(a)+len(b)), nil
}
