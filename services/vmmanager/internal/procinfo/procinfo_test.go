package procinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("this process reported dead")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	if Alive(cmd.Process.Pid) {
		t.Errorf("reaped pid %d reported alive", cmd.Process.Pid)
	}
	// A zombie (exited, not yet reaped) is dead too.
	z := exec.Command("true")
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	defer z.Wait()
	for i := 0; i < 200 && Alive(z.Process.Pid); i++ {
		exec.Command("sleep", "0.01").Run()
	}
	if Alive(z.Process.Pid) {
		t.Errorf("zombie pid %d reported alive", z.Process.Pid)
	}
}

func TestCmdline(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Until the child has exec'd, /proc shows the test binary's line.
	want := "sleep 30"
	got := ""
	for i := 0; i < 200; i++ {
		if got = strings.TrimSpace(Cmdline(cmd.Process.Pid)); got == want {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got != want {
		t.Errorf("Cmdline = %q, want %q", got, want)
	}
	if got := Cmdline(-1); got != "" {
		t.Errorf("Cmdline(-1) = %q, want empty", got)
	}
}

func TestTail(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"short", "boot failed\n", "boot failed"},
		{"long", strings.Repeat("x", 1000) + "\nthe end\n", strings.Repeat("x", 391) + "\nthe end"},
		{"empty", "", ""},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := Tail(p); got != tc.want {
			t.Errorf("%s: Tail = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := Tail(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("Tail(missing) = %q, want empty", got)
	}
}
