package modelgateway

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGOGC is the garbage collector's target the gateway binary runs
// with when GOGC is not set: Go's own default. It was 400, which took
// 12 % off a gRPC call's instructions under callgrind, one small request
// at a time. But screenshot turns in flight keep about 1 MB each live
// (the request body), and 400 let the heap grow to five times that: in
// the mesh benchmark at 1,024 VMs the gateway peaked at 3.2-4.9 GiB, and
// at 100 it used 1.4-2.3 GiB and 7-33 % less CPU per step, in each of
// four alternating pairs of runs (docs/benchmarks.md, session 18).
const DefaultGOGC = 100

// memLimitShare is the share of the cgroup's memory limit the gateway
// asks the collector to stay under when GOMEMLIMIT is not set: screenshot
// turns in flight make the live heap large, and the heap grows to twice
// it between collections.
const memLimitShare = 0.8

// SetGCDefaults sets the collector's target to DefaultGOGC unless GOGC is
// in the environment, and a soft memory limit of 80 % of the cgroup's
// memory limit (a container's) unless GOMEMLIMIT is, or there is none.
// The gateway binary calls it first thing; it is process-wide, so the
// all-in-one binary, whose other services have heaps of their own, does
// not.
func SetGCDefaults() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(DefaultGOGC)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		if limit, ok := cgroupMemoryLimit("/"); ok {
			debug.SetMemoryLimit(int64(float64(limit) * memLimitShare))
		}
	}
}

// cgroupMemoryLimit reads the memory limit of this process's cgroup (v2)
// under root ("/" but in tests): memory.max of the group /proc/self/cgroup
// names. It reports false when there is none ("max", cgroup v1, no file).
func cgroupMemoryLimit(root string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		group, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		m, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup", group, "memory.max"))
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(m)), 10, 64)
		if err != nil || n <= 0 {
			return 0, false // "max": no limit
		}
		return n, true
	}
	return 0, false
}
