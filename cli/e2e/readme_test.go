//go:build e2e

package e2e

// The acceptance of the compose deployment as the README presents it, run on
// the deployment TestChaos leaves (Go runs the tests of this file after
// e2e_test.go's; alone, a test here starts the deployment itself). The model
// backend is killed last, by TestModelBackendKilled.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// composeNetwork is the network deploy/compose.yaml names (networks.default).
const composeNetwork = "rolloutmesh"

// TestReadmeRollout runs the README's remote rollout of the bundled tasks
// (examples/tasks: desktop, math and py) exactly as written there, and
// requires every episode of every domain to be DONE with a score of 1: the
// scripted model solves them all, so anything less is the deployment
// failing (a desktop that loses keystrokes, a py sandbox that cannot start).
func TestReadmeRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e, _ := deployment(t)
	args := readmeRollout(t, e.root)
	bin := buildRollout(t, e.root)

	start := time.Now()
	out, err := runRollout(ctx, bin, t.TempDir(), args)
	t.Logf("$ rollout %s (%s)\n%s", strings.Join(args, " "), time.Since(start).Truncate(time.Second), out)
	if err != nil {
		t.Fatalf("the README's rollout failed: %v", err)
	}
	id, numTasks, groupSize := rolloutLine(t, out)

	eps := e.storedEpisodes(ctx, id)
	if want := numTasks * groupSize; len(eps) != want {
		t.Errorf("storage holds %d episodes of rollout %s, want %d tasks × %d = %d", len(eps), id, numTasks, groupSize, want)
	}
	scores := map[string][]float64{} // by domain
	modes := map[string]int{}
	for _, ep := range eps {
		scores[ep.GetDomain()] = append(scores[ep.GetDomain()], ep.GetScore())
		modes[ep.GetEnvMode()]++
		if ep.GetStatus() != pb.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 {
			t.Errorf("episode %s (task %s, domain %s, env %s): status %s, score %v, reason %q, error %q; want DONE with score 1",
				ep.GetEpisodeId(), ep.GetTaskId(), ep.GetDomain(), ep.GetEnvMode(), ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError())
		}
	}
	t.Logf("scores by domain %v; episodes by env %v", scores, modes)
	for _, domain := range []string{"math", "code"} {
		if len(scores[domain]) == 0 {
			t.Errorf("no %s episode: the bundled tasks have some", domain)
		}
	}
	for _, mode := range []string{"desktop", "math", "py"} {
		if modes[mode] == 0 {
			t.Errorf("no %s episode: the bundled tasks have some", mode)
		}
	}
}

// TestRunnerPodSandbox runs the bundled py tasks with the runner image under
// the security context of the Kubernetes runner pod (deploy/k8s/runner.yaml),
// as Docker applies the same settings: user, capabilities, no_new_privs,
// read-only root with its emptyDir volumes, the runtime's default seccomp
// profile. Every task must score 1; with the non-root, capability-less
// context of the other pods, the sandbox must fail the episode as
// env_error, which shows that the check can fail.
func TestRunnerPodSandbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, _ := deployment(t)
	pod := runnerPod(t, filepath.Join(e.root, "deploy", "k8s", "runner.yaml"))
	sec, err := pod.dockerArgs()
	if err != nil {
		t.Fatal(err)
	}
	restricted := []string{"--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only",
		"--tmpfs", "/tmp:exec,mode=0777", "--tmpfs", "/data:exec,mode=0777"}
	tasks := filepath.Join(e.root, "examples", "tasks", "py.jsonl")
	n := countLines(t, tasks)
	t.Logf("runner pod as docker flags: %s", strings.Join(sec, " "))
	for i := range n {
		ep := e.podEpisode(ctx, pod.image, sec, pod.env("ROLLOUTMESH_CACHE_DIR"), i)
		if ep.Status != "DONE" || ep.Score != 1 {
			t.Errorf("py task %d (%s) in the runner pod's context: status %s, score %v, reason %q, error %q; want DONE with score 1",
				i, ep.TaskID, ep.Status, ep.Score, ep.FailureReason, ep.Error)
		}
	}
	ep := e.podEpisode(ctx, pod.image, restricted, "/data/runner/cache", 0)
	if ep.Status != "FAILED" || ep.FailureReason != "env_error" {
		t.Errorf("py task 0 as uid 65532 without capabilities: status %s, reason %q, error %q; want FAILED with env_error",
			ep.Status, ep.FailureReason, ep.Error)
	}
}

// TestModelBackendKilled kills the model backend (the fakellm container) and
// runs the README's rollout again: it must exit non-zero, and its summary
// must give the episodes' model_error with the backend's own dial error
// rather than blame the model. That error is "connection refused" when the
// backend's host is up and nothing listens (a model server process that
// died); a killed container takes its name off the compose network with it,
// so here the gateway's lookup of fakellm fails: "no such host". The backend
// is started again afterwards.
func TestModelBackendKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e, _ := deployment(t)
	args := readmeRollout(t, e.root)
	bin := buildRollout(t, e.root)

	cs := e.serviceContainers("fakellm")
	if len(cs) != 1 {
		t.Fatalf("%d fakellm containers, want 1", len(cs))
	}
	e.mustExec("docker", "kill", "-s", "KILL", cs[0])
	e.waitState(cs[0], "exited", 30*time.Second)
	t.Cleanup(func() { e.exec("docker", "start", cs[0]) })
	t.Logf("killed the model backend (fakellm %s)", short(cs[0]))

	start := time.Now()
	out, err := runRollout(ctx, bin, t.TempDir(), args)
	t.Logf("$ rollout %s (%s)\n%s", strings.Join(args, " "), time.Since(start).Truncate(time.Second), out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("rollout run with the model backend killed: %v; want a non-zero exit", err)
	}
	if !strings.Contains(out, "INFRASTRUCTURE FAILURES") || !strings.Contains(out, "model_error") {
		t.Errorf("rollout run exited %d without the infrastructure failures (model_error) in its summary", ee.ExitCode())
	}
	if !strings.Contains(out, "backend fakellm") || !strings.Contains(out, "connection refused") && !strings.Contains(out, "no such host") {
		t.Errorf("rollout run exited %d without the backend's dial error (backend fakellm: connection refused, or no such host) in its output", ee.ExitCode())
	}
}

// readmeRollout returns the arguments of the README's remote rollout: the
// `bin/rollout run --remote ...` line of "Deploying with docker-compose", up
// to its comment.
func readmeRollout(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Deploying with docker-compose\n")
	if !ok {
		t.Fatal(`README.md has no section "Deploying with docker-compose"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cmd, _, _ := strings.Cut(strings.TrimSpace(line), "#")
		if f := strings.Fields(cmd); len(f) > 2 && f[0] == "bin/rollout" && f[1] == "run" && strings.Contains(cmd, "--remote") {
			return f[1:]
		}
	}
	t.Fatal("README.md's compose section has no `bin/rollout run --remote` line")
	return nil
}

// buildRollout builds the rollout command (bin/rollout in the README).
func buildRollout(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rollout")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rollout")
	cmd.Dir = filepath.Join(root, "cli")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rollout: %v\n%s", err, out)
	}
	return bin
}

// runRollout runs `rollout ARGS` in dir (its results go there) and returns
// what it printed, stdout and stderr together.
func runRollout(ctx context.Context, bin, dir string, args []string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var rolloutLineRE = regexp.MustCompile(`(?m)^rollout (\S+): (\d+) tasks × group size (\d+)$`)

// rolloutLine reads the id, task count and group size from rollout run's
// first line.
func rolloutLine(t *testing.T, out string) (id string, numTasks, groupSize int) {
	t.Helper()
	m := rolloutLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line %q in rollout run's output", rolloutLineRE)
	}
	numTasks, _ = strconv.Atoi(m[2])
	groupSize, _ = strconv.Atoi(m[3])
	return m[1], numTasks, groupSize
}

// storedEpisodes lists every episode storage holds of a rollout.
func (e *env) storedEpisodes(ctx context.Context, rolloutID string) []*pb.Episode {
	e.t.Helper()
	var eps []*pb.Episode
	for token := ""; ; {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := e.storage.ListEpisodes(cctx, &pb.ListEpisodesRequest{RolloutId: rolloutID, PageSize: 1000, PageToken: token})
		cancel()
		if err != nil {
			e.t.Fatalf("ListEpisodes: %v", err)
		}
		eps = append(eps, resp.GetEpisodes()...)
		if token = resp.GetNextPageToken(); token == "" {
			return eps
		}
	}
}

// podEpisodeResult is what `runner episode --json` prints.
type podEpisodeResult struct {
	TaskID        string  `json:"task_id"`
	Status        string  `json:"status"`
	Score         float64 `json:"score"`
	FailureReason string  `json:"failure_reason"`
	Error         string  `json:"error"`
}

// podEpisode runs py task i of examples/tasks/py.jsonl with `runner episode`
// in a container of image, given the security flags sec, on the compose
// network against its gateway.
func (e *env) podEpisode(ctx context.Context, image string, sec []string, cacheDir string, i int) podEpisodeResult {
	e.t.Helper()
	args := append([]string{"run", "--rm", "--network", composeNetwork}, sec...)
	args = append(args, "-v", filepath.Join(e.root, "examples")+":/examples:ro", image,
		"episode", "--task", "/examples/tasks/py.jsonl", "--index", strconv.Itoa(i), "--env", "py",
		"--gateway", "modelgateway:50054", "--cache-dir", cacheDir, "--json")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res podEpisodeResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		e.t.Fatalf("docker %s: %v (%v)\n%s%s", strings.Join(args, " "), err, jerr, stdout.String(), stderr.String())
	}
	return res
}

// k8sSecurityContext is the part of a Kubernetes SecurityContext (pod or
// container) that says what a process may do.
type k8sSecurityContext struct {
	RunAsUser                *int64 `yaml:"runAsUser"`
	RunAsGroup               *int64 `yaml:"runAsGroup"`
	Privileged               *bool  `yaml:"privileged"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Capabilities             struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

// k8sDeployment is what this test reads of a Deployment manifest.
type k8sDeployment struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				SecurityContext k8sSecurityContext `yaml:"securityContext"`
				Containers      []struct {
					Name  string `yaml:"name"`
					Image string `yaml:"image"`
					Env   []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					SecurityContext k8sSecurityContext `yaml:"securityContext"`
					VolumeMounts    []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name     string    `yaml:"name"`
					EmptyDir *struct{} `yaml:"emptyDir"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// podContext is the runner container of the runner Deployment.
type podContext struct {
	image         string
	pod, c        k8sSecurityContext
	envs          map[string]string
	mounts        []string // mount paths, in order
	emptyDir      map[string]bool
	mountVolume   map[string]string
	readOnlyMount map[string]bool
}

func runnerPod(t *testing.T, path string) *podContext {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var d k8sDeployment
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: no Deployment runner with a container runner (%v)", path, err)
		}
		if d.Kind != "Deployment" || d.Metadata.Name != "runner" {
			continue
		}
		spec := d.Spec.Template.Spec
		for _, c := range spec.Containers {
			if c.Name != "runner" {
				continue
			}
			p := &podContext{image: c.Image, pod: spec.SecurityContext, c: c.SecurityContext, envs: map[string]string{},
				emptyDir: map[string]bool{}, mountVolume: map[string]string{}, readOnlyMount: map[string]bool{}}
			for _, e := range c.Env {
				p.envs[e.Name] = e.Value
			}
			for _, v := range spec.Volumes {
				p.emptyDir[v.Name] = v.EmptyDir != nil
			}
			for _, m := range c.VolumeMounts {
				p.mounts = append(p.mounts, m.MountPath)
				p.mountVolume[m.MountPath] = m.Name
				p.readOnlyMount[m.MountPath] = m.ReadOnly
			}
			return p
		}
	}
}

func (p *podContext) env(name string) string { return p.envs[name] }

// dockerArgs are the docker run flags that give a container what the pod's
// security context gives the runner container: Docker and the kubelet drive
// the same runtime settings (user, capability sets, no_new_privs, seccomp,
// read-only root). emptyDir volumes become tmpfs mounts with emptyDir's mode
// (0777, exec allowed); other volumes fresh anonymous volumes.
func (p *podContext) dockerArgs() ([]string, error) {
	var args []string
	uid, gid := p.pod.RunAsUser, p.pod.RunAsGroup
	if p.c.RunAsUser != nil {
		uid = p.c.RunAsUser
	}
	if p.c.RunAsGroup != nil {
		gid = p.c.RunAsGroup
	}
	if uid == nil {
		return nil, errors.New("the runner pod sets no runAsUser: the image's user would apply")
	}
	user := strconv.FormatInt(*uid, 10)
	if gid != nil {
		user += ":" + strconv.FormatInt(*gid, 10)
	}
	args = append(args, "--user", user)
	for _, c := range p.c.Capabilities.Drop {
		args = append(args, "--cap-drop", c)
	}
	for _, c := range p.c.Capabilities.Add {
		args = append(args, "--cap-add", c)
	}
	if p.c.Privileged != nil && *p.c.Privileged {
		args = append(args, "--privileged")
	}
	if ape := p.c.AllowPrivilegeEscalation; ape != nil && !*ape {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	seccomp := p.pod.SeccompProfile.Type
	if p.c.SeccompProfile.Type != "" {
		seccomp = p.c.SeccompProfile.Type
	}
	switch seccomp {
	case "", "RuntimeDefault":
		// Docker's default profile, the one RuntimeDefault names.
	case "Unconfined":
		args = append(args, "--security-opt", "seccomp=unconfined")
	default:
		return nil, fmt.Errorf("seccomp profile %q: no Docker equivalent here", seccomp)
	}
	if ro := p.c.ReadOnlyRootFilesystem; ro != nil && *ro {
		args = append(args, "--read-only")
	}
	mounts := append([]string(nil), p.mounts...)
	sort.Strings(mounts) // parents before what is mounted inside them
	for _, m := range mounts {
		switch {
		case p.readOnlyMount[m]:
			return nil, fmt.Errorf("read-only volume mount %s: no Docker equivalent here", m)
		case p.emptyDir[p.mountVolume[m]]:
			args = append(args, "--tmpfs", m+":exec,mode=0777")
		default:
			args = append(args, "--mount", "type=volume,dst="+m)
		}
	}
	return args, nil
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
