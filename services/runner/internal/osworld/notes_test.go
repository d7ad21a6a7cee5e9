package osworld

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// TestEvaluateNotes: the evaluator details say, next to each metric's
// score, what the metric noted of it: a result that is None, a file that
// does not open. A score with nothing to say leaves the notes out.
func TestEvaluateNotes(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"broken.pptx": "not a zip",
		"broken.png":  "not an image",
		"a.txt":       "same\n",
		"b.txt":       "same\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := func(p string) string { return `{"type":"cache_file","path":"` + p + `"}` }
	tests := []struct {
		name      string
		evaluator string
		wantScore float64
		wantNotes any // the details' "notes", nil when absent
	}{
		{"a result of None",
			`{"func":"exact_match","result":{"type":"rule","rules":null},"expected":{"type":"rule","rules":{"expected":"x"}}}`,
			0, []any{[]any{`the result getter "rule" gave None`}}},
		{"an expected value of None",
			`{"func":"literal_match","result":{"type":"rule","rules":"x"},"expected":{"type":"rule","rules":null}}`,
			0, []any{[]any{`the expected getter "rule" gave None`}}},
		{"a presentation that does not open",
			`{"func":"compare_pptx_files","result":` + cache("broken.pptx") + `,"expected":` + cache("broken.pptx") + `}`,
			0, []any{[]any{"broken.pptx does not open as a .pptx: open pptx zip: zip: not a valid zip file"}}},
		{"an image that does not open",
			`{"func":"check_structure_sim","result":` + cache("broken.png") + `,"expected":` + cache("broken.png") + `}`,
			0, []any{[]any{"broken.png: decode image header: image: unknown format"}}},
		{"notes line up with the scores under or",
			`{"func":["check_structure_sim","compare_text_file"],"conj":"or","result":[` + cache("broken.png") + `,` + cache("a.txt") + `],"expected":[` + cache("broken.png") + `,` + cache("b.txt") + `]}`,
			1, []any{[]any{"broken.png: decode image header: image: unknown format"}, []any{}}},
		{"nothing to say",
			`{"func":"compare_text_file","result":` + cache("a.txt") + `,"expected":` + cache("b.txt") + `}`,
			1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, err := ParseTask([]byte(`{"instruction":"x","evaluator":` + tt.evaluator + `}`))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := (&Session{CacheDir: dir}).Evaluate(context.Background(), task, env.EvalInput{})
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if ev.Score != tt.wantScore {
				t.Errorf("score = %v; want %v", ev.Score, tt.wantScore)
			}
			// As stored with the episode: through JSON.
			b, err := json.Marshal(ev.Details)
			if err != nil {
				t.Fatal(err)
			}
			var details map[string]any
			if err := json.Unmarshal(b, &details); err != nil {
				t.Fatal(err)
			}
			if got := details["notes"]; !reflect.DeepEqual(got, tt.wantNotes) {
				t.Errorf("details notes = %#v; want %#v\ndetails: %s", got, tt.wantNotes, b)
			}
		})
	}
}
