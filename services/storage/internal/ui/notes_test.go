package ui

import (
	"slices"
	"testing"
)

func TestEvaluatorNotes(t *testing.T) {
	tests := []struct {
		name    string
		details string
		want    []string
	}{
		{"no notes", `{"func":["exact_match"],"scores":[1]}`, nil},
		{"one list per metric run", `{"func":["compare_docx_files","exact_match"],"scores":[0,0],"notes":[["a.docx does not open"],["None","and 2 more"]]}`,
			[]string{"compare_docx_files: a.docx does not open", "exact_match: None", "exact_match: and 2 more"}},
		{"more lists than metrics", `{"func":["a"],"notes":[[],["x"]]}`, []string{"x"}},
		{"another evaluator's shape", `{"metric":"llm_judgement","notes":"free text"}`, nil},
		{"not JSON", `{`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluatorNotes(tt.details); !slices.Equal(got, tt.want) {
				t.Errorf("evaluatorNotes(%s) = %q; want %q", tt.details, got, tt.want)
			}
		})
	}
}
