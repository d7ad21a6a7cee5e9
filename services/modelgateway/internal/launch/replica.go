package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
)

// State is where a replica is in its life.
type State string

// Replica states.
const (
	// Starting: the process runs and is not ready yet (loading weights).
	Starting State = "starting"
	// Ready: it answers health and lists the model; it gets traffic.
	Ready State = "ready"
	// Backoff: it exited and waits to be restarted.
	Backoff State = "backoff"
	// Failed: it crashed too often; it is not restarted.
	Failed State = "failed"
	// Stopped: the gateway stopped it.
	Stopped State = "stopped"
)

// States lists every state, for metrics.
var States = []State{Starting, Ready, Backoff, Failed, Stopped}

// Spec is one replica to run.
type Spec struct {
	// ID names the replica (the backend id): "<backend>-<i>".
	ID    string
	Index int
	// Name is the served model name ({name}).
	Name string
	// OpenAI servers have no /health: readiness is /v1/models alone.
	OpenAI bool
	Port   int
	// APIKey is passed in Config.ServerAPIKeyEnv and sent on probes.
	APIKey string
	Config Config
}

// BaseURL is where the gateway reaches the replica.
func (s Spec) BaseURL() string {
	return "http://" + net.JoinHostPort(s.Config.Host, strconv.Itoa(s.Port))
}

// LogPath is the replica's log file.
func (s Spec) LogPath() string {
	dir := s.Config.LogDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "modelgateway")
	}
	return filepath.Join(dir, s.ID+".log")
}

// Event reports a state change of a replica.
type Event struct {
	ID    string
	State State
	// Detail says why (exit status, timeout) and, for Failed, holds the
	// last lines of the log.
	Detail string
	// Version is the weight version a Ready replica serves: the one of
	// the model it was started with.
	Version  int64
	PID      int
	Restarts int
}

// Options are shared by the replicas of a Launcher.
type Options struct {
	// Clock times the start-up timeout, restart backoff, crash window and
	// stop grace period.
	Clock clock.Clock
	Log   *zap.Logger
	// OnState hears every state change; it must not block.
	OnState func(Event)
	// Client makes readiness probes (default: a plain client).
	Client *http.Client
	// PollInterval is the real-time interval of readiness probes while a
	// replica starts (default 500ms).
	PollInterval time.Duration
}

// Replica runs one server process and restarts it when it exits.
type Replica struct {
	spec  Spec
	opts  Options
	model func() (string, int64)

	mu       sync.Mutex
	state    State
	detail   string
	pid      int
	restarts int
	pids     []int
}

// Status is a replica's current view.
type Status struct {
	ID       string
	State    State
	Detail   string
	PID      int
	Restarts int
	Port     int
	LogPath  string
}

// Status returns the current view.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{ID: r.spec.ID, State: r.state, Detail: r.detail, PID: r.pid, Restarts: r.restarts,
		Port: r.spec.Port, LogPath: r.spec.LogPath()}
}

// PIDs lists every process id the replica started, for tests that check
// nothing is left behind.
func (r *Replica) PIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pids)
}

func (r *Replica) set(st State, detail string, version int64) {
	r.mu.Lock()
	r.state, r.detail = st, detail
	ev := Event{ID: r.spec.ID, State: st, Detail: detail, Version: version, PID: r.pid, Restarts: r.restarts}
	r.mu.Unlock()
	if r.opts.OnState != nil {
		r.opts.OnState(ev)
	}
}

// run starts the server and keeps it running until ctx ends, then stops it.
func (r *Replica) run(ctx context.Context) {
	cfg := r.spec.Config
	var crashes []time.Time
	for {
		if ctx.Err() != nil {
			r.set(Stopped, "", 0)
			return
		}
		path, version := r.model()
		why := r.once(ctx, path, version)
		if ctx.Err() != nil {
			r.set(Stopped, "", 0)
			return
		}
		now := r.opts.Clock.Now()
		crashes = append(crashes, now)
		crashes = slices.DeleteFunc(crashes, func(t time.Time) bool { return now.Sub(t) > cfg.Restart.Window })
		if len(crashes) >= cfg.Restart.MaxCrashes {
			tail := lastLines(r.spec.LogPath(), 20)
			detail := fmt.Sprintf("crash loop: %d crashes within %s, not restarted; last: %s; log %s:\n%s",
				len(crashes), cfg.Restart.Window, why, r.spec.LogPath(), tail)
			r.opts.Log.Error("replica failed: crash loop", zap.String("replica", r.spec.ID), zap.Int("crashes", len(crashes)),
				zap.String("last_exit", why), zap.String("log_file", r.spec.LogPath()), zap.String("log_tail", tail))
			r.set(Failed, detail, 0)
			<-ctx.Done()
			r.set(Stopped, detail, 0)
			return
		}
		wait := cfg.Restart.BackoffBase << (len(crashes) - 1)
		if wait > cfg.Restart.BackoffMax || wait < 0 {
			wait = cfg.Restart.BackoffMax
		}
		r.mu.Lock()
		r.restarts++
		r.mu.Unlock()
		r.opts.Log.Warn("replica exited; restarting after backoff", zap.String("replica", r.spec.ID), zap.String("why", why),
			zap.Duration("backoff", wait), zap.String("log_file", r.spec.LogPath()))
		r.set(Backoff, why, 0)
		select {
		case <-ctx.Done():
			r.set(Stopped, "", 0)
			return
		case <-r.opts.Clock.After(wait):
		}
	}
}

// once runs the server once: it starts it, waits until it is ready, exits,
// times out or ctx ends, and reports why it is gone.
func (r *Replica) once(ctx context.Context, modelPath string, version int64) string {
	cmd, err := r.start(modelPath)
	if err != nil {
		return err.Error()
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	r.mu.Lock()
	r.pid = pid
	r.pids = append(r.pids, pid)
	r.mu.Unlock()
	r.opts.Log.Info("replica started", zap.String("replica", r.spec.ID), zap.Int("pid", pid), zap.Int("port", r.spec.Port),
		zap.String("log_file", r.spec.LogPath()))
	r.set(Starting, "", 0)

	timeout := r.opts.Clock.After(r.spec.Config.StartupTimeout)
	tick := time.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for ready := false; !ready; {
		select {
		case <-ctx.Done():
			r.stop(pid, exited)
			return "stopped"
		case err := <-exited:
			killGroup(pid, syscall.SIGKILL)
			return "exited before ready: " + exitText(err)
		case <-timeout:
			r.stop(pid, exited)
			return fmt.Sprintf("not ready within startup_timeout %s", r.spec.Config.StartupTimeout)
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ready = r.ready(pctx) == nil
			cancel()
		}
	}
	r.opts.Log.Info("replica ready", zap.String("replica", r.spec.ID), zap.Int("pid", pid), zap.Int64("version", version))
	r.set(Ready, "", version)
	select {
	case <-ctx.Done():
		r.stop(pid, exited)
		return "stopped"
	case err := <-exited:
		// Helpers the server started may outlive it: its group goes too.
		killGroup(pid, syscall.SIGKILL)
		return "exited: " + exitText(err)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// start launches the process in a process group of its own, its output
// appended to the replica's log file.
func (r *Replica) start(modelPath string) (*exec.Cmd, error) {
	cfg := r.spec.Config
	argv, err := Argv(cfg.Command, cfg.Shell, map[string]string{
		"{model}": modelPath, "{port}": strconv.Itoa(r.spec.Port), "{host}": cfg.Host, "{name}": r.spec.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	logPath := r.spec.LogPath()
	if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
		return nil, fmt.Errorf("log_dir: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "--- modelgateway: %s starting replica %s on port %d: %q\n",
		time.Now().UTC().Format(time.RFC3339), r.spec.ID, r.spec.Port, argv)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = r.env()
	cmd.Stdout, cmd.Stderr = f, f
	// Its own group, so that stopping it reaches the workers it forks
	// (vLLM starts several); Pdeathsig kills it if the gateway dies
	// without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		fmt.Fprintf(f, "--- modelgateway: start failed: %v\n", err)
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	return cmd, nil
}

// env is the gateway's environment without its own settings (a token of
// the gateway is not the server's business), plus the replica's.
func (r *Replica) env() []string {
	cfg := r.spec.Config
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ROLLOUTMESH_") {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+cfg.Env[k])
	}
	if len(cfg.GPUs) > 0 {
		env = append(env, "CUDA_VISIBLE_DEVICES="+cfg.GPUs[r.spec.Index%len(cfg.GPUs)])
	}
	if cfg.ServerAPIKeyEnv != "" && r.spec.APIKey != "" {
		env = append(env, cfg.ServerAPIKeyEnv+"="+r.spec.APIKey)
	}
	return env
}

// ready reports nil when the server answers its health route and lists the
// served model.
func (r *Replica) ready(ctx context.Context) error {
	base := r.spec.BaseURL()
	if !r.spec.OpenAI {
		if _, err := r.get(ctx, base+"/health"); err != nil {
			return err
		}
	}
	body, err := r.get(ctx, base+"/v1/models")
	if err != nil {
		return err
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil {
		return fmt.Errorf("/v1/models: %w", err)
	}
	for _, m := range models.Data {
		if m.ID == r.spec.Name {
			return nil
		}
	}
	return fmt.Errorf("/v1/models does not list %q yet", r.spec.Name)
}

func (r *Replica) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if r.spec.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.spec.APIKey)
	}
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return body, nil
}

// stop sends SIGTERM to the process group, SIGKILL after the grace period,
// and waits for the process to be reaped.
func (r *Replica) stop(pid int, exited <-chan error) {
	killGroup(pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-r.opts.Clock.After(r.spec.Config.GracePeriod):
		r.opts.Log.Warn("replica ignored SIGTERM; killing it", zap.String("replica", r.spec.ID), zap.Int("pid", pid))
		killGroup(pid, syscall.SIGKILL)
		<-exited
	}
	// Workers that outlived the leader.
	killGroup(pid, syscall.SIGKILL)
}

func killGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(pgid, sig)
	}
}

// lastLines returns up to n last lines of the file (read from its last
// 16 KiB), each cut to 300 bytes.
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 16 << 10
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-window, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // a partial first line
	}
	lines = lines[max(len(lines)-n, 0):]
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = append(l[:300:300], "..."...)
		}
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// spawnReqs feeds the one goroutine that starts servers. It keeps its OS
// thread for ever: Pdeathsig fires when the thread that started a child
// ends, not the process, and Go may end an idle thread.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for req := range spawnReqs {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
