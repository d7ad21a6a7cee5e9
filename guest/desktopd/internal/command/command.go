// Package command runs guest commands for /execute, /setup/launch,
// /run_python and /run_bash_script: Python subprocess semantics (argv or
// shell, shlex splitting, "~/" expansion), bounded output, timeouts that
// kill the whole process group, and tracking of launched processes so
// they are stopped with desktopd.
package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/procgroup"
)

// ErrTimeout is returned when a command outlives its timeout.
var ErrTimeout = errors.New("command timed out")

// Runner holds what every child process gets.
type Runner struct {
	Env       []string // added to desktopd's own environment (DISPLAY, HOME...)
	Dir       string   // working directory; "" keeps desktopd's
	Home      string   // for "~" expansion; "" uses $HOME
	MaxOutput int      // bytes kept of stdout and of stderr each

	mu       sync.Mutex
	launched map[*exec.Cmd]struct{}
}

// Result is a finished command.
type Result struct {
	// Stdout and Stderr are the output as text: bytes that are not UTF-8
	// replaced, and a note of any dropped past Runner.MaxOutput.
	Stdout, Stderr string
	// RawStdout and RawStderr are the bytes kept, as written (with the
	// same note of dropped bytes).
	RawStdout, RawStderr []byte
	Code                 int
}

// Spec says what to run.
type Spec struct {
	Argv    []string
	Dir     string // overrides Runner.Dir
	Timeout time.Duration
	Stdin   []byte
}

// HomeDir returns the home used for "~" expansion.
func (r *Runner) HomeDir() string {
	if r.Home != "" {
		return r.Home
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/"
}

// ExpandPath expands a leading "~" and $VARS in a path, as OSWorld does
// for request paths with os.path.expandvars(os.path.expanduser(p)).
func (r *Runner) ExpandPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(r.HomeDir(), p[1:])
	}
	return expandVars(p, func(k string) (string, bool) {
		if k == "HOME" {
			return r.HomeDir(), true
		}
		return os.LookupEnv(k)
	})
}

// expandVars replaces $name and ${name} (name of ASCII letters, digits and
// _) with the variable's value, as Python's posixpath.expandvars does: a
// variable that is not set, and a "$" that starts no name ("$$", "${",
// "$-"), stay as written. os.Expand would drop them, and a request for
// "~/a$b.txt" would name "~/a.txt".
func expandVars(p string, lookup func(string) (string, bool)) string {
	if !strings.Contains(p, "$") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		if p[i] != '$' || i+1 >= len(p) {
			b.WriteByte(p[i])
			i++
			continue
		}
		var name string
		end := i + 1
		if p[end] == '{' {
			j := strings.IndexByte(p[end:], '}')
			if j < 0 {
				b.WriteByte(p[i])
				i++
				continue
			}
			name, end = p[end+1:end+j], end+j+1
		} else {
			for end < len(p) && isNameByte(p[end]) {
				end++
			}
			name = p[i+1 : end]
		}
		if v, ok := lookup(name); ok && name != "" {
			b.WriteString(v)
		} else {
			b.WriteString(p[i:end])
		}
		i = end
	}
	return b.String()
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// Argv turns OSWorld's {command, shell} into an argv: a list runs as is
// (with "~/" arguments expanded), a string is split like shlex.split,
// and shell=true runs /bin/sh -c as Python's subprocess does.
func (r *Runner) Argv(command any, shell bool) ([]string, error) {
	switch c := command.(type) {
	case string:
		if strings.TrimSpace(c) == "" {
			return nil, errors.New("command is empty")
		}
		if shell {
			return []string{"/bin/sh", "-c", c}, nil
		}
		argv, err := Split(c)
		if err != nil {
			return nil, err
		}
		if len(argv) == 0 {
			return nil, errors.New("command is empty")
		}
		return argv, nil
	case []string:
		if len(c) == 0 {
			return nil, errors.New("command is empty")
		}
		if shell {
			return append([]string{"/bin/sh", "-c"}, c...), nil
		}
		out := make([]string, len(c))
		for i, a := range c {
			if strings.HasPrefix(a, "~/") {
				a = filepath.Join(r.HomeDir(), a[2:])
			}
			out[i] = a
		}
		return out, nil
	}
	return nil, fmt.Errorf("command must be a string or a list of strings, not %T", command)
}

func (r *Runner) cmd(spec Spec) *exec.Cmd {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), r.Env...)
	if r.Home != "" {
		cmd.Env = append(cmd.Env, "HOME="+r.Home)
	}
	cmd.Dir = r.Dir
	if spec.Dir != "" {
		cmd.Dir = spec.Dir
	}
	// A process group per command, so a timeout kills its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Run runs a command to completion and captures its output. A start
// failure (missing binary) is returned as an error; a non-zero exit is
// not an error. On timeout the process group is killed and ErrTimeout is
// returned with the output so far.
func (r *Runner) Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Argv) == 0 {
		return Result{}, errors.New("command is empty")
	}
	cmd := r.cmd(spec)
	stdout := &capped{max: r.maxOutput()}
	stderr := &capped{max: r.maxOutput()}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	// Python's subprocess.run waits for the pipes to close, so a command
	// that leaves a background child holding them hangs until the timeout;
	// stop waiting for the pipes shortly after the command itself exits.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var werr error
	timedOut := false
	select {
	case werr = <-waitc:
	case <-timeout:
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-waitc
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waitc
		return Result{Stdout: stdout.String(), Stderr: stderr.String(), RawStdout: stdout.bytes(), RawStderr: stderr.bytes(), Code: -1}, ctx.Err()
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), RawStdout: stdout.bytes(), RawStderr: stderr.bytes(), Code: cmd.ProcessState.ExitCode()}
	if timedOut {
		res.Code = -1
		return res, ErrTimeout
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("wait for %s: %w", spec.Argv[0], werr)
	}
	return res, nil
}

func (r *Runner) maxOutput() int {
	if r.MaxOutput > 0 {
		return r.MaxOutput
	}
	return 16 << 20
}

// Launch starts a command without waiting for it. The process is reaped
// when it exits and killed by StopAll.
func (r *Runner) Launch(spec Spec) error {
	if len(spec.Argv) == 0 {
		return errors.New("command is empty")
	}
	cmd := r.cmd(spec)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	r.mu.Lock()
	if r.launched == nil {
		r.launched = map[*exec.Cmd]struct{}{}
	}
	r.launched[cmd] = struct{}{}
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		r.mu.Lock()
		delete(r.launched, cmd)
		r.mu.Unlock()
	}()
	return nil
}

// stopGrace is how long StopAll gives launched commands to end on SIGTERM
// before it kills them.
const stopGrace = 3 * time.Second

// StopAll ends the process groups of launched commands (SIGTERM, then
// SIGKILL past stopGrace) and returns once they are gone.
func (r *Runner) StopAll() {
	r.mu.Lock()
	var pgids []int
	for cmd := range r.launched {
		pgids = append(pgids, cmd.Process.Pid)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, pgid := range pgids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procgroup.Stop(pgid, stopGrace)
		}()
	}
	wg.Wait()
}

// capped keeps the first max bytes written and notes how many were
// dropped.
type capped struct {
	mu      sync.Mutex
	max     int
	b       []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.b)
	if room >= len(p) {
		c.b = append(c.b, p...)
	} else {
		if room > 0 {
			c.b = append(c.b, p[:room]...)
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

// bytes is a copy of what was kept and, when the cap dropped some, a note
// of how many bytes: a character the cap cut is left out whole, so that
// the note follows text.
func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := append([]byte(nil), c.b...)
	if c.dropped == 0 {
		return b
	}
	dropped := c.dropped
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				b, dropped = b[:len(b)-i], dropped+i
			}
			break
		}
	}
	return fmt.Appendf(b, "\n[desktopd: %d more bytes of output dropped]", dropped)
}

// String is bytes as text, bytes that are not UTF-8 replaced.
func (c *capped) String() string {
	return strings.ToValidUTF8(string(c.bytes()), "\uFFFD")
}

// PyText is output read as OSWorld's server reads it (subprocess.run with
// text=True): decoded as strict UTF-8, where bytes that are not UTF-8 are
// an error worded like Python's UnicodeDecodeError, and with universal
// newlines ("\r\n" and "\r" become "\n").
func PyText(b []byte) (string, error) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			reason := "invalid start byte"
			switch {
			case b[i] >= 0xc2 && b[i] <= 0xf4 && i+1 == len(b):
				reason = "unexpected end of data"
			case b[i] >= 0xc2 && b[i] <= 0xf4:
				reason = "invalid continuation byte"
			}
			return "", fmt.Errorf("'utf-8' codec can't decode byte 0x%02x in position %d: %s", b[i], i, reason)
		}
		i += n
	}
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n"), nil
}
