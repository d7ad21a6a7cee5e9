package metric

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

func TestNotes(t *testing.T) {
	// Two bytes a rune after one: byte maxNoteSize is inside a rune.
	long := "a" + strings.Repeat("é", maxNoteSize)
	tests := []struct {
		name  string
		notes []string
		want  []string
	}{
		{"none", nil, []string{}},
		{"in order", []string{"a", "b"}, []string{"a", "b"}},
		{"a repeat is kept once", []string{"a", "b", "a"}, []string{"a", "b"}},
		{"past the bound, a count", []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"},
			[]string{"1", "2", "3", "4", "5", "6", "7", "8", "and 2 more"}},
		{"a long note is cut on a rune", []string{long}, []string{long[:maxNoteSize-1] + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, n := WithNotes(context.Background())
			for _, s := range tt.notes {
				Notef(ctx, "%s", s)
			}
			got := n.List()
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("List() = %q; want %q", got, tt.want)
			}
			for _, s := range got {
				if !utf8.ValidString(s) || len(s) > maxNoteSize+len("…") {
					t.Errorf("note of %d bytes (valid UTF-8: %v); want at most %d", len(s), utf8.ValidString(s), maxNoteSize+len("…"))
				}
			}
		})
	}
	// Without Notes in the context a note goes nowhere, and nothing fails.
	Notef(context.Background(), "dropped")
}

// TestBecause: a reason to score 0 is noted and gives no error; an input
// over a size cap is the error that fails the evaluation, and is not
// noted as a reason.
func TestBecause(t *testing.T) {
	unreadable := errors.New("zip: not a valid zip file")
	tooLarge := fmt.Errorf("read x.docx: %w", boundedread.ErrTooLarge)
	tests := []struct {
		name      string
		err       error
		wantErr   bool
		wantNotes []string
	}{
		{"no error", nil, false, nil},
		{"unreadable", unreadable, false, []string{"zip: not a valid zip file"}},
		{"wrapped raise", fmt.Errorf("paragraph 2: %w", ErrPyRaises), false, []string{"paragraph 2: " + ErrPyRaises.Error()}},
		{"over a cap", fmt.Errorf("image: %w", ErrOverCap), true, nil},
		{"a capped read", tooLarge, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, n := WithNotes(context.Background())
			err := Because(ctx, tt.err)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("Because(%v) = %v; want an error: %v", tt.err, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrOverCap) {
				t.Errorf("Because(%v) = %v; want it to wrap ErrOverCap", tt.err, err)
			}
			if got := n.List(); !slices.Equal(got, tt.wantNotes) {
				t.Errorf("notes = %q; want %q", got, tt.wantNotes)
			}
		})
	}
}

// TestRuleErrNotesRaise: a Python raise in a rule scores 0 with the raise
// noted; a pattern that cannot run is the evaluation's error.
func TestRuleErrNotesRaise(t *testing.T) {
	ctx, n := WithNotes(context.Background())
	_, err := MatchValueToRule(3.0, map[string]any{"method": "re", "ref": "3"})
	if got := RuleErr(ctx, err); got != nil {
		t.Fatalf("RuleErr(re on a number) = %v; want nil", got)
	}
	if got := n.List(); len(got) != 1 || !strings.Contains(got[0], ErrPyRaises.Error()) {
		t.Errorf("notes = %q; want the raise", got)
	}
	ctx, n = WithNotes(context.Background())
	cannot := errors.New("match timeout")
	if got := RuleErr(ctx, cannot); got != cannot {
		t.Errorf("RuleErr(%v) = %v; want it back", cannot, got)
	}
	if got := n.List(); len(got) != 0 {
		t.Errorf("notes = %q; want none for an error that fails the evaluation", got)
	}
}
