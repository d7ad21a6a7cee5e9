package command

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunSummaryWhenNothingReachedStorage runs `rollout run` for real on
// desktop tasks whose VMs never boot (the process provider's desktopd is
// a program that exits at once): no episode reaches storage. The run must
// still end with its summary (why nothing was written, the coordinator's
// counts, the infrastructure failures) instead of failing on the stats of
// an unknown rollout, and every count is of episodes, tasks × group size:
// the bug printed "180/180 episodes" for 60.
func TestRunSummaryWhenNothingReachedStorage(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	const tasks, group = 3, 2
	taskDir := filepath.Join(dir, "tasks")
	if err := os.MkdirAll(taskDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		spec := fmt.Sprintf(`{"id": "t%d", "instruction": "nothing to do", "evaluator": {"func": "infeasible"}}`, i)
		if err := os.WriteFile(filepath.Join(taskDir, fmt.Sprintf("t%d.json", i)), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	broken := "#!/bin/sh\necho 'desktopd: broken on purpose' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "desktopd"), []byte(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "results")
	err := Run(ctx, []string{"run",
		"--data", taskDir, "--num-rollouts", "2", "--num-vms", "1", "--group-size", strconv.Itoa(group),
		"--data-dir", filepath.Join(dir, "mesh"), "--output-dir", out,
		"--fake-script", filepath.Join(root, "examples", "fakellm", "demo.jsonl"), "--model-base-url", "",
	}, &stdout, &stderr)
	summary := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", summary, stderr.String())
	// Every episode failed for want of a VM: with --fail-threshold 0 the
	// run exits non-zero, after the summary.
	if err == nil || !strings.Contains(err.Error(), "failed for infrastructure reasons") {
		t.Errorf("rollout run = %v, want the infrastructure failure threshold exceeded", err)
	}
	for _, want := range []string{
		"no episode reached storage",
		"results: none written, as no episode reached storage",
		"INFRASTRUCTURE FAILURES",
		"desktopd: broken on purpose",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(summary+stderr.String(), "has no stored episodes") {
		t.Errorf("the run failed on the stats of a rollout with nothing stored")
	}
	if dirs, _ := filepath.Glob(filepath.Join(out, "r-*")); len(dirs) != 0 {
		t.Errorf("a results folder for a rollout with nothing stored: %v", dirs)
	}

	// The coordinator's line counts each episode once.
	m := regexp.MustCompile(`coordinator: (\d+) done, (\d+) failed for good, (\d+) aborted, (\d+) requeued; groups (\d+)/(\d+) complete`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("no coordinator line in the summary")
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if got := n(1) + n(2) + n(3); got != tasks*group || n(1) != 0 {
		t.Errorf("coordinator: %d done + %d failed + %d aborted = %d, want 0 done of %d episodes", n(1), n(2), n(3), got, tasks*group)
	}
	if n(6) != tasks {
		t.Errorf("coordinator: %d groups, want %d", n(6), tasks)
	}
	// So does every progress line, up to the last: all episodes finished.
	lines := regexp.MustCompile(`(\d+)/(\d+) episodes`).FindAllStringSubmatch(stderr.String(), -1)
	if len(lines) == 0 {
		t.Fatal("no progress line on stderr")
	}
	for _, l := range lines {
		if l[2] != strconv.Itoa(tasks*group) {
			t.Errorf("progress %q counts %s episodes, want %d", l[0], l[2], tasks*group)
		}
	}
	if last := lines[len(lines)-1]; last[1] != last[2] {
		t.Errorf("last progress line %q, want every episode finished", last[0])
	}
	if want := fmt.Sprintf("INFRASTRUCTURE FAILURES: %d of %d episodes", n(2), tasks*group); !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q", want)
	}
}
