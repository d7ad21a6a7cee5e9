package vmmanager

import (
	"path/filepath"
	"testing"
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
