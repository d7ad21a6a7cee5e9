package process

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// An application desktopd launched in a process group of its own, which
// ignores SIGTERM and keeps writing into the home, is gone after a reset:
// the removal of the old home does not race it, and the new home stays
// empty. (Mousepad shutting down after desktopd's exit made 7 of 200 resets
// fail with "directory not empty" before stop killed such processes.)
func TestResetKillsLaunchedApplications(t *testing.T) {
	bin := buildDesktopd(t)
	o := Options{
		Config: config.Process{Desktopd: bin, Host: "127.0.0.1", BasePort: 27900 + os.Getpid()%500, NoDisplay: true},
		Dir:    t.TempDir(), Logger: zap.NewNop(),
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := p.Create(ctx, "vm1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Destroy(context.Background(), "vm1", inst) })
	home := p.home("vm1")
	// A marker file in a subdirectory, rewritten every 20 ms whatever
	// signal but SIGKILL arrives.
	script := `trap "" TERM HUP INT; mkdir -p "$HOME/.local/share"; while :; do echo x >"$HOME/.local/share/recent"; sleep 0.02; done`
	body, _ := json.Marshal(map[string]any{"command": []string{"/bin/sh", "-c", script}})
	resp, err := http.Post(inst.Endpoint+"/setup/launch", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("launch: status %d", resp.StatusCode)
	}
	recent := filepath.Join(home, ".local", "share", "recent")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(recent); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the launched application never wrote into the home")
		}
		time.Sleep(20 * time.Millisecond)
	}
	marker := envVMHome + "=" + home
	if got := markedPids(marker); len(got) < 2 {
		t.Fatalf("processes marked with the VM's home: %v, want desktopd and the application", got)
	}

	inst, err = p.Reset(ctx, "vm1", inst)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	// Only the new desktopd carries the marker now; give a straggler the
	// time it would need to write once more.
	time.Sleep(200 * time.Millisecond)
	if got := markedPids(marker); len(got) != 1 {
		t.Errorf("processes marked with the VM's home after reset: %v, want only the new desktopd", got)
	}
	if _, err := os.Stat(recent); !os.IsNotExist(err) {
		t.Errorf("the new home has %s (stat: %v): the old application outlived the reset", recent, err)
	}
}
