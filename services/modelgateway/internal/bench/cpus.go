package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// layout splits the CPUs between the two sides of the measurement. A
// proxy is benchmarked on its own CPUs, apart from the load generator and
// the backend, as wrk and nginx's own benchmarks do with separate
// machines: on shared CPUs the scheduler hands one process's timeslice to
// another, and a request that waits behind the generator's or fakellm's
// slice adds milliseconds that belong to neither proxy.
type layout struct {
	// driver runs the load generator and fakellm.
	driver []int
	// proxy runs the server under test: nginx or the gateway.
	proxy []int
}

// newLayout gives the proxy the upper half of the CPUs this process may
// use (at least one) and the rest to the driver. With one CPU, or pinning
// off, both sides get every CPU.
func newLayout(pin bool) (layout, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return layout{}, fmt.Errorf("read CPU affinity: %w", err)
	}
	var all []int
	for c := range 1024 {
		if set.IsSet(c) {
			all = append(all, c)
		}
	}
	if !pin || len(all) < 2 {
		return layout{driver: all, proxy: all}, nil
	}
	half := len(all) / 2
	return layout{driver: all[:half], proxy: all[half:]}, nil
}

func (l layout) pinned() bool { return !slices.Equal(l.driver, l.proxy) }

func (l layout) String() string {
	if !l.pinned() {
		return fmt.Sprintf("unpinned: load generator, fakellm and the proxy under test share CPUs %s", cpuList(l.driver))
	}
	return fmt.Sprintf("pinned: load generator and fakellm on CPU %s, the proxy under test (nginx, gateway) on CPU %s", cpuList(l.driver), cpuList(l.proxy))
}

// cpuList formats CPUs as taskset's -c list.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// pinSelf moves every thread of this process onto cpus and sizes
// GOMAXPROCS to match. Threads the runtime starts later inherit the mask
// of the thread that starts them. The returned func restores both.
func pinSelf(cpus []int) (func(), error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	for _, c := range cpus {
		set.Set(c)
	}
	apply := func(s *unix.CPUSet) error {
		// Twice: a thread started while the first pass ran may have
		// copied the old mask.
		for range 2 {
			tids, err := os.ReadDir("/proc/self/task")
			if err != nil {
				return err
			}
			for _, t := range tids {
				tid, err := strconv.Atoi(t.Name())
				if err != nil {
					continue
				}
				// A thread that exited meanwhile is no error.
				if err := unix.SchedSetaffinity(tid, s); err != nil && err != unix.ESRCH {
					return fmt.Errorf("pin thread %d: %w", tid, err)
				}
			}
		}
		return nil
	}
	if err := apply(&set); err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() {
		apply(&old)
		runtime.GOMAXPROCS(procs)
	}, nil
}

// proxyCommand prefixes a command line so that it runs on the proxy's
// CPUs (taskset execs the command, so the pid stays the server's).
func (l layout) proxyCommand(name string, args ...string) (string, []string) {
	return l.on(l.proxy, name, args)
}

// driverCommand is proxyCommand for the driver's side.
func (l layout) driverCommand(name string, args ...string) (string, []string) {
	return l.on(l.driver, name, args)
}

func (l layout) on(cpus []int, name string, args []string) (string, []string) {
	if !l.pinned() {
		return name, args
	}
	return "taskset", append([]string{"-c", cpuList(cpus), name}, args...)
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuTime is the user+system CPU time used so far by pid and by its live
// children (nginx's workers are children of its master process).
func cpuTime(pid int) (time.Duration, error) {
	return family(pid, func(p int) (time.Duration, error) {
		t, _, err := procTimes(p)
		return t, err
	})
}

// sleeps counts the voluntary context switches of every thread of pid and
// of its children (nginx's workers): the times one blocked, in epoll_wait,
// a futex or a read, to be woken later. Threads that have exited are not
// counted; the servers measured keep theirs.
func sleeps(pid int) (int64, error) { return family(pid, taskSleeps) }

// family sums read over pid and its live children; a child that exits
// meanwhile is left out.
func family[T time.Duration | int64](pid int, read func(int) (T, error)) (T, error) {
	sum, err := read(pid)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		cpid, err := strconv.Atoi(e.Name())
		if err != nil || cpid == pid {
			continue
		}
		if _, ppid, err := procTimes(cpid); err == nil && ppid == pid {
			if v, err := read(cpid); err == nil {
				sum += v
			}
		}
	}
	return sum, nil
}

// taskSleeps sums voluntary_ctxt_switches over /proc/PID/task/*/status.
func taskSleeps(pid int) (int64, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		_, rest, ok := bytes.Cut(b, []byte("\nvoluntary_ctxt_switches:"))
		if !ok {
			return 0, fmt.Errorf("%s/%s/status: no voluntary_ctxt_switches", dir, t.Name())
		}
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		v, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/status: voluntary_ctxt_switches: %w", dir, t.Name(), err)
		}
		n += v
	}
	return n, nil
}

// procTimes reads utime+stime and the parent pid from /proc/PID/stat.
func procTimes(pid int) (time.Duration, int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(0) ppid(1) ... utime(11) stime(12).
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return time.Duration(ut+st) * clockTick, ppid, nil
}
