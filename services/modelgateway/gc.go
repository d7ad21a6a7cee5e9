package modelgateway

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
)

// DefaultHeapHeadroom is how far above the live heap the gateway binary
// keeps the collector's heap goal at least, when GOGC is not set. Two
// loads pull the collector's target apart:
//   - one request at a time, the live heap is a few megabytes and a
//     screenshot turn allocates about 1 MB: Go's default (GOGC=100)
//     collects every few requests (callgrind: 344.5k instructions per
//     gRPC Chat call against 134.0k at GOGC=400);
//   - with hundreds of screenshot turns in flight the live heap is
//     hundreds of megabytes, and GOGC=400 lets the heap grow to five
//     times it: at 1,024 desktop episodes GOGC=100 spent 7-33 % less
//     CPU per step and peaked at half the memory.
//
// A floor under the goal serves both: the goal is the live heap plus the
// larger of this headroom and the live heap itself (GOGC=100).
const DefaultHeapHeadroom = 64 << 20

// maxGCPercent bounds the target the floor sets when the live heap is
// tiny, so that a heap that starts to grow is still collected.
const maxGCPercent = 10_000

// memLimitShare is the share of the cgroup's memory limit the gateway
// asks the collector to stay under when GOMEMLIMIT is not set: screenshot
// turns in flight make the live heap large.
const memLimitShare = 0.8

// SetGCDefaults keeps the collector's heap goal DefaultHeapHeadroom above
// the live heap at least (GOGC=100 beyond that) unless GOGC is in the
// environment, and sets a soft memory limit of 80 % of the cgroup's memory
// limit (a container's) unless GOMEMLIMIT is set, or there is none. The
// gateway binary calls it first thing; it is process-wide, so the
// all-in-one binary, whose other services have heaps of their own, does
// not.
func SetGCDefaults() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		startHeapFloor(DefaultHeapHeadroom, 100)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		if limit, ok := cgroupMemoryLimit("/"); ok {
			debug.SetMemoryLimit(int64(float64(limit) * memLimitShare))
		}
	}
}

// heapMinimum is Go's smallest heap goal at GOGC=100; the runtime scales
// it by GOGC/100 (runtime/mgcpacer.go, defaultHeapMinimum).
const heapMinimum = 4 << 20

// gcPercent is the GOGC that puts the heap goal headroom bytes above a
// live heap of live bytes, never below base and never above maxGCPercent.
// Go's goal is the live heap plus GOGC percent of scan (the live heap, and
// the stacks and globals the last collection scanned), and at least
// heapMinimum times GOGC/100: with a heap of a few megabytes that minimum
// is the goal.
func gcPercent(live, scan, headroom uint64, base int) int {
	if scan == 0 {
		return maxGCPercent
	}
	p := min(headroom*100/scan, (live+headroom)*100/heapMinimum)
	switch {
	case p < uint64(base):
		return base
	case p > maxGCPercent:
		return maxGCPercent
	}
	return int(p)
}

// startHeapFloor re-sets GOGC after every collection from what that
// collection marked and scanned, so that the next goal is at least
// headroom above the live heap. Go has no setting for a floor: GOMEMLIMIT
// is a ceiling, and a ballast (a large never-touched allocation) would
// show as live heap in every metric an operator reads. A cleanup on an
// object dropped right away runs once per collection, after it. stop ends
// the re-arming; the target last set stays.
func startHeapFloor(headroom uint64, base int) (stop func()) {
	f := &heapFloor{headroom: headroom, base: base}
	for i, name := range []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"} {
		f.sample[i].Name = name
	}
	// Until the first collection has marked a live heap, base: Go's first
	// goal is 4 MB at GOGC=100, and maxGCPercent would make it 400 MB.
	debug.SetGCPercent(base)
	f.arm()
	return func() { f.stopped.Store(true) }
}

type heapFloor struct {
	headroom uint64
	base     int
	stopped  atomic.Bool
	// Cleanups run one at a time on one goroutine, so the sample is
	// reused without a lock.
	sample [3]metrics.Sample
}

// gcSentinel is large enough not to share a tiny-allocator block, whose
// objects' cleanups may never run.
type gcSentinel struct{ _ [64]byte }

func (f *heapFloor) arm() {
	runtime.AddCleanup(new(gcSentinel), func(f *heapFloor) { f.collected() }, f)
}

func (f *heapFloor) collected() {
	if f.stopped.Load() {
		return
	}
	metrics.Read(f.sample[:])
	var v [len(f.sample)]uint64 // live heap, stacks, globals; 0 if unsupported
	for i, s := range f.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	debug.SetGCPercent(gcPercent(v[0], v[0]+v[1]+v[2], f.headroom, f.base))
	f.arm()
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
