package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunRAGAndWebExamples runs the bundled rag and web examples through
// `rollout run` on the embedded mesh, with the scripted stand-in model, and
// wants every episode to succeed: the corpus and the web collection reach
// the runner, and no VM starts for them.
func TestRunRAGAndWebExamples(t *testing.T) {
	root := repoRoot(t)
	examples := filepath.Join(root, "examples")
	tests := []struct {
		name     string
		args     []string
		episodes string // tasks × group size 2
	}{
		{"rag", []string{"--data", filepath.Join(examples, "rag", "tasks.jsonl"), "--mode", "rag",
			"--rag-corpus", filepath.Join(examples, "rag", "corpus")}, "6"},
		{"web", []string{"--data", filepath.Join(examples, "web", "tasks.jsonl"), "--mode", "web",
			"--web-docs", filepath.Join(examples, "web", "docs.jsonl")}, "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--num-rollouts", "2", "--group-size", "2", "--model-base-url", "",
				"--data-dir", filepath.Join(dir, "mesh"), "--output-dir", filepath.Join(dir, "results"),
				"--fake-script", filepath.Join(examples, "fakellm", "demo.jsonl")}, tt.args...)
			if err := Run(ctx, args, &stdout, &stderr); err != nil {
				t.Fatalf("rollout run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			for _, want := range []string{"overall  " + tt.episodes, tt.name + "      " + tt.episodes, "100.0%"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("summary lacks %q:\n%s", want, stdout.String())
				}
			}
			if strings.Contains(stdout.String(), "FAILURE REASON") {
				t.Errorf("episodes failed:\n%s", stdout.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "mesh", "vmmanager", "vms")); !os.IsNotExist(err) {
				t.Errorf("%s tasks made a VM pool (%v)", tt.name, err)
			}
		})
	}
}

// TestRunAsksForModeData: rag tasks without --rag-corpus, web tasks
// without --web-docs or --web-search-url, and desktop tasks with the
// tool_calls action space are refused before anything starts, naming the
// flag.
func TestRunAsksForModeData(t *testing.T) {
	examples := filepath.Join(repoRoot(t), "examples")
	tests := []struct {
		data, mode, want string
		extra            []string
	}{
		{filepath.Join(examples, "tasks", "desktop-infeasible.json"), "osworld", "1 task runs on a desktop, which --action-space tool_calls cannot drive",
			[]string{"--action-space", "tool_calls"}},
		// tool_calls drive the tasks that are not on a desktop.
		{filepath.Join(examples, "rag", "tasks.jsonl"), "osworld", "3 tasks run in rag mode", []string{"--action-space", "tool_calls"}},
		{filepath.Join(examples, "rag", "tasks.jsonl"), "rag", "3 tasks run in rag mode, which searches a corpus: give --rag-corpus", nil},
		{filepath.Join(examples, "web", "tasks.jsonl"), "web", "2 tasks run in web mode, which searches the web: give --web-docs", nil},
		// Tasks without a mode take --mode's.
		{filepath.Join(examples, "tasks", "desktop-infeasible.json"), "rag", "1 task runs in rag mode", nil},
	}
	for _, tt := range tests {
		dataDir := filepath.Join(t.TempDir(), "mesh")
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--data", tt.data, "--mode", tt.mode, "--data-dir", dataDir, "--model-base-url", ""}, tt.extra...)
		err := Run(context.Background(), args, &stdout, &stderr)
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rollout run --data %s --mode %s = %v (exit %d), want a usage error containing %q", tt.data, tt.mode, err, ExitCode(err), tt.want)
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Errorf("the mesh started (%s exists)", dataDir)
		}
	}
}

// TestRunDesktopWithoutDesktopd: desktop tasks with the process provider
// and no desktopd to start VMs with are refused before the mesh starts,
// saying what is missing, instead of by the coordinator afterwards.
func TestRunDesktopWithoutDesktopd(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no desktopd to find
	dataDir := filepath.Join(t.TempDir(), "mesh")
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"run", "--data", filepath.Join(repoRoot(t), "examples", "tasks", "desktop-infeasible.json"),
		"--model-base-url", "", "--data-dir", dataDir}, &stdout, &stderr)
	want := "1 task runs on a desktop, which the process provider starts with desktopd: desktopd not found"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("rollout run = %v, want an error containing %q\nstderr:\n%s", err, want, stderr.String())
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the mesh started (%s exists)", dataDir)
	}
}

// TestRunDesktopStartsOnlyTheVMsItNeeds: a desktop task still gets its VM,
// and one task in a group of one boots one VM, not --num-vms of them.
func TestRunDesktopStartsOnlyTheVMsItNeeds(t *testing.T) {
	root := repoRoot(t)
	desktopdOnPath(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := Run(ctx, []string{"run", "--data", filepath.Join(root, "examples", "tasks", "desktop-infeasible.json"),
		"--num-vms", "3", "--model-base-url", "", "--data-dir", filepath.Join(dir, "mesh"), "--output-dir", filepath.Join(dir, "results"),
		"--fake-script", filepath.Join(root, "examples", "fakellm", "demo.jsonl")}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("rollout run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "1 process VMs") {
		t.Errorf("stderr does not say that 1 VM starts:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "overall  1         1     100.0%") {
		t.Errorf("the desktop task did not succeed:\n%s", stdout.String())
	}
}
