package bench

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestNewLayout(t *testing.T) {
	off, err := newLayout(false)
	if err != nil {
		t.Fatal(err)
	}
	if off.pinned() || len(off.driver) != runtime.NumCPU() {
		t.Errorf("unpinned layout = %+v, want every CPU on both sides", off)
	}
	on, err := newLayout(true)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.NumCPU() < 2 {
		if on.pinned() {
			t.Errorf("one CPU: layout %+v, want it unpinned", on)
		}
		return
	}
	seen := map[int]bool{}
	for _, c := range append(append([]int{}, on.driver...), on.proxy...) {
		if seen[c] {
			t.Errorf("CPU %d on both sides of %+v", c, on)
		}
		seen[c] = true
	}
	if len(seen) != runtime.NumCPU() || len(on.proxy) == 0 || len(on.driver) == 0 {
		t.Errorf("pinned layout %+v, want the %d CPUs split in two", on, runtime.NumCPU())
	}
}

func TestPinSelfAndUndo(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	l, err := newLayout(false)
	if err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	undo, err := pinSelf(l.driver[:1])
	if err != nil {
		t.Fatal(err)
	}
	var during unix.CPUSet
	if err := unix.SchedGetaffinity(0, &during); err != nil {
		t.Fatal(err)
	}
	if during.Count() != 1 || !during.IsSet(l.driver[0]) || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("pinned: %d CPUs in the mask, GOMAXPROCS %d; want only CPU %d and 1", during.Count(), runtime.GOMAXPROCS(0), l.driver[0])
	}
	undo()
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("after undo: mask of %d CPUs and GOMAXPROCS %d, want %d and %d", after.Count(), runtime.GOMAXPROCS(0), before.Count(), procs)
	}
}

// TestCPUTimeCountsChildren wants a busy child's CPU time counted in its
// parent's, as nginx's workers are in their master's.
func TestCPUTimeCountsChildren(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		busy.Process.Kill()
		busy.Wait()
	}()
	own, _, err := procTimes(busy.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); own < 100*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("busy child used %v of CPU in 20 s", own)
		}
		if own, _, err = procTimes(busy.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got < own {
		t.Errorf("parent's CPU time grew by %v while its child used %v", got, own)
	}
}

// TestSleepsCountsChildren wants a child's blocking counted in its
// parent's sleeps, as nginx's workers are in their master's, and a thread
// that blocks over and over counted each time.
func TestSleepsCountsChildren(t *testing.T) {
	// A shell that waits for 200 commands in turn blocks at least 200
	// times, far more than this process's own threads block in the
	// moments between two readings (a few dozen at most here).
	napper := exec.Command("sh", "-c", "for i in $(seq 200); do sleep 0; done; read line")
	stdin, err := napper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := napper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		napper.Wait()
	}()
	var own int64
	for deadline := time.Now().Add(20 * time.Second); own < 200; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child blocked %d times in 20 s, want 200", own)
		}
		if own, err = taskSleeps(napper.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	// This process blocks too, so its own threads' count, read first, is
	// taken away: it only grows, so what is left is at least the child's
	// when the child is counted, and only this process's few blockings in
	// between when it is not.
	self, err := taskSleeps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	all, err := sleeps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := all - self; got < own {
		t.Errorf("parent's sleeps less its own threads' are %d while its child blocked %d times", got, own)
	}
}
