// Package procgroup stops a process group and waits until it is empty.
//
// desktopd starts each child (Xvfb, the session bus, a launched
// application) as the leader of its own group, so that stopping it reaches
// what it spawned: the bus's AT-SPI launcher and registry, a shell's
// children. Waiting for the leader alone left those running for seconds
// after desktopd returned, still writing under the session's HOME.
package procgroup

import (
	"errors"
	"syscall"
	"time"
)

// poll is how often Stop looks whether the group is empty.
const poll = 20 * time.Millisecond

// killWait bounds the wait after SIGKILL: a process in uninterruptible
// sleep, or an exited one nobody reaps, keeps the group alive.
const killWait = 2 * time.Second

// Stop sends SIGTERM to process group pgid, waits up to grace for it to
// empty, then sends SIGKILL and waits up to killWait more. It reports
// whether the group is empty.
func Stop(pgid int, grace time.Duration) bool {
	if pgid <= 1 {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if Wait(pgid, grace) {
		return true
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return Wait(pgid, killWait)
}

// Wait waits up to d for process group pgid to have no process left, and
// reports whether it has none.
func Wait(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(poll)
	}
}
