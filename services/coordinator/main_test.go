package coordinator_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binaries the tests built (coordinator, desktopd,
// vmmanager) once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, p := range []string{binPath, desktopdPath, vmmPath} {
		if p != "" {
			os.RemoveAll(filepath.Dir(p))
		}
	}
	os.Exit(code)
}
