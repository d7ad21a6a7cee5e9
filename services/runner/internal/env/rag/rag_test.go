package rag

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

func TestSearchRanksByBM25(t *testing.T) {
	ix := NewIndex([]Doc{
		{ID: "paris", Title: "Paris", Text: "Paris is the capital of France. The Eiffel Tower is in Paris."},
		{ID: "berlin", Title: "Berlin", Text: "Berlin is the capital of Germany."},
		{ID: "cats", Title: "Cats", Text: "Cats are small mammals."},
	})
	tests := []struct {
		query string
		want  []string
	}{
		{"capital of France", []string{"paris", "berlin"}},
		{"eiffel tower", []string{"paris"}},
		{"germany", []string{"berlin"}},
		{"dogs", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, h := range ix.Search(tt.query, 5) {
			got = append(got, h.Doc.ID)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("Search(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestEnvSearchAndScore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "everest.txt"), []byte("Mount Everest is 8849 metres high."), 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Reset(ctx, env.Task{Instruction: "How high is Everest?", Answer: "8849 metres"}); err != nil {
		t.Fatal(err)
	}
	res, _, err := e.Step(ctx, []action.Action{{Type: action.TypeTool, Tool: &action.ToolCall{Name: "search", Arguments: `{"query":"everest height"}`}}})
	if err != nil || !res[0].OK || !strings.Contains(res[0].Output, "8849") {
		t.Fatalf("search = %+v, %v", res, err)
	}
	ev, err := e.Evaluate(ctx, env.EvalInput{FinalAnswer: "It is 8849 metres high."})
	if err != nil || ev.Score != 1 {
		t.Errorf("Evaluate = %+v, %v; want score 1", ev, err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a corpus gave no error")
	}
}
