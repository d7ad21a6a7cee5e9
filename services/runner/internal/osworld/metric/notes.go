package metric

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// A score of 0 says nothing of its cause: the agent's file may hold the
// wrong value, or it may not open at all, or the library OSWorld reads it
// with may raise on it (OSWorld's metric then scores 0 too). Metrics note
// the second kind through their context, and the evaluator puts the notes
// beside the scores in the episode's evaluator details, which the viewer
// shows. Notes change no score.

// Bounds on what one metric run notes: the details are stored with the
// episode, and a metric looping over a thousand broken cells must not
// fill them.
const (
	maxNotes    = 8
	maxNoteSize = 400
)

// Notes collects what one metric run notes. It is safe for concurrent use:
// a metric abandoned at the evaluation's deadline may still note while the
// evaluator reads.
type Notes struct {
	mu      sync.Mutex
	list    []string
	dropped int
}

type notesKey struct{}

// WithNotes returns a context whose metric notes go to the returned Notes.
func WithNotes(ctx context.Context) (context.Context, *Notes) {
	n := &Notes{}
	return context.WithValue(ctx, notesKey{}, n), n
}

// List returns the notes so far, the last one saying how many more were
// dropped past the bound.
func (n *Notes) List() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := slices.Clone(n.list)
	if n.dropped > 0 {
		out = append(out, fmt.Sprintf("and %d more", n.dropped))
	}
	return out
}

func (n *Notes) add(s string) {
	if len(s) > maxNoteSize {
		cut := maxNoteSize
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case slices.Contains(n.list, s):
	case len(n.list) == maxNotes:
		n.dropped++
	default:
		n.list = append(n.list, s)
	}
}

// Notef notes why the metric scores as it does, when ctx carries Notes
// (WithNotes); otherwise it does nothing.
func Notef(ctx context.Context, format string, args ...any) {
	if n, ok := ctx.Value(notesKey{}).(*Notes); ok {
		n.add(fmt.Sprintf(format, args...))
	}
}

// Because is for a metric that scores 0 because an input does not read or
// OSWorld's Python raises on it, as OSWorld's metric does: it notes err as
// the reason and returns nil. An error over a size cap (OverCap) is
// returned instead, and the evaluation fails with it.
func Because(ctx context.Context, err error) error {
	if oc := OverCap(err); oc != nil || err == nil {
		return oc
	}
	Notef(ctx, "%v", err)
	return nil
}
