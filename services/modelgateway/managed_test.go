package modelgateway

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
)

// buildOnce builds the repo's commands once per test binary.
var (
	buildMu  sync.Mutex
	builtBin = map[string]string{}
)

// buildCmd builds ./cmd/<name> into a temporary directory and returns the
// binary's path. Without a go tool it skips, or fails under CI.
func buildCmd(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := builtBin[name]; ok {
		return p
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("go tool not found to build %s", name)
			}
			t.Skipf("go tool not found to build %s", name)
		}
	}
	dir, err := os.MkdirTemp("", "modelgateway-test-bin")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command(gobin, "build", "-o", out, "./cmd/"+name)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	builtBin[name] = out
	return out
}

func launchedConfig(t *testing.T, command string, replicas int, mod func(*LaunchConfig)) *FileConfig {
	t.Helper()
	base := proctest.FreePortRange(t, replicas+4)
	lc := &LaunchConfig{
		Command: command, Replicas: replicas, Ports: fmt.Sprintf("%d-%d", base, base+replicas+3),
		LogDir: t.TempDir(), GracePeriod: 5 * time.Second, StartupTimeout: time.Minute,
		Restart: launch.RestartConfig{BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second, MaxCrashes: 5, Window: time.Minute},
	}
	if mod != nil {
		mod(lc)
	}
	return &FileConfig{
		Backends: []BackendConfig{{ID: "local", Kind: KindVLLM, Model: "fake-model", Launch: lc}},
		Routing:  RoutingConfig{Policy: "round_robin"},
		Retry:    RetryConfig{MaxAttempts: 2, BackoffBase: time.Millisecond},
	}
}

func listBackends(t *testing.T, h *harness) []*rmv1.Backend {
	t.Helper()
	res, err := h.cli.ListBackends(ctxT(t, 5*time.Second), &rmv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Backends
}

func replicaState(t *testing.T, h *harness, i int) launch.Status {
	t.Helper()
	return h.svc.launcher.Replicas()[i].Status()
}

// waitForD polls cond until it holds or d passes.
func waitForD(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func chatHTTP(h *harness) (int, string, error) {
	resp, err := http.Post(h.http+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Backend"), nil
}

func TestLaunchStartupGating(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name} --slow-start 5s", 1, nil)
	start := time.Now()
	h := startGateway(t, fc, nil)
	// The replica is "starting" a moment before its process has a pid (on
	// a loaded machine, long enough for the first ListBackends to see it).
	waitFor(t, "the replica's process", func() bool { return listBackends(t, h)[0].GetReplica().GetPid() != 0 })
	// While the replica loads (5 s), every request is refused by the
	// gateway and none reaches the replica.
	var before int
	for time.Since(start) < 4*time.Second {
		code, _, err := chatHTTP(h)
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			t.Fatalf("answered %v after start, before the replica was ready", time.Since(start))
		}
		bs := listBackends(t, h)
		if bs[0].Requests != 0 || bs[0].Healthy {
			t.Fatalf("replica got %d requests (healthy %v) while starting", bs[0].Requests, bs[0].Healthy)
		}
		if r := bs[0].GetReplica(); r.GetState() != "starting" || r.GetPid() == 0 || r.GetLogFile() == "" {
			t.Fatalf("replica = %v, want a starting process with its pid and log", r)
		}
		before++
		time.Sleep(100 * time.Millisecond)
	}
	waitForD(t, 10*time.Second, "ready replica", func() bool { return replicaState(t, h, 0).State == launch.Ready })
	if el := time.Since(start); el < 5*time.Second {
		t.Fatalf("ready after %v, before fakellm's 5 s slow start", el)
	}
	code, backend, err := chatHTTP(h)
	if err != nil || code != http.StatusOK || backend != "local-0" {
		t.Fatalf("after ready: status %d backend %q err %v", code, backend, err)
	}
	if before < 10 {
		t.Fatalf("only %d probes before ready", before)
	}
}

func TestLaunchRestartWithBackoff(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	clk := clock.NewFake(time.Unix(1e9, 0))
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name}", 2, func(lc *LaunchConfig) {
		lc.Restart.BackoffBase, lc.Restart.BackoffMax = 30*time.Second, time.Minute
	})
	h := startGateway(t, fc, clk)
	waitForD(t, 20*time.Second, "both ready", func() bool {
		return replicaState(t, h, 0).State == launch.Ready && replicaState(t, h, 1).State == launch.Ready
	})
	old := replicaState(t, h, 0).PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForD(t, 10*time.Second, "backoff", func() bool { return replicaState(t, h, 0).State == launch.Backoff })
	// During the backoff the other replica serves everything.
	for range 6 {
		code, backend, err := chatHTTP(h)
		if err != nil || code != http.StatusOK || backend != "local-1" {
			t.Fatalf("during backoff: status %d backend %q err %v", code, backend, err)
		}
	}
	// No restart before the injected clock moves past the backoff.
	time.Sleep(500 * time.Millisecond)
	if st := replicaState(t, h, 0); st.State != launch.Backoff || st.PID != old {
		t.Fatalf("restarted before the backoff passed: %+v", st)
	}
	clk.Advance(29 * time.Second)
	time.Sleep(200 * time.Millisecond)
	if st := replicaState(t, h, 0); st.State != launch.Backoff {
		t.Fatalf("restarted after 29 s of a 30 s backoff: %+v", st)
	}
	clk.Advance(time.Second)
	waitForD(t, 20*time.Second, "restarted replica ready", func() bool {
		st := replicaState(t, h, 0)
		return st.State == launch.Ready && st.PID != old
	})
	if st := replicaState(t, h, 0); st.Restarts != 1 {
		t.Fatalf("restarts = %d, want 1", st.Restarts)
	}
	seen := map[string]bool{}
	for range 4 {
		_, backend, _ := chatHTTP(h)
		seen[backend] = true
	}
	if !seen["local-0"] || !seen["local-1"] {
		t.Fatalf("after restart served by %v, want both", seen)
	}
	if got := testutil.ToFloat64(h.svc.met.ReplicaRestarts.WithLabelValues("local-0")); got != 1 {
		t.Fatalf("restarts metric = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.svc.met.ReplicaState.WithLabelValues("local-0", "ready")); got != 1 {
		t.Fatalf("ready metric = %v, want 1", got)
	}
}

func TestLaunchCrashLoopFails(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name} --script /nonexistent/script.jsonl", 1, func(lc *LaunchConfig) {
		lc.Restart = launch.RestartConfig{BackoffBase: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond, MaxCrashes: 3, Window: time.Minute}
	})
	h := startGateway(t, fc, nil)
	waitForD(t, 20*time.Second, "failed replica", func() bool { return replicaState(t, h, 0).State == launch.Failed })
	st := replicaState(t, h, 0)
	if st.Restarts != 2 {
		t.Fatalf("restarts = %d, want 2 (3 crashes)", st.Restarts)
	}
	bs := listBackends(t, h)
	r := bs[0].GetReplica()
	if r.GetState() != "failed" || r.GetRestarts() != 2 || r.GetLogFile() != st.LogPath {
		t.Errorf("replica = %v, want failed after 2 restarts, log %s", r, st.LogPath)
	}
	for _, want := range []string{"crash loop: 3 crashes", "/nonexistent/script.jsonl: no such file or directory"} {
		if !strings.Contains(r.GetDetail(), want) {
			t.Errorf("replica detail lacks %q:\n%s", want, r.GetDetail())
		}
	}
	// It stays failed: no fourth start.
	time.Sleep(300 * time.Millisecond)
	if got := replicaState(t, h, 0); got.Restarts != 2 || got.State != launch.Failed {
		t.Fatalf("after failing: %+v", got)
	}
	if code, _, _ := chatHTTP(h); code != http.StatusServiceUnavailable {
		t.Fatalf("chat with the only replica failed: status %d, want 503", code)
	}
}

func TestLaunchPortTaken(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name}", 1, nil)
	lo, _, _ := launch.ParsePorts(fc.Backends[0].Launch.Ports)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := startGateway(t, fc, nil)
	waitForD(t, 20*time.Second, "ready", func() bool { return replicaState(t, h, 0).State == launch.Ready })
	if got := replicaState(t, h, 0).Port; got == lo {
		t.Fatalf("replica took port %d, which was in use", lo)
	}
	if code, _, err := chatHTTP(h); err != nil || code != http.StatusOK {
		t.Fatalf("status %d err %v", code, err)
	}

	// A range with no free port is refused at start, naming the field.
	fc2 := launchedConfig(t, fake+" --addr {host}:{port} --model {name}", 1, nil)
	fc2.Backends[0].Launch.Ports = strconv.Itoa(lo)
	_, err = New(context.Background(), Config{File: fc2}, daemontest.Env(t))
	if err == nil || !strings.Contains(err.Error(), "backends[0].launch.ports") || !strings.Contains(err.Error(), strconv.Itoa(lo)) {
		t.Fatalf("New with a taken port: %v", err)
	}
}

// groupMembers lists live processes of process group pgid (zombies, which
// only wait for a reaper, excluded).
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func TestLaunchDrainStopsEveryChild(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	// A shell that starts the server and a helper, and ignores SIGTERM
	// itself: the group's SIGKILL after the grace period takes them all.
	fc := launchedConfig(t, "trap '' TERM; "+fake+" --addr {host}:{port} --model {name} & sleep 600 & wait", 2, func(lc *LaunchConfig) {
		lc.Shell = true
		lc.GracePeriod = time.Second
	})
	env := daemontest.Env(t)
	svc, err := New(context.Background(), Config{File: fc}, env)
	if err != nil {
		t.Fatal(err)
	}
	reps := svc.launcher.Replicas()
	waitForD(t, 20*time.Second, "both ready", func() bool {
		return reps[0].Status().State == launch.Ready && reps[1].Status().State == launch.Ready
	})
	var pgids []int
	for _, r := range reps {
		pg := r.Status().PID
		if n := len(groupMembers(t, pg)); n < 3 {
			t.Fatalf("group %d has %d processes, want sh, fakellm and sleep", pg, n)
		}
		pgids = append(pgids, pg)
	}
	start := time.Now()
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("stop took %v", el)
	}
	for _, pg := range pgids {
		waitForD(t, 2*time.Second, "group gone", func() bool { return len(groupMembers(t, pg)) == 0 })
	}
	for _, r := range reps {
		if st := r.Status(); st.State != launch.Stopped {
			t.Fatalf("replica %s state %s after stop", st.ID, st.State)
		}
	}
}

func TestLaunchAPIKeyOnlyInEnvironment(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	const secret = "sk-test-launch-secret-4711"
	t.Setenv("LOCAL_TEST_KEY", secret)
	t.Setenv("ROLLOUTMESH_AUTH_TOKEN", "gateway-token-not-for-servers")
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name}", 1, func(lc *LaunchConfig) {
		lc.ServerAPIKeyEnv = "VLLM_API_KEY"
		lc.GPUs = []string{"2,3"}
		lc.Env = map[string]string{"HF_HOME": "/data/hf"}
	})
	fc.Backends[0].APIKeyEnv = "LOCAL_TEST_KEY"
	h := startGateway(t, fc, nil)
	waitForD(t, 20*time.Second, "ready", func() bool { return replicaState(t, h, 0).State == launch.Ready })
	pid := replicaState(t, h, 0).PID
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte(secret)) {
		t.Fatalf("API key on the command line: %q", cmdline)
	}
	if !bytes.Contains(cmdline, []byte("fake-model")) {
		t.Fatalf("cmdline %q lacks the filled {name}", cmdline)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		vars[k] = v
	}
	for k, want := range map[string]string{"VLLM_API_KEY": secret, "CUDA_VISIBLE_DEVICES": "2,3", "HF_HOME": "/data/hf"} {
		if vars[k] != want {
			t.Errorf("child env %s = %q, want %q", k, vars[k], want)
		}
	}
	if _, ok := vars["ROLLOUTMESH_AUTH_TOKEN"]; ok {
		t.Error("the gateway's own token reached the server's environment")
	}
	logb, err := os.ReadFile(replicaState(t, h, 0).LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(logb, []byte(secret)) {
		t.Fatal("API key in the replica log")
	}
}

func TestLaunchConfigErrors(t *testing.T) {
	base := func() *LaunchConfig {
		return &LaunchConfig{Command: "srv --port {port}", Ports: "18001-18002", Replicas: 2}
	}
	tests := []struct {
		name string
		mod  func(*BackendConfig)
		want string
	}{
		{"base url", func(b *BackendConfig) { b.BaseURL = "http://x:1" }, "backends[0].base_url: must be empty with launch"},
		{"no port", func(b *BackendConfig) { b.Launch.Command = "srv" }, "backends[0].launch.command: must contain {port}"},
		{"placeholder", func(b *BackendConfig) { b.Launch.Command = "srv {port} {key}" }, "unknown placeholder {key}"},
		{"quote", func(b *BackendConfig) { b.Launch.Command = "srv '{port}" }, "launch.command: unterminated single quote"},
		{"ports", func(b *BackendConfig) { b.Launch.Ports = "9-2" }, "launch.ports"},
		{"few ports", func(b *BackendConfig) { b.Launch.Ports = "18001" }, "fewer than the 2 replicas"},
		{"gpus", func(b *BackendConfig) { b.Launch.GPUs = []string{"0"} }, "launch.gpus: 1 GPU sets for 2 replicas"},
		{"env", func(b *BackendConfig) { b.Launch.Env = map[string]string{"A=B": "x"} }, "launch.env"},
		{"key env", func(b *BackendConfig) { b.Launch.ServerAPIKeyEnv = "bad name" }, "launch.server_api_key_env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &FileConfig{Backends: []BackendConfig{{ID: "l", Model: "m", Launch: base()}}}
			tt.mod(&fc.Backends[0])
			err := fc.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	fc := &FileConfig{Backends: []BackendConfig{{ID: "l", Model: "m", Launch: base()}}, Checkpoints: &CheckpointsConfig{Complete: "size"}}
	if err := fc.Validate(); err == nil || !strings.Contains(err.Error(), "checkpoints.dir") {
		t.Fatalf("checkpoints without dir: %v", err)
	}
}

func TestLaunchStartupTimeout(t *testing.T) {
	fake := buildCmd(t, "fakellm")
	fc := launchedConfig(t, fake+" --addr {host}:{port} --model {name} --slow-start 1m", 1, func(lc *LaunchConfig) {
		lc.StartupTimeout = time.Second
		lc.GracePeriod = 2 * time.Second
		lc.Restart = launch.RestartConfig{BackoffBase: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond, MaxCrashes: 2, Window: time.Minute}
	})
	h := startGateway(t, fc, nil)
	waitForD(t, 20*time.Second, "failed replica", func() bool { return replicaState(t, h, 0).State == launch.Failed })
	st := replicaState(t, h, 0)
	if !strings.Contains(st.Detail, "not ready within startup_timeout 1s") {
		t.Fatalf("detail %q", st.Detail)
	}
	for _, pid := range h.svc.launcher.Replicas()[0].PIDs() {
		if n := len(groupMembers(t, pid)); n != 0 {
			t.Fatalf("timed-out replica %d still has %d processes", pid, n)
		}
	}
}
