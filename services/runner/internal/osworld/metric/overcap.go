package metric

import (
	"errors"
	"fmt"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// ErrOverCap is wrapped by the error for an input over one of this
// implementation's size caps: an image over 40 megapixels, an archive of
// more than 10,000 entries, a text of more than 2^18 characters to
// compare, a document part over its byte cap, and the like. OSWorld's
// Python reads such an input and scores it, so no score here would be
// OSWorld's: the metric returns the error, and the evaluation fails with
// it (the episode ends FAILED with reason "evaluation"). A corrupt or
// missing input, which OSWorld fails on too, still scores 0.
var ErrOverCap = errors.New("input over a size cap, not scored")

// OverCap returns err when it reports an input over a size cap, wrapping
// ErrOverCap (boundedread.ErrTooLarge, the error of a capped read, counts
// too), and nil for any other error. A metric that scores an unreadable
// input 0 returns OverCap(err) with its 0, so that only a real failure to
// read scores.
func OverCap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrOverCap):
		return err
	case errors.Is(err, boundedread.ErrTooLarge):
		return fmt.Errorf("%w: %w", err, ErrOverCap)
	}
	return nil
}
