package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadFlagsFirst: every bad flag is refused with one sentence
// naming it, as a usage error (exit 2), before anything starts: no mesh,
// so no data directory, and no gRPC text.
func TestRunRefusesBadFlagsFirst(t *testing.T) {
	root := repoRoot(t)
	tasks := filepath.Join(root, "examples", "tasks", "math.jsonl")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"mode", []string{"--mode", "desktp"}, `--mode "desktp" is not an env mode: want osworld, desktop, math, py, rag, web`},
		{"action space", []string{"--action-space", "pyauto"}, `--action-space "pyauto" is not an action space`},
		{"observation type", []string{"--observation-type", "som"}, `--observation-type "som" is not an observation type`},
		{"metric", []string{"--evaluation-metric", "bleu"}, `--evaluation-metric "bleu" is not a metric`},
		{"negative rollouts", []string{"--num-rollouts", "-3"}, "--num-rollouts must be at least 1, not -3"},
		{"negative rollouts, seed spelling", []string{"--num_rollouts", "-3"}, "--num-rollouts must be at least 1, not -3"},
		{"zero VMs", []string{"--num-vms", "0"}, "--num-vms must be at least 1, not 0"},
		{"group size", []string{"--group-size", "0"}, "--group-size must be at least 1, not 0"},
		{"max turns", []string{"--max-turns", "0"}, "--max-turns must be between 1 and 1000, not 0"},
		{"provider", []string{"--provider", "hyperv"}, `--provider "hyperv" is not a VM provider`},
		{"VM CPUs", []string{"--vm-cpus", "-1"}, "--vm-cpus must be between 0 (the provider's default) and 1024, not -1"},
		{"VM memory", []string{"--vm-memory-mb", "64"}, "--vm-memory-mb must be 0 (the provider's default) or between 128 and 1048576, not 64"},
		{"fail threshold", []string{"--fail-threshold", "2"}, "--fail-threshold must be a fraction between 0 and 1, not 2"},
		{"episode timeout", []string{"--episode-timeout", "0s"}, "--episode-timeout must be positive"},
		{"log level", []string{"--log-level", "loud"}, `--log-level "loud" is not a level`},
		{"model URL", []string{"--model-base-url", "localhost:8000"}, `--model-base-url "localhost:8000" is not an http(s) URL`},
		{"rag corpus", []string{"--rag-corpus", "/does/not/exist"}, "--rag-corpus: stat /does/not/exist"},
		{"not an int", []string{"--num-rollouts", "many"}, `invalid value "many" for flag -num-rollouts`},
		{"unknown flag", []string{"--num-gpus", "2"}, "flag provided but not defined: -num-gpus"},
		{"serve and base URL", []string{"--model-path", "/m", "--model-base-url", "http://127.0.0.1:1/v1"}, "--model-base-url and --model-path/--serve-cmd exclude each other"},
		{"serve cmd without port", []string{"--model-path", "/m", "--serve-cmd", "srv {model}"}, "--serve-*: launch.command: must contain {port}"},
		{"serve cmd without model path", []string{"--serve-cmd", "srv --port {port} {model}"}, "--serve-cmd uses {model}: give --model-path"},
		{"serve gpus", []string{"--model-path", "/m", "--serve-replicas", "2", "--serve-gpus", "0"}, "launch.gpus: 1 GPU sets for 2 replicas"},
		{"serve ports", []string{"--model-path", "/m", "--serve-ports", "80-70"}, "launch.ports"},
		{"checkpoint dir alone", []string{"--checkpoint-dir", "/tmp"}, "--checkpoint-dir needs model servers"},
		{"positional", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "mesh")
			args := append([]string{"run", "--data", tasks, "--data-dir", dataDir, "--model-base-url", "",
				"--output-dir", filepath.Join(t.TempDir(), "results")}, tt.args...)
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), args, &stdout, &stderr)
			if err == nil || ExitCode(err) != 2 {
				t.Fatalf("Run(%q) = %v (exit %d), want a usage error", tt.args, err, ExitCode(err))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run(%q) error %q, want it to contain %q", tt.args, err, tt.want)
			}
			if strings.Contains(err.Error(), "rpc error") || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("Run(%q) error %q, want one sentence without gRPC text", tt.args, err)
			}
			if strings.Contains(stderr.String(), "-num-vms") {
				t.Errorf("Run(%q) printed every flag's usage:\n%s", tt.args, stderr.String())
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("Run(%q) started the mesh (%s exists)", tt.args, dataDir)
			}
		})
	}
}

// TestBareRolloutIsAUsageError: `rollout` alone prints the commands and
// exits 2; `rollout help` prints them and exits 0.
func TestBareRolloutIsAUsageError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), nil, &stdout, &stderr)
	if ExitCode(err) != 2 || err == nil {
		t.Errorf("Run() = %v (exit %d), want a usage error (exit 2)", err, ExitCode(err))
	}
	if !strings.Contains(stderr.String(), "usage: rollout <command>") {
		t.Errorf("Run() stderr lacks the usage:\n%s", stderr.String())
	}
	stdout.Reset()
	if err := Run(context.Background(), []string{"help"}, &stdout, &stderr); err != nil {
		t.Errorf("Run(help) = %v, want nil", err)
	}
	if !strings.Contains(stdout.String(), "usage: rollout <command>") {
		t.Errorf("Run(help) stdout lacks the usage:\n%s", stdout.String())
	}
}

// TestHelpListsOwnFlags: `rollout up --help` lists the mesh's flags and its
// own, not run's rollout flags; `rollout run --help` lists both.
func TestHelpListsOwnFlags(t *testing.T) {
	tests := []struct {
		cmd           string
		want, notWant []string
	}{
		{"up",
			[]string{"-listen-host", "-openai-addr", "-port-offset", "-num-vms", "-model-base-url", "-rag-corpus", "-auth-token-file"},
			[]string{"-action-space", "-group-size", "-mode ", "-data ", "-output-dir", "-remote", "-fail-threshold", "-use-vm-pool"}},
		{"run",
			[]string{"-data ", "-mode ", "-action-space", "-num-vms", "-rag-corpus", "-web-docs", "-web-search-url", "-fail-threshold"},
			[]string{"-listen-host", "-port-offset"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := Run(context.Background(), []string{tt.cmd, "--help"}, &stdout, &stderr); err != nil {
				t.Fatalf("Run(%s --help) = %v, want nil", tt.cmd, err)
			}
			help := stderr.String()
			for _, w := range tt.want {
				if !strings.Contains(help, w) {
					t.Errorf("%s --help lacks %s", tt.cmd, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(help, w) {
					t.Errorf("%s --help lists %s, which is not its flag", tt.cmd, w)
				}
			}
		})
	}
}

// TestModeCounts: the desktop tasks are counted from every task source
// layout, with the rollout's default mode for tasks without one.
func TestModeCounts(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	write := func(name, content string) string {
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
	noMode := write("nomode.jsonl", `{"id":"a","question":"1+1"}`+"\n# a comment\n"+`{"id":"b","mode":"math"}`+"\n")
	array := write("array.json", `[{"id":"a","env_mode":"desktop"},{"id":"b","env_mode":"rag"}]`)
	osw := filepath.Join(dir, "osworld")
	write("osworld/test_all.json", `{"os":["t1"],"chrome":["t2"]}`)
	write("osworld/examples/os/t1.json", "{\n\"id\":\"t1\",\"instruction\":\"x\"\n}")
	write("osworld/examples/chrome/t2.json", "{\n\"id\":\"t2\",\"instruction\":\"y\"\n}")
	tests := []struct {
		path, mode string
		want       int
	}{
		{filepath.Join(root, "examples", "tasks", "math.jsonl"), "osworld", 0},
		{filepath.Join(root, "examples", "tasks", "desktop-xterm-file.json"), "osworld", 1},
		// A task without env_mode runs in the rollout's default mode.
		{filepath.Join(root, "examples", "tasks", "desktop-xterm-file.json"), "math", 0},
		{filepath.Join(root, "examples", "tasks"), "osworld", countDesktop(t, root)},
		{noMode, "osworld", 1},
		{noMode, "math", 0},
		{array, "math", 1},
		{osw, "osworld", 2},
		{osw, "web", 0},
	}
	for _, tt := range tests {
		counts, err := modeCounts(tt.path, tt.mode)
		if err != nil {
			t.Errorf("modeCounts(%s, %s): %v", tt.path, tt.mode, err)
			continue
		}
		if got := counts["desktop"]; got != tt.want {
			t.Errorf("modeCounts(%s, %s)[desktop] = %d, want %d", tt.path, tt.mode, got, tt.want)
		}
	}
}

// countDesktop counts the bundled desktop task files (examples/tasks/
// desktop-*.json), so that the test follows new examples.
func countDesktop(t *testing.T, root string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "examples", "tasks", "desktop-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}
