package tasksource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// load reads a task source with the system's temporary directory (where
// every test's files live) as the only task root.
func load(t *testing.T, path, index string) ([]*pb.Task, error) {
	t.Helper()
	roots, err := NewRoots([]string{os.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return Load(context.Background(), roots, path, index)
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, content string
		wantIDs             []string
		wantFirst           func(t *testing.T, got []string)
	}{
		{"jsonl", "a.jsonl", "{\"id\":\"q1\",\"question\":\"1+1?\",\"answer\":2,\"env_mode\":\"math\"}\n\n# comment\n{\"task_id\":7,\"prompt\":\"p\",\"tags\":[\"x\"]}\n", []string{"q1", "7"}, nil},
		{"array", "b.json", " [{\"id\":\"a\",\"instruction\":\"do\",\"env_config\":{\"snapshot\":\"s\",\"proxy\":true}},{\"id\":\"b\"}]", []string{"a", "b"}, nil},
		{"one OSWorld task file", "c.json", "{\n  \"id\": \"os-1\",\n  \"instruction\": \"do it\",\n  \"config\": []\n}\n", []string{"os-1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := load(t, write(t, dir, tt.file, tt.content), "")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var ids []string
			for _, task := range got {
				ids = append(ids, task.Id)
			}
			if strings.Join(ids, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("ids = %v, want %v", ids, tt.wantIDs)
			}
		})
	}
	got, _ := load(t, filepath.Join(dir, "a.jsonl"), "")
	if got[0].Answer != "2" || got[0].Instruction != "1+1?" || got[0].EnvMode != "math" || got[1].Tags[0] != "x" {
		t.Errorf("jsonl task fields: %v", got)
	}
	got, _ = load(t, filepath.Join(dir, "b.json"), "")
	if ec := got[0].EnvConfig; ec.GetSnapshot() != "s" || !ec.GetProxy() {
		t.Errorf("env_config = %v, want snapshot s with proxy", ec)
	}
}

func TestLoadRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"launch-wide in task", `{"id":"a","env_config":{"action_space":"pyautogui"}}`, "line 1: env_config.action_space"},
		{"bad id", `{"id":"has space"}`, "line 1: id"},
		{"missing id", `{"question":"q"}`, "line 1: id"},
		{"bad env mode", `{"id":"a","env_mode":"mars"}`, "line 1: env_mode"},
		{"duplicate", "{\"id\":\"a\"}\n{\"id\":\"a\"}", "duplicate task id"},
		{"not json", "{nope", "line 1: not a JSON object"},
		{"array item", `[{"id":"ok"},{"id":"x y"}]`, "item 1: id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, write(t, dir, tt.name+".jsonl", tt.content), "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := load(t, filepath.Join(dir, "missing.jsonl"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestLoadOSWorldTree(t *testing.T) {
	root := t.TempDir()
	write(t, root, "test_all.json", `{"chrome":["c1","c2"],"os":["o1"]}`)
	write(t, root, "examples/chrome/c1.json", `{"id":"c1","snapshot":"chrome","instruction":"open","config":[{"type":"launch"}],"evaluator":{"func":"x"},"proxy":true}`)
	write(t, root, "examples/chrome/c2.json", `{"id":"c2","instruction":"close"}`)
	write(t, root, "examples/os/o1.json", `{"id":"o1","instruction":"ls","fixed_ip":true}`)
	got, err := load(t, root, "")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("%d tasks, want 3", len(got))
	}
	c1 := got[0]
	// OSWorld's top-level snapshot is informational (kept in spec_json).
	if c1.Id != "c1" || c1.Domain != "chrome" || c1.EnvMode != "desktop" || c1.EnvConfig.GetSnapshot() != "" || !c1.EnvConfig.GetProxy() || !strings.Contains(c1.SpecJson, `"snapshot"`) {
		t.Errorf("c1 = %v", c1)
	}
	if o1 := got[2]; o1.Domain != "os" || !o1.EnvConfig.GetFixedIp() {
		t.Errorf("o1 = %v", o1)
	}
	write(t, root, "small.json", `{"os":["o1"]}`)
	if got, err := load(t, root, "small.json"); err != nil || len(got) != 1 {
		t.Errorf("custom index: %v, %v", got, err)
	}
	write(t, root, "bad.json", `{"os":["nope"]}`)
	if _, err := load(t, root, "bad.json"); err == nil {
		t.Error("index naming a missing task: no error")
	}
	if _, err := load(t, root, "../x.json"); err == nil {
		t.Error("index outside the tree: no error")
	}
}

func TestLoadDirectoryOfTaskFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b-desktop.json", "{\n  \"id\": \"d1\",\n  \"instruction\": \"open xterm\"\n}\n")
	write(t, dir, "a-math.jsonl", "{\"id\":\"m1\",\"question\":\"1+1?\",\"env_mode\":\"math\"}\n{\"id\":\"m2\",\"question\":\"2+2?\",\"env_mode\":\"math\"}\n")
	write(t, dir, "README.md", "not a task")
	got, err := load(t, dir, "")
	if err != nil {
		t.Fatalf("load(t, dir): %v", err)
	}
	var ids []string
	for _, task := range got {
		ids = append(ids, task.GetId()+":"+task.GetEnvMode())
	}
	if want := "m1:math m2:math d1:"; strings.Join(ids, " ") != want {
		t.Errorf("load(t, dir) ids = %q, want %q", strings.Join(ids, " "), want)
	}

	write(t, dir, "c-dup.jsonl", "{\"id\":\"m1\",\"question\":\"again\"}\n")
	if _, err := load(t, dir, ""); err == nil || !strings.Contains(err.Error(), "duplicate task id") {
		t.Errorf("load(t, dir with a duplicate id across files) = %v, want a duplicate id error", err)
	}
	bad := t.TempDir()
	write(t, bad, "x.jsonl", "{\"id\":\"ok\"}\nnot json\n")
	if _, err := load(t, bad, ""); err == nil || !strings.Contains(err.Error(), "x.jsonl: line 2") {
		t.Errorf("load(t, dir with a bad file) = %v, want an error naming x.jsonl line 2", err)
	}
	if _, err := load(t, t.TempDir(), ""); err == nil {
		t.Error("load(t, empty dir) succeeded")
	}
}
