package docs

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// maxRatioRunes bounds each string of fuzzRatio: whole documents compared
// with content_only can be long, and a longer text is not scored
// (metric.ErrOverCap).
const maxRatioRunes = metric.MaxRatioRunes

// fuzzRatio is rapidfuzz's fuzz.ratio(a, b) / 100 over code points,
// computed along rapidfuzz's own float path (1 - dist/lensum, times 100,
// then divided by 100 in docs.py) so that equal inputs give equal bits.
// It stops with ctx's error when ctx ends.
func fuzzRatio(ctx context.Context, a, b string) (float64, error) {
	ra, rb := []rune(a), []rune(b)
	if err := metric.CheckRatioText(ra, rb); err != nil {
		return 0, err
	}
	lensum := len(ra) + len(rb)
	if lensum == 0 {
		return 1, nil
	}
	lcs, err := metric.LCSLength(ctx, ra, rb)
	if err != nil {
		return 0, err
	}
	dist := lensum - 2*lcs
	sim := 1.0 - float64(dist)/float64(lensum)
	return sim * 100 / 100, nil
}
