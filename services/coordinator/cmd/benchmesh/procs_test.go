package main

import (
	"os"
	"testing"
	"time"
)

// TestCPUTicksGrowsWithWork: the /proc/PID/stat reader sees this process's
// own CPU time grow while it spins.
func TestCPUTicksGrowsWithWork(t *testing.T) {
	before, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	after, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 5 {
		t.Errorf("300 ms of spinning added %d ticks, want >= 5 (x=%d)", after-before, x)
	}
	if _, err := cpuTicks(-1); err == nil {
		t.Error("cpuTicks(-1): no error")
	}
}
