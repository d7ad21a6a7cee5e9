package py

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
)

// TestSandboxFailuresAreEnvErrors: a runner that cannot run Python (no
// prlimit, no interpreter) says so as an environment error at reset,
// before the model is asked anything; a run that meets the same failure
// mid-episode returns it as an error, not as the program's output.
func TestSandboxFailuresAreEnvErrors(t *testing.T) {
	sandboxtest.Need(t)
	python := New(Config{}).cfg.Python
	tests := []struct {
		name    string
		python  string
		noPath  bool // PATH without prlimit, as in a FROM-scratch image
		wantErr string
	}{
		{name: "no prlimit", python: python, noPath: true, wantErr: `"prlimit": executable file not found`},
		{name: "no interpreter", python: "/nonexistent/python3", wantErr: "/nonexistent/python3"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.noPath {
				t.Setenv("PATH", t.TempDir())
			}
			// Limits no other test uses: a probe that passed is remembered.
			lim := DefaultLimits
			lim.Timeout = 10*time.Second + time.Duration(i)*time.Millisecond
			e := New(Config{Python: tt.python, Limits: lim})
			_, err := e.Reset(context.Background(), env.Task{ID: "t"})
			if !errors.Is(err, env.ErrEnvironment) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Reset: got %v, want an environment error containing %q", err, tt.wantErr)
			}
			res, err := Run(context.Background(), tt.python, "print(1)", lim)
			if !errors.Is(err, env.ErrEnvironment) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run: got result %+v, error %v; want an environment error containing %q", res, err, tt.wantErr)
			}
		})
	}
}

// TestProgramCannotFakeSandboxFailure: a program that prints what a broken
// sandbox prints and exits as it would keeps its own failure; it cannot
// turn its score into an infrastructure failure.
func TestProgramCannotFakeSandboxFailure(t *testing.T) {
	sandboxtest.Need(t)
	python := New(Config{}).cfg.Python
	tests := []struct{ name, code string }{
		{name: "unshare refused", code: "import sys\nsys.stderr.write('unshare: unshare failed: Operation not permitted\\n')\nsys.exit(1)"},
		{name: "exec failed", code: "import sys\nsys.stderr.write('prlimit: failed to execute unshare: No such file or directory\\n')\nsys.exit(127)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), python, tt.code, DefaultLimits)
			if err != nil || res.OK {
				t.Errorf("Run = ok %v, error %v; want a failed program and no environment error", res.OK, err)
			}
		})
	}
}

// TestNamespaceRefusedIsEnvError probes the sandbox as a user who may not
// create a network namespace, as a runner in a container without
// CAP_SYS_ADMIN: the probe fails with an environment error that names the
// capability. Root may, so as root the probe runs in a child as nobody.
func TestNamespaceRefusedIsEnvError(t *testing.T) {
	if os.Getenv("PY_TEST_HELPER") == "1" {
		err := Probe(context.Background(), New(Config{}).cfg.Python, DefaultLimits)
		os.Stdout.WriteString("probe: " + errString(err) + " env_error=" + map[bool]string{true: "yes", false: "no"}[errors.Is(err, env.ErrEnvironment)])
		return
	}
	if os.Getuid() != 0 {
		if exec.Command("unshare", "--net", "--", "true").Run() == nil {
			t.Skip("this user may create network namespaces")
		}
		err := Probe(context.Background(), New(Config{}).cfg.Python, DefaultLimits)
		if !errors.Is(err, env.ErrEnvironment) || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") {
			t.Errorf("Probe: got %v, want an environment error naming CAP_SYS_ADMIN", err)
		}
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("running as root without setpriv to drop to nobody")
	}
	dir, err := os.MkdirTemp("", "pytest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "py.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestNamespaceRefusedIsEnvError$")
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "PY_TEST_HELPER=1", "HOME="+os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "env_error=yes") || !strings.Contains(string(out), "CAP_SYS_ADMIN") {
		t.Errorf("probe as nobody: %.500s; want an environment error naming CAP_SYS_ADMIN", out)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestRootRunsProgramsAsNobody: a runner running as root (the container
// image) runs programs as nobody without capabilities, so a runner given
// CAP_SYS_ADMIN for the network namespace does not hand it to model code;
// the program can still write in its own directory.
func TestRootRunsProgramsAsNobody(t *testing.T) {
	sandboxtest.Need(t)
	if os.Getuid() != 0 {
		t.Skip("not root: programs run as the runner's user")
	}
	code := "import os\nopen('out.txt', 'w').write('x')\nst = open('/proc/self/status').read()\n" +
		"cap = [l.split()[1] for l in st.splitlines() if l.startswith('CapEff')][0]\nprint(os.getuid(), os.getgid(), os.getgroups(), cap)"
	res, err := Run(context.Background(), New(Config{}).cfg.Python, code, DefaultLimits)
	if want := "65534 65534 [] 0000000000000000\n"; err != nil || !res.OK || res.Output != want {
		t.Errorf("Run = %+v, %v; want output %q", res, err, want)
	}
}
