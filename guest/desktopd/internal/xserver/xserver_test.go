package xserver

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required when CI is set: %v", tool, err)
			}
			t.Skipf("%s not installed (apt-get install xvfb x11-utils): %v", tool, err)
		}
	}
}

// TestDisplayNeedsCookie: a local client without the cookie (any other
// user of the machine) is refused; desktopd's children, with the
// environment Env gives them, get in.
func TestDisplayNeedsCookie(t *testing.T) {
	requireTools(t, "Xvfb", "xdpyinfo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Width: 320, Height: 240, Dir: t.TempDir()}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	probe := func(env []string) error {
		cmd := exec.CommandContext(ctx, "xdpyinfo", "-display", s.Display())
		cmd.Env = env
		return cmd.Run()
	}
	stranger := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XAUTHORITY=" + t.TempDir() + "/none"}
	if err := probe(stranger); err == nil {
		t.Errorf("a client without the cookie connected to %s", s.Display())
	}
	if err := probe(append([]string{"PATH=" + os.Getenv("PATH")}, s.Env()...)); err != nil {
		t.Errorf("a child with Env() could not connect to %s: %v", s.Display(), err)
	}
	file := os.Getenv("XAUTHORITY")
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("cookie file %s: %v, mode %v; want 0600", file, err, st.Mode().Perm())
	}
	s.Stop()
	if _, err := os.Stat(file); err == nil {
		t.Errorf("cookie file %s left behind after the last display stopped", file)
	}
}
