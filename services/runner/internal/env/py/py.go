// Package py is the Python environment: a python tool whose code runs in
// the leased guest (/run_python) when the episode has a VM, else in a local
// subprocess with CPU, memory, time and output limits and no network
// (a fresh network namespace). Final answers are scored by a benchmark
// metric.
package py

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// Limits of local execution.
type Limits struct {
	// Timeout is the wall-clock limit per run.
	Timeout time.Duration
	// CPUSeconds is RLIMIT_CPU.
	CPUSeconds int
	// MemoryBytes is RLIMIT_AS.
	MemoryBytes int64
	// OutputBytes caps stdout+stderr kept.
	OutputBytes int
	// AllowNetwork skips the network namespace (for hosts without
	// unprivileged namespaces; off by default).
	AllowNetwork bool
}

// DefaultLimits are the local sandbox's defaults.
var DefaultLimits = Limits{Timeout: 30 * time.Second, CPUSeconds: 20, MemoryBytes: 1 << 30, OutputBytes: 64 << 10}

// maxCode bounds one program.
const maxCode = 256 << 10

// Config configures the environment.
type Config struct {
	// Python is the interpreter for local runs (default /usr/bin/python3,
	// else python3 on PATH).
	Python string
	Limits Limits
	// Guest, when set, runs code in the VM instead.
	Guest *guest.Client
	// Metric scores final answers (default exact_match).
	Metric string
	Judge  metrics.Judge
}

// Env is one episode's Python environment.
type Env struct {
	cfg  Config
	task env.Task
}

// New returns a Python environment.
func New(cfg Config) *Env {
	if cfg.Limits.Timeout <= 0 {
		cfg.Limits = DefaultLimits
	}
	if cfg.Python == "" {
		cfg.Python = "/usr/bin/python3"
		if _, err := os.Stat(cfg.Python); err != nil {
			cfg.Python = "python3"
		}
	}
	if cfg.Metric == "" {
		cfg.Metric = "exact_match"
	}
	return &Env{cfg: cfg}
}

// SystemPrompt tells the model how to work.
func (e *Env) SystemPrompt() string {
	return "You solve tasks by writing Python. Call the python tool with a complete program; you see what it prints. " +
		"Nothing is kept between calls. When you know the answer, call final_answer with it (or reply with the answer alone)."
}

// Tools are python and final_answer.
func (e *Env) Tools() []env.Tool {
	return []env.Tool{
		{Name: "python", Description: "Run a Python 3 program and return its standard output and error.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"the complete program"}},"required":["code"]}`)},
		env.FinalAnswerTool(),
	}
}

// Reset starts the episode.
func (e *Env) Reset(ctx context.Context, t env.Task) (env.Observation, error) {
	e.task = t
	if e.cfg.Guest != nil {
		if err := e.cfg.Guest.Wait(ctx, 20, time.Second); err != nil {
			return env.Observation{}, env.EnvError(fmt.Errorf("wait for guest: %w", err))
		}
		return env.Observation{}, nil
	}
	// A runner that cannot run Python fails the episode before the model
	// is asked anything, rather than feeding it the error as tool output.
	if err := Probe(ctx, e.cfg.Python, e.cfg.Limits); err != nil {
		return env.Observation{}, err
	}
	return env.Observation{}, nil
}

// Step runs tool calls.
func (e *Env) Step(ctx context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	out := make([]env.Result, len(acts))
	for i, a := range acts {
		r, err := e.call(ctx, a)
		if err != nil {
			return out, env.Observation{}, err
		}
		out[i] = r
	}
	return out, env.Observation{}, nil
}

func (e *Env) call(ctx context.Context, a action.Action) (env.Result, error) {
	if a.Terminal() || a.Type == action.TypeWait {
		return env.Result{OK: true}, nil
	}
	if a.Type != action.TypeTool || a.Tool == nil || a.Tool.Name != "python" {
		return env.Result{Error: "unknown tool; use python or final_answer"}, nil
	}
	var args struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(a.Tool.Arguments), &args); err != nil || args.Code == "" {
		return env.Result{Error: `python needs {"code": "..."}`}, nil
	}
	if len(args.Code) > maxCode {
		return env.Result{Error: fmt.Sprintf("program longer than %d bytes", maxCode)}, nil
	}
	if e.cfg.Guest != nil {
		res, err := e.cfg.Guest.RunPython(ctx, args.Code)
		if err != nil {
			// The guest answers a program's failure with its output and
			// return code; an error here is the guest's own.
			return env.Result{}, env.EnvError(fmt.Errorf("run python in the guest: %w", err))
		}
		out := res.Output + res.Error
		return env.Result{OK: res.ReturnCode == 0, Output: out, Error: errIf(res.ReturnCode != 0, "exit status "+strconv.Itoa(res.ReturnCode))}, nil
	}
	return Run(ctx, e.cfg.Python, args.Code, e.cfg.Limits)
}

func errIf(c bool, s string) string {
	if c {
		return s
	}
	return ""
}

// hideOnce makes the runner non-dumpable before the first local program
// runs. The program runs as the runner's user, and a process of the same
// user may read /proc/PID/environ and /proc/PID/mem of a dumpable process:
// model-written code could print the runner's tokens
// (ROLLOUTMESH_PEER_TOKEN) into its output. A non-dumpable process's /proc
// files belong to root. The flag is not inherited across exec, so the
// program itself is unaffected; the runner loses core dumps and
// same-user ptrace (debuggers need root).
var hideOnce sync.Once

func hideRunner() {
	hideOnce.Do(func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	})
}

// probeOutput is what the sandbox probe prints.
const probeOutput = "rolloutmesh sandbox ok"

// probed remembers sandbox configurations that worked, so each episode
// does not pay for a probe run (about 30 ms).
var probed sync.Map

// Probe runs a trivial program in the sandbox and returns an
// env.ErrEnvironment error saying what is missing when it does not print
// what it should: prlimit or unshare not installed, a network namespace
// refused (a container without CAP_SYS_ADMIN), no interpreter.
func Probe(ctx context.Context, python string, lim Limits) error {
	key := fmt.Sprintf("%s|%+v", python, lim)
	if _, ok := probed.Load(key); ok {
		return nil
	}
	res, err := Run(ctx, python, "print("+strconv.Quote(probeOutput)+")", lim)
	if err != nil {
		return err
	}
	if !res.OK || res.Output != probeOutput+"\n" {
		return env.EnvError(fmt.Errorf("python sandbox (prlimit, unshare --net, %s) does not work here: %s: %s%s",
			python, res.Error, strings.TrimSpace(res.Output), netHint(lim)))
	}
	probed.Store(key, true)
	return nil
}

func netHint(lim Limits) string {
	if lim.AllowNetwork {
		return ""
	}
	return " (a network namespace needs CAP_SYS_ADMIN in a container; --py-allow-network runs without one)"
}

// sandboxFailed tells whether a failed run may be the sandbox's failure
// rather than the program's: the exit statuses of prlimit and unshare when
// they cannot execute the next program (126, 127) or unshare's when it
// cannot create the namespace (1, with its name first on stderr).
func sandboxFailed(err error, output string) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	switch ee.ExitCode() {
	case 126, 127:
		return true
	case 1:
		return strings.HasPrefix(output, "unshare: ") || strings.HasPrefix(output, "prlimit: ")
	}
	return false
}

// Run runs code in a local sandboxed subprocess. The result is the
// program's; the error, wrapping env.ErrEnvironment, is the sandbox's own
// failure (no prlimit, no interpreter, no namespace).
func Run(ctx context.Context, python, code string, lim Limits) (env.Result, error) {
	res, err := run(ctx, python, code, lim)
	if err != nil || res.OK || !sandboxFailed(res.err, res.Output) {
		return res.Result, err
	}
	// The program itself could print what a broken sandbox prints and exit
	// 127 to turn its 0 into an infrastructure failure: a sandbox that
	// still runs the probe means the failure was the program's.
	pres, perr := run(ctx, python, "print("+strconv.Quote(probeOutput)+")", lim)
	if perr == nil && pres.OK && pres.Output == probeOutput+"\n" {
		return res.Result, nil
	}
	return res.Result, env.EnvError(fmt.Errorf("python sandbox (prlimit, unshare --net, %s): %s: %s%s",
		python, res.Error, strings.TrimSpace(res.Output), netHint(lim)))
}

// runResult is a run's result with the process error behind it.
type runResult struct {
	env.Result
	err error
}

func run(ctx context.Context, python, code string, lim Limits) (runResult, error) {
	hideRunner()
	dir, err := os.MkdirTemp("", "runner-py-")
	if err != nil {
		return runResult{}, env.EnvError(fmt.Errorf("python sandbox: %w", err))
	}
	defer os.RemoveAll(dir)
	script := dir + "/main.py"
	if err := os.WriteFile(script, []byte(code), 0o600); err != nil {
		return runResult{}, env.EnvError(fmt.Errorf("python sandbox: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	args := []string{
		"--as=" + strconv.FormatInt(lim.MemoryBytes, 10),
		"--cpu=" + strconv.Itoa(lim.CPUSeconds),
		"--fsize=" + strconv.Itoa(16<<20),
		"--",
	}
	var wrap []string
	if !lim.AllowNetwork {
		wrap = append(wrap, "--net")
	}
	if os.Geteuid() == 0 {
		// A root runner's program would be root too, with the capabilities
		// the runner holds (CAP_SYS_ADMIN in a container given it for the
		// network namespace): model-written code runs as nobody, which
		// setuid leaves without capabilities, in a directory it owns.
		wrap = append(wrap, "--setgid="+strconv.Itoa(nobody), "--setuid="+strconv.Itoa(nobody))
		if err := chownAll(nobody, dir, script); err != nil {
			return runResult{}, env.EnvError(fmt.Errorf("python sandbox: %w", err))
		}
	}
	if len(wrap) > 0 {
		args = append(append(append(args, "unshare"), wrap...), "--")
	}
	args = append(args, python, "-I", script)
	cmd := exec.CommandContext(ctx, "prlimit", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out := &capped{max: lim.OutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var notFound *exec.Error
	if errors.As(err, &notFound) {
		return runResult{}, env.EnvError(fmt.Errorf("python sandbox: %w", err))
	}
	res := runResult{Result: env.Result{Output: out.String()}, err: err}
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.Error = fmt.Sprintf("timed out after %s", lim.Timeout)
	case err != nil:
		res.Error = err.Error()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Error = fmt.Sprintf("killed by %v (CPU limit %ds, memory limit %d MiB)", ws.Signal(), lim.CPUSeconds, lim.MemoryBytes>>20)
			}
		}
	default:
		res.OK = true
	}
	return res, nil
}

// nobody is the uid and gid programs of a root runner run as.
const nobody = 65534

func chownAll(id int, paths ...string) error {
	for _, p := range paths {
		if err := os.Chown(p, id, id); err != nil {
			return err
		}
	}
	return nil
}

// capped keeps the first max bytes written and notes the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	if len(p) > room {
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n...(%d bytes of output dropped)", c.dropped)
	}
	return c.buf.String()
}

// Evaluate scores the final answer.
func (e *Env) Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error) {
	return env.ScoreAnswer(ctx, e.task, in.FinalAnswer, e.cfg.Metric, e.cfg.Judge)
}

// Close does nothing.
func (e *Env) Close(context.Context) error { return nil }
