package py

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
)

// TestRunPassesNoSecrets runs a local Python program while the runner holds
// its tokens in its environment, the way the daemon reads them: neither the
// command line of any process below the test nor the program's environment
// carries them, so model-written code cannot print them.
func TestRunPassesNoSecrets(t *testing.T) {
	sandboxtest.Need(t)
	const token = "peer-token-7f3c9a"
	t.Setenv("ROLLOUTMESH_PEER_TOKEN", token)
	t.Setenv("ROLLOUTMESH_AUTH_TOKEN", token)
	t.Setenv("DESKTOPD_TOKEN", token)
	lim := DefaultLimits
	lim.Timeout = 20 * time.Second
	done := make(chan struct{})
	var out string
	go func() {
		defer close(done)
		res, _ := Run(context.Background(), New(Config{}).cfg.Python,
			"import os, time\nprint(sorted(os.environ.items()))\ntime.sleep(1.5)", lim)
		out = res.Output + res.Error
	}()
	var seenPython bool
	for !seenPython {
		select {
		case <-done:
			t.Fatalf("the program ended before its processes were seen: %s", out)
		case <-time.After(20 * time.Millisecond):
		}
		for _, p := range proctest.CheckArgv(t, token) {
			if len(p.Argv) > 0 && strings.Contains(p.Argv[0], "python") {
				seenPython = true
			}
		}
	}
	<-done
	if strings.Contains(out, token) || !strings.Contains(out, "PATH") {
		t.Errorf("the program's environment %q holds a token (or was not printed)", out)
	}
}

// TestRunnerEnvironmentHidden runs the runner's side in a child process
// started with a token in its environment (the only environment /proc
// shows), and a program that reads the environment of its parent, the
// runner: it must not get it. Root reads every process's /proc files, so
// as root the child runs as nobody.
func TestRunnerEnvironmentHidden(t *testing.T) {
	if os.Getenv("PY_TEST_HELPER") == "1" {
		lim := DefaultLimits
		lim.AllowNetwork = true // unshare --net needs privileges nobody lacks
		res, _ := Run(context.Background(), New(Config{}).cfg.Python, `
import os
try:
    print(open("/proc/%d/environ" % os.getppid(), "rb").read())
except OSError as e:
    print("refused:", e)
`, lim)
		os.Stdout.WriteString(res.Output + res.Error)
		return
	}
	const token = "peer-token-4b1d0e"
	bin := os.Args[0]
	var argv []string
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("running as root without setpriv to drop to nobody")
		}
		dir, err := os.MkdirTemp("", "pytest-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "py.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		argv = []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	argv = append(argv, bin, "-test.run=^TestRunnerEnvironmentHidden$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "PY_TEST_HELPER=1", "HOME="+os.TempDir(), "ROLLOUTMESH_PEER_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if strings.Contains(string(out), token) || !strings.Contains(string(out), "refused") {
		t.Errorf("a local program read the runner's environment: %.300s", out)
	}
}
