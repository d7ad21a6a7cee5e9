package command

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func TestNormalizeArgs(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{in: []string{"--num_rollouts", "5"}, want: []string{"--num-rollouts", "5"}},
		{in: []string{"--data_path=x.jsonl"}, want: []string{"--data=x.jsonl"}},
		{in: []string{"--env_mode", "math", "--use_resource_pool"}, want: []string{"--mode", "math", "--use-vm-pool"}},
		{in: []string{"-provider_name", "docker"}, want: []string{"--provider", "docker"}},
		{in: []string{"--output-dir", "a_b"}, want: []string{"--output-dir", "a_b"}}, // values keep underscores
		{in: []string{"-", "--"}, want: []string{"-", "--"}},
		// A value that starts with a dash stays a value.
		{in: []string{"--num_rollouts", "-3"}, want: []string{"--num-rollouts", "-3"}},
		{in: []string{"--name", "--my_run", "--group_size", "2"}, want: []string{"--name", "--my_run", "--group-size", "2"}},
		{in: []string{"--remote", "--model_base_url", "-x_y"}, want: []string{"--remote", "--model-base-url", "-x_y"}},
		{in: []string{"--", "--num_rollouts"}, want: []string{"--", "--num_rollouts"}},
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	new(runFlags).register(fs)
	for _, tt := range tests {
		if got := normalizeArgs(fs, tt.in); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("normalizeArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// repoRoot is the repository root: go test runs in the package's
// directory (the source file's path is a module path under -trimpath).
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	desktopdOnce sync.Once
	desktopdDir  string
	desktopdErr  error
)

// desktopdOnPath builds desktopd from this tree (once per test binary) and
// puts it first on PATH, where the process provider looks for it, so the
// tests need no earlier `make build`.
func desktopdOnPath(t *testing.T) {
	t.Helper()
	desktopdOnce.Do(func() {
		desktopdDir, desktopdErr = os.MkdirTemp("", "rollout-test-desktopd-")
		if desktopdErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", desktopdDir, "./guest/desktopd/cmd/desktopd")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			desktopdErr = fmt.Errorf("go build desktopd: %v\n%s", err, out)
		}
	})
	if desktopdErr != nil {
		t.Fatal(desktopdErr)
	}
	t.Setenv("PATH", desktopdDir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestRunEmbeddedMath runs `rollout run` for real: the five services in
// this process on loopback ports, fakellm with the bundled script, the math
// tasks in groups of two; it checks the summary and both export layouts.
func TestRunEmbeddedMath(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "results")
	// With desktopd at hand the process provider could boot desktops;
	// math tasks must not make it.
	desktopdOnPath(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Run(ctx, []string{"run",
		"--data_path", filepath.Join(root, "examples", "tasks", "math.jsonl"), "--env_mode", "math",
		"--num_rollouts", "2", "--group-size", "2", "--data-dir", filepath.Join(dir, "mesh"), "--output_dir", out,
		"--fake-script", filepath.Join(root, "examples", "fakellm", "demo.jsonl"), "--model-base-url", "",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("rollout run: %v\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no VMs: no task runs on a desktop") {
		t.Errorf("stderr does not say that no VMs start:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "mesh", "vmmanager", "vms")); !os.IsNotExist(err) {
		t.Errorf("math tasks made a VM pool (%v)", err)
	}
	if !strings.Contains(stderr.String(), "SCRIPTED STAND-IN POLICY") {
		t.Errorf("stderr does not say a scripted stand-in answers:\n%s", stderr.String())
	}
	summary := stdout.String()
	for _, want := range []string{"overall  6         6     100.0%", "math     6         6     100.0%", "results: "} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(out, "r-*"))
	if len(runs) != 1 {
		t.Fatalf("results dirs = %v, want one", runs)
	}
	data, err := os.ReadFile(filepath.Join(runs[0], "rollout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 6 {
		t.Fatalf("rollout.jsonl has %d lines, want 6", len(lines))
	}
	groups := map[string]int{}
	for _, l := range lines {
		var ep struct {
			GroupID      string  `json:"group_id"`
			Reward       float64 `json:"reward"`
			InputIDs     []int32 `json:"input_ids"`
			ResponseMask []int8  `json:"response_mask"`
			Logprobs     []float64
		}
		if err := json.Unmarshal([]byte(l), &ep); err != nil {
			t.Fatalf("bad JSONL line %q: %v", l, err)
		}
		groups[ep.GroupID]++
		// Token data is on by default: it is what a trainer needs.
		if len(ep.InputIDs) == 0 || len(ep.ResponseMask) != len(ep.InputIDs) || len(ep.Logprobs) != len(ep.InputIDs) {
			t.Errorf("episode of %s: %d input_ids, %d mask, %d logprobs; want token data, aligned",
				ep.GroupID, len(ep.InputIDs), len(ep.ResponseMask), len(ep.Logprobs))
		}
		if ep.Reward != 1 {
			t.Errorf("episode of %s reward %v, want 1", ep.GroupID, ep.Reward)
		}
	}
	for g, n := range groups {
		if n != 2 {
			t.Errorf("group %s has %d episodes, want 2", g, n)
		}
	}
	results, _ := filepath.Glob(filepath.Join(runs[0], "math", "*", "result.txt"))
	if len(results) != 6 {
		t.Errorf("OSWorld layout has %d result.txt files, want 6", len(results))
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "--data", "/does/not/exist"},
		{"run", "--data", ".", "--group-size", "0"},
		{"run", "--data", ".", "--nope"},
		{"nope"},
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), args, &stdout, &stderr)
		if err == nil || ExitCode(err) != 2 {
			t.Errorf("Run(%q) = %v (exit %d), want a usage error", args, err, ExitCode(err))
		}
	}
}

func TestParseFlagsAfterPositionals(t *testing.T) {
	tests := []struct {
		args     []string
		wantJSON bool
		wantArgs []string
	}{
		{[]string{"--json", "r1"}, true, []string{"r1"}},
		{[]string{"r1", "--json"}, true, []string{"r1"}},
		{[]string{"r1", "--json", "r2"}, true, []string{"r1", "r2"}},
		{[]string{"r1", "r2"}, false, []string{"r1", "r2"}},
		{[]string{"--", "--json"}, false, []string{"--json"}},
		{[]string{"r1", "--", "--json"}, false, []string{"r1", "--json"}},
		{nil, false, []string{}},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("stats", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "")
		if err := parse(fs, tt.args, io.Discard); err != nil {
			t.Errorf("parse(%q): %v", tt.args, err)
			continue
		}
		if *asJSON != tt.wantJSON || !slices.Equal(fs.Args(), tt.wantArgs) {
			t.Errorf("parse(%q): json %v args %q, want json %v args %q", tt.args, *asJSON, fs.Args(), tt.wantJSON, tt.wantArgs)
		}
	}
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	if err := parse(fs, []string{"r1", "--nope"}, io.Discard); err == nil {
		t.Error("an unknown flag after a positional argument was accepted")
	}
}

func TestRunTaskRoots(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(file, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		given []string
		data  string
		want  []string
	}{
		{"file: the working directory and its folder", nil, file, []string{wd, dir}},
		{"directory: the working directory and the directory", nil, dir, []string{wd, dir}},
		{"given roots replace the working directory", []string{"/srv/tasks"}, file, []string{"/srv/tasks", dir}},
		{"no duplicate", []string{dir}, file, []string{dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runTaskRoots(tt.given, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("runTaskRoots(%q, %s) = %q, want %q", tt.given, tt.data, got, tt.want)
			}
		})
	}
}

// TestRolloutsListsEveryPage: `rollout rollouts` pages through the
// coordinator's answer instead of showing the first page only.
func TestRolloutsListsEveryPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := mesh.Start(ctx, mesh.Options{DataDir: t.TempDir(), Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cc := dialMesh(t, m, mesh.Coordinator)
	c := pb.NewCoordinatorClient(cc)
	for i := 0; i < 5; i++ {
		if _, err := c.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
			Tasks: []*pb.Task{{Id: "a", EnvMode: "math", Instruction: "1+1"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n int32) { rolloutsPage = n }(rolloutsPage)
	rolloutsPage = 2
	var stdout, stderr bytes.Buffer
	if err := Run(ctx, []string{"rollouts", "--coordinator", m.Addr(mesh.Coordinator), "--json"}, &stdout, &stderr); err != nil {
		t.Fatalf("rollout rollouts: %v\n%s", err, stderr.String())
	}
	var got struct{ Rollouts []json.RawMessage }
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if len(got.Rollouts) != 5 {
		t.Errorf("listed %d rollouts, want 5", len(got.Rollouts))
	}
}

// TestRunLaunchedModelServers: --serve-cmd makes the gateway start the model
// servers (here two fakellm replicas that take 2 s to load), the run waits
// for them, every episode gets answers, and nothing is left running.
func TestRunLaunchedModelServers(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakellm")
	build := exec.Command("go", "build", "-o", fake, "./services/modelgateway/cmd/fakellm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go build fakellm: %v\n%s", err, out)
		}
		t.Skipf("go build fakellm: %v", err)
	}
	desktopdOnPath(t)
	out := filepath.Join(dir, "results")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := fake + " --addr {host}:{port} --model {name} --slow-start 2s --script " + filepath.Join(root, "examples", "fakellm", "demo.jsonl")
	err := Run(ctx, []string{"run",
		"--data_path", filepath.Join(root, "examples", "tasks", "math.jsonl"), "--env_mode", "math",
		"--num_rollouts", "2", "--group-size", "2", "--data-dir", filepath.Join(dir, "mesh"), "--output_dir", out,
		"--model-base-url", "", "--model", "fake-model", "--serve-cmd", serve, "--serve-replicas", "2",
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("rollout run: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"2 server(s) launched by the gateway", "waiting for 2 model server(s) to load fake-model"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "overall  6         6     100.0%") {
		t.Errorf("summary:\n%s", stdout.String())
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "mesh", "model-logs", "model-*.log"))
	if len(logs) != 2 {
		t.Errorf("replica logs %v, want model-0.log and model-1.log", logs)
	}
	// Every fakellm the run started is gone.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(b, []byte(fake+"\x00")) {
			stat, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
			if !bytes.Contains(stat, []byte(") Z ")) {
				t.Errorf("fakellm still running after the run: %s", filepath.Dir(p))
			}
		}
	}
}
