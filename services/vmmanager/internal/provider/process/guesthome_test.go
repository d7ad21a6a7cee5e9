package process

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
)

var (
	desktopdOnce sync.Once
	desktopdPath string
	desktopdErr  error
)

// buildDesktopd builds the real guest server once per test binary.
func buildDesktopd(t *testing.T) string {
	t.Helper()
	desktopdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "process-desktopd")
		if err != nil {
			desktopdErr = err
			return
		}
		desktopdPath = filepath.Join(dir, "desktopd")
		cmd := exec.Command("go", "build", "-o", desktopdPath, "./cmd/desktopd")
		cmd.Dir = filepath.Join("..", "..", "..", "..", "..", "guest", "desktopd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			desktopdErr = &buildError{err: err, out: string(out)}
		}
	})
	if desktopdErr != nil {
		t.Fatalf("build desktopd: %v", desktopdErr)
	}
	return desktopdPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// execute runs a shell command through the guest's POST /execute and
// returns its stdout.
func execute(t *testing.T, inst pool.Instance, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command, "shell": true, "timeout": 20})
	resp, err := http.Post(inst.Endpoint+"/execute", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("execute %q: %v", command, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		Output     string `json:"output"`
		Error      string `json:"error"`
		ReturnCode int    `json:"returncode"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("execute %q: status %d, %s", command, resp.StatusCode, raw)
	}
	if out.ReturnCode != 0 {
		t.Fatalf("execute %q: exit %d: %s", command, out.ReturnCode, out.Error)
	}
	return out.Output
}

func TestNewGuestHomeValidation(t *testing.T) {
	for _, tc := range []struct {
		name, guestHome string
	}{
		{"relative", "home/user"},
		{"root", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Config: config.Process{Desktopd: "/bin/true"}, Dir: t.TempDir(), GuestHome: tc.guestHome})
			if err == nil {
				t.Errorf("New(GuestHome=%q) = nil error, want one", tc.guestHome)
			}
		})
	}
	if os.Geteuid() != 0 {
		_, err := New(Options{Config: config.Process{Desktopd: "/bin/true"}, Dir: t.TempDir(), GuestHome: "/home/user"})
		if err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("New(GuestHome) as euid %d = %v, want an error saying it needs root", os.Geteuid(), err)
		}
	}
}

// Two VMs with the same GuestHome each see their own home there, write
// through it into their own VM directory, and leave the host's mount point
// untouched; a restarted vmmanager re-adopts them and sweeps the unknown one.
func TestGuestHomePrivateMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace needs root")
	}
	if _, err := exec.LookPath("mount"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("mount(8) is missing")
		}
		t.Skip("mount(8) is missing")
	}
	bin := buildDesktopd(t)
	// A mount point of the test's own: the mechanism is the one /home/user
	// gets, without touching the host's /home.
	guestHome := filepath.Join(t.TempDir(), "home", "user")
	o := Options{
		Config: config.Process{
			Desktopd: bin, Host: "127.0.0.1", BasePort: 27400 + os.Getpid()%500, NoDisplay: true,
		},
		Dir: t.TempDir(), GuestHome: guestHome, Logger: zap.NewNop(),
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	insts := map[string]pool.Instance{}
	for _, id := range []string{"vm1", "vm2"} {
		inst, err := p.Create(ctx, id)
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		insts[id] = inst
		t.Cleanup(func() { p.Destroy(context.Background(), id, inst) })
		if err := os.WriteFile(filepath.Join(p.home(id), "who"), []byte(id), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for id, inst := range insts {
		got := execute(t, inst, `cat "`+guestHome+`/who"; echo; echo "$HOME"; pwd; echo from-`+id+` >~/written`)
		want := id + "\n" + guestHome + "\n" + guestHome + "\n"
		if got != want {
			t.Errorf("%s sees %q, want %q", id, got, want)
		}
		b, err := os.ReadFile(filepath.Join(p.home(id), "written"))
		if err != nil || string(b) != "from-"+id+"\n" {
			t.Errorf("%s wrote %q, %v into its VM home; want from-%s", id, b, err, id)
		}
	}
	if entries, err := os.ReadDir(guestHome); err != nil || len(entries) != 0 {
		t.Errorf("host's mount point holds %v (%v), want it empty: the bind mount leaked", entries, err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), guestHome) {
		t.Errorf("the host's mount table has %s", guestHome)
	}

	// A new vmmanager adopts vm1 by its environment marker and sweeps vm2,
	// which it does not know.
	p2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Adopt(ctx, "vm1", insts["vm1"]); err != nil {
		t.Errorf("adopt vm1: %v", err)
	}
	if err := p2.Adopt(ctx, "vm2", insts["vm1"]); err == nil {
		t.Error("vm1's desktopd adopted as vm2")
	}
	if err := p2.Sweep(ctx, map[string]bool{"vm1": true}); err != nil {
		t.Fatal(err)
	}
	if err := p2.Check(ctx, insts["vm1"]); err != nil {
		t.Errorf("vm1 after the sweep: %v", err)
	}
	if err := p2.Check(ctx, insts["vm2"]); err == nil {
		t.Error("vm2 survived the sweep")
	}
}
