package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/dial"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// repoRoot is the repository root. go test runs a package's tests in its
// directory; the source file's own path is no guide, since -trimpath (the
// Makefile's builds) makes it a module path.
func repoRoot() string {
	root, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return root
}

func examplePath(p string) string { return filepath.Join(repoRoot(), "examples", p) }

var (
	desktopdOnce sync.Once
	desktopdBin  string
	desktopdErr  error
)

// needX fails under CI and skips elsewhere when the machine cannot run a
// real X server for desktopd.
func needX(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"Xvfb", "openbox", "xterm"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing; desktop tests need xvfb, openbox and xterm (apt-get install xvfb openbox xterm)", bin)
			}
			t.Skipf("%s is missing: install xvfb, openbox and xterm to run the desktop tests", bin)
		}
	}
}

// buildDesktopd builds the real guest server once per test binary.
func buildDesktopd(t *testing.T) string {
	t.Helper()
	desktopdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runner-test-desktopd-")
		if err != nil {
			desktopdErr = err
			return
		}
		desktopdBin = filepath.Join(dir, "desktopd")
		cmd := exec.Command("go", "build", "-o", desktopdBin, "github.com/rolloutmesh/rolloutmesh/guest/desktopd/cmd/desktopd")
		cmd.Dir = filepath.Join(repoRoot(), "guest/desktopd")
		if out, err := cmd.CombinedOutput(); err != nil {
			desktopdErr = fmt.Errorf("build desktopd: %v\n%s", err, out)
		}
	})
	if desktopdErr != nil {
		t.Fatal(desktopdErr)
	}
	return desktopdBin
}

// guestProc is a desktopd process with its own Xvfb.
type guestProc struct {
	URL string
	cmd *exec.Cmd
}

// Kill ends desktopd at once, the way a crashed VM stops answering.
func (g *guestProc) Kill() { _ = g.cmd.Process.Signal(syscall.SIGKILL) }

// startDesktopd runs a real desktopd on a fresh Xvfb and waits until it
// answers /healthz.
func startDesktopd(t *testing.T) *guestProc {
	t.Helper()
	needX(t)
	bin := buildDesktopd(t)
	port := proctest.FreePort(t)
	cmd := exec.Command(bin, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--xvfb", "--screen", "1280x720", "--home", t.TempDir(), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			t.Fatal("desktopd exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("desktopd not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &guestProc{URL: url, cmd: cmd}
}

// gateway is a real modelgateway in front of fakellm.
type gateway struct {
	Addr   string
	Client rmv1.ModelGatewayClient
	Fake   *fakellm.Instance
}

// startGateway runs fakellm with cfg behind a real modelgateway.
func startGateway(t *testing.T, cfg fakellm.Config) *gateway {
	t.Helper()
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	env := daemontest.Env(t)
	svc, err := modelgateway.New(context.Background(), modelgateway.Config{File: &modelgateway.FileConfig{
		Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: f.URL, Kind: modelgateway.KindVLLM, Model: "fake-model"}},
		Retry:    modelgateway.RetryConfig{MaxAttempts: 1},
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
	addr := daemontest.Serve(t, env, svc)
	return &gateway{Addr: addr, Client: rmv1.NewModelGatewayClient(conn(t, addr)), Fake: f}
}

// demoScript is the bundled fakellm script.
func demoScript(t *testing.T) []fakellm.Rule {
	t.Helper()
	rules, err := fakellm.LoadScript(examplePath("fakellm/demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// startStorage runs the real storage service on SQLite and files.
func startStorage(t *testing.T) (string, rmv1.StorageClient) {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := storage.New(context.Background(), storage.Config{}, env)
	if err != nil {
		t.Fatal(err)
	}
	addr := daemontest.Serve(t, env, svc)
	return addr, rmv1.NewStorageClient(conn(t, addr))
}

func conn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := dial.Conn(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// haveFFmpeg says whether desktopd can record here; CI must have it.
func haveFFmpeg(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ffmpeg is missing; recording tests need it (apt-get install ffmpeg)")
		}
		t.Log("ffmpeg is missing: the recording is not checked")
		return false
	}
	return true
}
