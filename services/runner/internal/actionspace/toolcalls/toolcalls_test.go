package toolcalls

import (
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		calls   []action.ToolCall
		want    []string // type or type:name
		answer  string
		allowed []string
		wantErr bool
	}{
		{name: "unknown tool", calls: []action.ToolCall{{Name: "abacus", Arguments: "{}"}}, allowed: []string{"calculator"}, wantErr: true},
		{name: "text is the final answer", text: " 42 ", want: []string{"DONE"}, answer: "42"},
		{name: "tool call", calls: []action.ToolCall{{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`}}, want: []string{"TOOL:calculator"}},
		{name: "empty arguments", calls: []action.ToolCall{{ID: "a", Name: "search"}}, want: []string{"TOOL:search"}},
		{name: "final answer tool", calls: []action.ToolCall{{Name: "calculator", Arguments: "{}"}, {Name: "final_answer", Arguments: `{"answer": 7}`}}, want: []string{"TOOL:calculator", "DONE"}, answer: "7"},
		{name: "bad arguments", calls: []action.ToolCall{{Name: "calculator", Arguments: `[1]`}}, wantErr: true},
		{name: "no name", calls: []action.ToolCall{{Arguments: `{}`}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.text, tt.calls, tt.allowed)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Parse = %+v, want %v", got, tt.want)
			}
			for i, a := range got {
				g := a.Type
				if a.Tool != nil {
					g += ":" + a.Tool.Name
				}
				if g != tt.want[i] {
					t.Errorf("action %d = %q, want %q", i, g, tt.want[i])
				}
			}
			if last := got[len(got)-1]; last.Answer != tt.answer {
				t.Errorf("answer = %q, want %q", last.Answer, tt.answer)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("hi", "calculator", `{"expression":"1"}`)
	f.Add("", "final_answer", `{"answer":null}`)
	f.Fuzz(func(t *testing.T, text, name, args string) {
		acts, err := Parse(text, []action.ToolCall{{ID: "x", Name: name, Arguments: args}}, []string{"calculator"})
		if err == nil && len(acts) == 0 {
			t.Fatal("no error and no actions")
		}
	})
}
