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

// TestSteadyPerStep: the steady window's CPU per step adds every process
// and is 0 (not measured) without a window.
func TestSteadyPerStep(t *testing.T) {
	tests := []struct {
		name string
		r    result
		want float64
	}{
		{"no window", result{}, 0},
		{"no steps", result{steadyCPU: map[string]float64{"runner": 1}}, 0},
		{"every process", result{steadyCPU: map[string]float64{"runner": 2, "storage": 1, "fakellm": 0.5, "benchmesh": 0.5}, steadySteps: 1000}, 4},
	}
	for _, tt := range tests {
		if got := tt.r.steadyPerStep(); got != tt.want {
			t.Errorf("%s: steadyPerStep() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestReadIOGrowsWithWork: the /proc/PID/io and stat reader sees this
// process's writes, write calls and page faults grow.
func TestReadIOGrowsWithWork(t *testing.T) {
	before, err := readIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(t.TempDir() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := 0; i < 16; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Fresh memory touched page by page: a fault each.
	big := make([]byte, 8<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	after, err := readIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	d := after.sub(before)
	if d.wchar < 16*64<<10 || d.syscw < 16 {
		t.Errorf("16 writes of 64 KiB: wchar +%d, syscw +%d, want >= %d and >= 16", d.wchar, d.syscw, 16*64<<10)
	}
	if d.minflt < 100 {
		t.Errorf("8 MiB of fresh memory touched: minflt +%d, want >= 100", d.minflt)
	}
	if _, err := readIO(-1); err == nil {
		t.Error("readIO(-1): no error")
	}
}

// TestPeakRSSSeesGrowth: the peak resident size grows when this process
// touches 64 MiB of fresh memory.
func TestPeakRSSSeesGrowth(t *testing.T) {
	before, err := peakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	after, err := peakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 32<<20 {
		t.Errorf("64 MiB touched: peak RSS %d -> %d, want +32 MiB at least", before, after)
	}
	if _, err := peakRSS(-1); err == nil {
		t.Error("peakRSS(-1): no error")
	}
}

func TestParseMachineTicks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    machineTicks
		wantErr bool
	}{
		{"kernel 6 line", "cpu  100 5 50 1000 20 3 7 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n", machineTicks{busy: 100 + 5 + 50 + 3 + 7, idle: 1000 + 20, steal: 40}, false},
		{"no steal column", "cpu  100 5 50 1000 20 3 7\n", machineTicks{}, true},
		{"per-CPU line first", "cpu0 1 2 3 4 5 6 7 8\n", machineTicks{}, true},
		{"not a number", "cpu  1 2 3 x 5 6 7 8\n", machineTicks{}, true},
		{"empty", "", machineTicks{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMachineTicks(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseMachineTicks error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("parseMachineTicks = %+v, want %+v", got, tc.want)
			}
		})
	}
	m, err := readMachineTicks()
	if err != nil {
		t.Fatalf("readMachineTicks: %v", err)
	}
	if m.busy+m.idle <= 0 {
		t.Errorf("readMachineTicks = %+v: no time counted", m)
	}
	busy, idle, steal := machineTicks{busy: 60, idle: 30, steal: 10}.shares()
	if busy != 0.6 || idle != 0.3 || steal != 0.1 {
		t.Errorf("shares = %v, %v, %v, want 0.6, 0.3, 0.1", busy, idle, steal)
	}
}
