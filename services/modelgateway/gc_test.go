package modelgateway

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestCgroupMemoryLimit(t *testing.T) {
	tests := []struct {
		name      string
		selfGroup string // /proc/self/cgroup; "" = no file
		memoryMax string // memory.max of the group; "" = no file
		want      int64
		wantOK    bool
	}{
		{"container with a limit", "0::/\n", "2147483648\n", 2147483648, true},
		{"nested group", "0::/system.slice/gw.service\n", "536870912\n", 536870912, true},
		{"no limit", "0::/\n", "max\n", 0, false},
		{"cgroup v1", "4:memory:/docker/abc\n", "", 0, false},
		{"group without memory.max", "0::/\n", "", 0, false},
		{"no /proc", "", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.selfGroup != "" {
				write(t, filepath.Join(root, "proc/self/cgroup"), tt.selfGroup)
			}
			if tt.memoryMax != "" {
				group := tt.selfGroup[len("0::") : len(tt.selfGroup)-1]
				write(t, filepath.Join(root, "sys/fs/cgroup", group, "memory.max"), tt.memoryMax)
			}
			got, ok := cgroupMemoryLimit(root)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("cgroupMemoryLimit() = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name       string
		live, scan uint64
		headroom   uint64
		base       int
		want       int
	}{
		{"live heap of 16 MiB: the headroom over what is scanned", 16 * mib, 20 * mib, 64 * mib, 100, 320},
		{"live heap of 2 MiB: Go's heap minimum sets the goal", 2 * mib, 3 * mib, 64 * mib, 100, 1650},
		{"live heap at the headroom: base", 64 * mib, 65 * mib, 64 * mib, 100, 100},
		{"live heap above the headroom: base", 700 * mib, 701 * mib, 64 * mib, 100, 100},
		{"nothing scanned yet: capped", 0, 0, 64 * mib, 100, maxGCPercent},
		{"huge headroom: capped", 16 * mib, 20 * mib, 64 << 30, 100, maxGCPercent},
		{"other base", 700 * mib, 701 * mib, 64 * mib, 50, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcPercent(tt.live, tt.scan, tt.headroom, tt.base); got != tt.want {
				t.Errorf("gcPercent(%d, %d, %d, %d) = %d; want %d", tt.live, tt.scan, tt.headroom, tt.base, got, tt.want)
			}
		})
	}
}

// TestHeapFloorFollowsLiveHeap runs the floor in this process: after a
// collection with a small live heap GOGC is the headroom's share of it,
// and once the live heap is larger than the headroom it is the base.
func TestHeapFloorFollowsLiveHeap(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	const headroom = 64 << 20
	stop := startHeapFloor(headroom, 100)
	defer stop()

	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	waitFor := func(what string, ok func(int) bool) int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			if g := gogc(); ok(g) {
				return g
			} else if time.Now().After(deadline) {
				t.Fatalf("GOGC = %d after 10 s of collections; want %s", g, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The test binary's live heap is a few megabytes: the goal is the
	// headroom above it.
	got := waitFor("> 100 with a small live heap", func(g int) bool { return g > 100 })
	if got > maxGCPercent {
		t.Errorf("GOGC = %d; want at most %d", got, maxGCPercent)
	}
	// The goal is the headroom above the live heap, stacks and globals
	// included (within a few MiB: the heap moves between the reads).
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var above int64
	for range 50 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		metrics.Read(s)
		above = int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
		if d := above - headroom; d > -4<<20 && d < 4<<20 {
			break
		}
	}
	if d := above - headroom; d <= -4<<20 || d >= 4<<20 {
		t.Errorf("heap goal - live heap = %d MiB; want %d MiB", above>>20, headroom>>20)
	}

	// 256 MiB live, four times the headroom: Go's default.
	live := make([]byte, 256<<20)
	waitFor("100 with a 256 MiB live heap", func(g int) bool { return g == 100 })
	runtime.KeepAlive(live)

	// Stopped, the floor no longer moves the target.
	stop()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	debug.SetGCPercent(123)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if g := gogc(); g != 123 {
		t.Errorf("GOGC = %d after stop; want the 123 set after it", g)
	}
}
