package command

import (
	"os"
	"testing"
)

// TestMain removes the desktopd that desktopdOnPath built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if desktopdDir != "" {
		os.RemoveAll(desktopdDir)
	}
	os.Exit(code)
}
