package proctest

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestDescendantsFindsGrandchildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait", "marker-arg")
	cmd.Env = append(os.Environ(), "PROCTEST_MARK=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var sh, sleep *Process
	deadline := time.Now().Add(5 * time.Second)
	for (sh == nil || sleep == nil) && time.Now().Before(deadline) {
		procs, err := Descendants(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range procs {
			switch {
			case p.PID == cmd.Process.Pid:
				sh = &procs[i]
			case len(p.Argv) > 0 && p.Argv[0] == "sleep" && p.PPID == cmd.Process.Pid:
				sleep = &procs[i]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sh == nil || sleep == nil {
		t.Fatalf("Descendants found sh %v and its child sleep %v, want both", sh, sleep)
	}
	if !slices.Contains(sh.Argv, "marker-arg") || !slices.Contains(sh.Environ, "PROCTEST_MARK=1") {
		t.Errorf("sh argv %q, environ has mark %v; want the marker in both", sh.Argv, slices.Contains(sh.Environ, "PROCTEST_MARK=1"))
	}
}
