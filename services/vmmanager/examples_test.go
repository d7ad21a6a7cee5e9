package vmmanager

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// TestExamplesParse keeps the shipped example configs valid.
func TestExamplesParse(t *testing.T) {
	for _, f := range []string{"vmmanager.process.yaml", "vmmanager.docker.yaml"} {
		pools, err := LoadConfigFile(filepath.Join("..", "..", "examples", f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(pools) == 0 || pools[0].Size != 2 {
			t.Errorf("%s: pools = %+v, want a first pool of size 2", f, pools)
		}
	}
}

// TestLoadConfigFileRefusesNonRegular: a FIFO would block the start for
// ever and a device never ends; both are refused at once.
func TestLoadConfigFileRefusesNonRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pools.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", t.TempDir()} {
		done := make(chan error, 1)
		go func() { _, err := LoadConfigFile(path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, boundedread.ErrNotRegular) {
				t.Errorf("LoadConfigFile(%s) = %v, want ErrNotRegular", path, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("LoadConfigFile(%s) still reading after 30s", path)
		}
	}
}
