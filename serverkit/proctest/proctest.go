// Package proctest lets tests look at the processes they started, through
// /proc: every descendant of the test process, and whether a secret shows
// in any of their command lines, which every local user can read; and gives
// them ports to listen on that no connection can take before they bind.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Process is one process seen in /proc.
type Process struct {
	PID, PPID int
	// Argv is the command line, from /proc/PID/cmdline.
	Argv []string
	// Environ is the environment the process was started with, from
	// /proc/PID/environ (empty when it cannot be read).
	Environ []string
}

// Descendants returns every live process below pid: children,
// grandchildren and so on. Processes that exit while they are read are
// left out.
func Descendants(pid int) ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pp, err := parentOf(p)
		if err != nil {
			continue
		}
		children[pp] = append(children[pp], p)
	}
	var out []Process
	queue := append([]int(nil), children[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		queue = append(queue, children[p]...)
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		pp, _ := parentOf(p)
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		out = append(out, Process{PID: p, PPID: pp, Argv: split(argv), Environ: split(env)})
	}
	return out, nil
}

// parentOf reads the parent pid from /proc/PID/stat, whose second field
// (the command name, in parentheses) may itself hold spaces.
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	return strconv.Atoi(f[1])
}

func split(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// CheckArgv fails t when secret appears in the command line of any
// descendant of the test process, and returns the descendants it looked
// at so that a test can check it saw the processes it meant to.
func CheckArgv(t testing.TB, secret string) []Process {
	t.Helper()
	if secret == "" {
		t.Fatal("proctest: empty secret")
	}
	procs, err := Descendants(os.Getpid())
	if err != nil {
		t.Fatalf("list processes: %v", err)
	}
	for _, p := range procs {
		if strings.Contains(strings.Join(p.Argv, "\x00"), secret) {
			t.Errorf("pid %d (parent %d) has the secret on its command line: %q", p.PID, p.PPID, p.Argv)
		}
	}
	return procs
}
