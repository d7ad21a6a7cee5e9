package taskfile

import (
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		jsonl    bool
		wantIDs  []string
		wantMode string
		wantAns  string
		wantErr  bool
	}{
		{name: "osworld object", in: `{"id":"u1","instruction":"do it","evaluator":{"func":"infeasible"}}`, wantIDs: []string{"u1"}, wantMode: "desktop"},
		{name: "list", in: `[{"instruction":"a"},{"id":"b","question":"b?"}]`, wantIDs: []string{"task-1", "b"}},
		{name: "jsonl", jsonl: true, in: "{\"id\":\"m1\",\"question\":\"1+1?\",\"answer\":2}\n\n# comment\n{\"id\":\"m2\",\"problem\":\"x\",\"answer\":\"y\"}\n", wantIDs: []string{"m1", "m2"}, wantAns: "2"},
		{name: "no instruction", in: `{"id":"x"}`, wantErr: true},
		{name: "bad line", jsonl: true, in: "{\"question\":\"a\"}\n{", wantErr: true},
		{name: "empty", jsonl: true, in: "\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in), tt.jsonl, "dom")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(got) != len(tt.wantIDs) {
				t.Fatalf("got %d tasks, want %d", len(got), len(tt.wantIDs))
			}
			for i, task := range got {
				if task.ID != tt.wantIDs[i] {
					t.Errorf("task %d id = %q, want %q", i, task.ID, tt.wantIDs[i])
				}
			}
			if got[0].Mode != tt.wantMode || got[0].Answer != tt.wantAns {
				t.Errorf("first task mode %q answer %q, want %q %q", got[0].Mode, got[0].Answer, tt.wantMode, tt.wantAns)
			}
		})
	}
}

// TestBundledExamples loads the examples shipped in the repository.
func TestBundledExamples(t *testing.T) {
	// go test runs in the package's directory.
	dir := "../../../../examples/tasks"
	for _, f := range []string{"desktop-xterm-file.json", "computer13/desktop-xterm-file-c13.json", "desktop-infeasible.json", "math.jsonl", "py.jsonl"} {
		tasks, err := Load(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(tasks) == 0 || tasks[0].Instruction == "" {
			t.Errorf("%s: no usable task", f)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"id":"a","question":"q","answer":1}`), true)
	f.Add([]byte(`[{"instruction":"x","evaluator":{"func":"infeasible"}}]`), false)
	f.Fuzz(func(t *testing.T, b []byte, jsonl bool) {
		tasks, err := Parse(b, jsonl, "d")
		if err == nil {
			for _, task := range tasks {
				if task.Instruction == "" || task.ID == "" {
					t.Fatalf("task without instruction or id: %+v", task)
				}
			}
		}
	})
}
