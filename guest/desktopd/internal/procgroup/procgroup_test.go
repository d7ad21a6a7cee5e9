package procgroup

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestStop starts a shell that spawns a child, each its group's member,
// and wants Stop to leave the group empty: on SIGTERM when they end on it,
// past the grace with SIGKILL when they ignore it.
func TestStop(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		ignoreTerm bool
	}{
		{"ends on SIGTERM", "sleep 30 & sleep 30", false},
		// An ignored signal stays ignored across exec: the sleeps
		// ignore SIGTERM too.
		{"ignores SIGTERM", `trap "" TERM; sleep 30 & sleep 30`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { _ = cmd.Wait() }() // reap the leader, as desktopd does
			pgid := cmd.Process.Pid
			// Both sleeps running: the group has three members.
			time.Sleep(200 * time.Millisecond)
			const grace = 300 * time.Millisecond
			start := time.Now()
			if !Stop(pgid, grace) {
				t.Fatalf("Stop(%d) = false, want the group empty", pgid)
			}
			if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("after Stop, kill(-%d, 0) = %v; want ESRCH", pgid, err)
			}
			if waited := time.Since(start); tt.ignoreTerm && waited < grace {
				t.Errorf("Stop returned after %s, before the %s grace a group ignoring SIGTERM gets", waited, grace)
			}
		})
	}
}

// TestWaitEmptyGroup: a group with no process is empty at once.
func TestWaitEmptyGroup(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !Wait(cmd.Process.Pid, 0) {
		t.Errorf("Wait on the group of an exited, reaped process = false")
	}
}
