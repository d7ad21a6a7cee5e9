package modelgateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
)

// waitListening waits until addr accepts connections. It fails when the
// process exits first (gone: its exit was taken from exited) or after 20 s.
func waitListening(addr string, exited <-chan error) (gone bool, err error) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return false, nil
		}
		select {
		case err := <-exited:
			return true, fmt.Errorf("exited before listening on %s: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false, fmt.Errorf("not listening on %s after 20s", addr)
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// TestAcceptanceManagedExample runs the built binary on
// examples/modelgateway.managed.yaml: two fakellm replicas start and serve,
// one is restarted after kill -9, and SIGTERM stops both.
func TestAcceptanceManagedExample(t *testing.T) {
	gw := buildCmd(t, "modelgateway")
	fake := buildCmd(t, "fakellm")
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fake, filepath.Join(work, "bin", "fakellm")); err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs("../../examples/modelgateway.managed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		cmd                 *exec.Cmd
		out                 bytes.Buffer
		exited              = make(chan error, 1)
		openai, metricsAddr string
	)
	// Another test process may pick a port the gateway was given before it
	// binds it: start again on other ports when that happens.
	for attempt := 1; ; attempt++ {
		openai, metricsAddr = proctest.FreeAddr(t), proctest.FreeAddr(t)
		out.Reset()
		cmd = exec.Command(gw, "--config", cfg, "--grpc-addr", proctest.FreeAddr(t), "--http-addr", metricsAddr, "--openai-addr", openai)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "TMPDIR="+work)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := cmd
		go func() { exited <- c.Wait() }()
		gone, err := waitListening(openai, exited)
		if err == nil {
			break
		}
		if !gone { // still running: not listening in time
			c.Process.Kill()
			<-exited
		}
		if attempt == 3 || !strings.Contains(out.String(), "address already in use") {
			t.Fatalf("gateway did not start: %v\n%s", err, out.String())
		}
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("gateway output:\n%s", out.String())
		}
	}()
	serve := func() map[string]int {
		seen := map[string]int{}
		for range 6 {
			resp, err := http.Post("http://"+openai+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				seen[resp.Header.Get("X-Backend")]++
			}
		}
		return seen
	}
	both := func() bool { s := serve(); return s["local-0"] > 0 && s["local-1"] > 0 }
	waitForD(t, 30*time.Second, "both replicas serving", both)
	kids := childrenOf(t, cmd.Process.Pid)
	if len(kids) != 2 {
		t.Fatalf("gateway children %v, want the two fakellm replicas", kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForD(t, 30*time.Second, "a restarted replica", func() bool {
		now := childrenOf(t, cmd.Process.Pid)
		return len(now) == 2 && !slices.Contains(now, kids[0])
	})
	waitForD(t, 30*time.Second, "both replicas serving after the restart", both)
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`modelgateway_replica_restarts_total{backend=`)) ||
		!bytes.Contains(metrics, []byte(`modelgateway_replica_state{backend="local-0",state="ready"} 1`)) {
		t.Fatalf("metrics lack the replica state and restarts")
	}
	last := childrenOf(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gateway exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not stop on SIGTERM")
	}
	for _, pid := range last {
		if len(groupMembers(t, pid)) != 0 {
			t.Fatalf("replica group %d survived the gateway", pid)
		}
	}
}
