// Package desktop is the desktop environment (the seeds' "osworld" mode): a
// leased guest speaking OSWorld's in-VM HTTP API. Tasks are OSWorld task
// files; their config steps run at reset and their evaluator at the end.
// Actions go through desktopd's /v1/actions when the guest offers it, else
// as pyautogui code through /execute exactly as OSWorld's controller sends
// it, so real OSWorld VMs work too.
package desktop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
)

// Config configures a desktop environment.
type Config struct {
	// ObservationType is screenshot, a11y_tree, screenshot_a11y_tree or som.
	ObservationType string
	// CacheDir is the host cache root; the task's files go to CacheDir/<id>.
	CacheDir string
	// ClientPassword fills {CLIENT_PASSWORD} (OSWorld default "password").
	ClientPassword string
	// Screen is the guest's screen; zero asks the guest.
	Screen action.Screen
	// RequireTerminal adds the terminal text to observations.
	RequireTerminal bool
	// GuestWaitTries bounds the wait for the guest at reset (× 1s).
	GuestWaitTries int
	// Settle is the pause after actions before the next observation
	// (OSWorld's sleep_after_execution), so the screen shows their effect.
	Settle time.Duration
	// Sleep waits (tests inject a fast one); nil is a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Downloads is the store the task's files are fetched through, shared
	// by every episode of the runner; nil keeps one next to CacheDir.
	Downloads *dlcache.Cache
	// Google are the Google account settings (--google-settings); nil
	// refuses the tasks whose steps or getters need the account.
	Google *osworld.GoogleSettings
	// WindowWait bounds a setup step that waits for a window
	// (osworld.Session.WindowWait); zero is the default.
	WindowWait time.Duration
	// EvalTimeout bounds the evaluation (osworld.Session.EvalTimeout);
	// zero is the default.
	EvalTimeout time.Duration
	// Log receives what setup passes over; nil discards it.
	Log *zap.Logger
}

// The settle wait after setup: OSWorld's runner sleeps after its reset;
// here the first observation waits until two screenshots settleInterval
// apart are identical (the applications the steps started have drawn),
// at most settleMax.
const (
	settleInterval = 300 * time.Millisecond
	settleMax      = 10 * time.Second
)

// Env is one episode's desktop environment.
type Env struct {
	g    *guest.Client
	cfg  Config
	task osworld.Task
	sess *osworld.Session
	// actionsAPI is nil until probed, then whether /v1/actions exists.
	actionsAPI *bool
	// episodeDir is the episode's own cache folder, removed at Close.
	episodeDir string
}

// New returns a desktop environment on the guest.
func New(g *guest.Client, cfg Config) *Env {
	if cfg.ClientPassword == "" {
		cfg.ClientPassword = "password"
	}
	if cfg.GuestWaitTries <= 0 {
		cfg.GuestWaitTries = 20
	}
	return &Env{g: g, cfg: cfg}
}

// Screen is the guest's screen size, known after Reset.
func (e *Env) Screen() action.Screen { return e.cfg.Screen }

// Tools is nil: desktop actions come from the action space parser.
func (e *Env) Tools() []env.Tool { return nil }

// Reset parses the OSWorld task, refuses tasks needing what is not
// supported, waits for the guest, refuses tasks needing an application the
// guest lacks, runs the config steps and returns the first observation.
func (e *Env) Reset(ctx context.Context, t env.Task) (env.Observation, error) {
	task, err := osworld.ParseTask(t.Spec)
	if err != nil {
		return env.Observation{}, err
	}
	offer := osworld.Offer{Google: e.cfg.Google}
	if err := refuseMissing(task, offer); err != nil {
		return env.Observation{}, err
	}
	e.task = task
	if err := e.g.Wait(ctx, e.cfg.GuestWaitTries, time.Second); err != nil {
		return env.Observation{}, fmt.Errorf("wait for guest: %w", err)
	}
	// Before any step acts on the VM: an image may lack an application
	// the task runs (VS Code).
	apps, err := osworld.ProbeApps(ctx, e.g, task)
	if err != nil {
		return env.Observation{}, env.EnvError(fmt.Errorf("ask the guest for its applications: %w", err))
	}
	offer.Apps = &apps
	if err := refuseMissing(task, offer); err != nil {
		return env.Observation{}, err
	}
	if e.cfg.Screen.Width == 0 {
		w, h, err := e.g.ScreenSize(ctx)
		if err != nil {
			return env.Observation{}, fmt.Errorf("screen size: %w", err)
		}
		// Every action is checked against this size: a guest's 0 would
		// turn the checks off.
		if w < 1 || h < 1 || w > action.MaxScreenSide || h > action.MaxScreenSide {
			return env.Observation{}, env.EnvError(fmt.Errorf("screen size: the guest reports %dx%d, want sides in 1..%d", w, h, action.MaxScreenSide))
		}
		e.cfg.Screen = action.Screen{Width: w, Height: h}
	}
	id := task.ID
	if id == "" {
		id = t.ID
	}
	if err := osworld.CheckOffline(task, e.cfg.Downloads); err != nil {
		return env.Observation{}, env.EnvError(err)
	}
	cache := ""
	if e.cfg.CacheDir != "" {
		// Each episode gets its own folder under the task's: the episodes
		// of a GRPO group run the same task at once, and one's vm_file
		// result must not replace another's before it is scored. It is
		// only named here: the session makes it with the first file it
		// writes there (every write makes its directories), and most
		// episodes write none; making it and the task's folder for every
		// episode was 1-3 % of a runner's CPU in bench-mesh.
		var name [8]byte
		if _, err := rand.Read(name[:]); err != nil {
			return env.Observation{}, fmt.Errorf("name the episode's cache folder: %w", err)
		}
		cache = filepath.Join(e.cfg.CacheDir, safeName(id), "episode-"+hex.EncodeToString(name[:]))
		e.episodeDir = cache
	}
	e.sess = &osworld.Session{
		Guest:          e.g,
		TaskID:         id,
		CacheDir:       cache,
		ClientPassword: e.cfg.ClientPassword,
		ScreenWidth:    e.cfg.Screen.Width,
		ScreenHeight:   e.cfg.Screen.Height,
		Sleep:          e.cfg.Sleep,
		Downloads:      e.cfg.Downloads,
		Google:         e.cfg.Google,
		WindowWait:     e.cfg.WindowWait,
		EvalTimeout:    e.cfg.EvalTimeout,
		Log:            e.cfg.Log,
	}
	if err := e.sess.Run(ctx, task.Config); err != nil {
		return env.Observation{}, fmt.Errorf("setup: %w", err)
	}
	shot, err := e.settle(ctx)
	if err != nil {
		return env.Observation{}, err
	}
	return e.observe(ctx, shot)
}

// refuseMissing is the task's first missing need as the episode's
// UNSUPPORTED error, or nil; `rollout tasks check` judges with the same
// Task.MissingFor.
func refuseMissing(task osworld.Task, o osworld.Offer) error {
	if missing := task.MissingFor(o); len(missing) > 0 {
		m := missing[0]
		return &env.UnsupportedError{Kind: m.Kind, Name: m.Name, Why: m.Reason}
	}
	return nil
}

// settle waits until the screen stops changing: two screenshots
// settleInterval apart with the same bytes (desktopd encodes equal pixels
// to equal PNGs), at most settleMax, after which the episode goes on with
// a log line (a blinking caret or a playing video never settles). It
// returns the last screenshot, which is the first observation's.
func (e *Env) settle(ctx context.Context) ([]byte, error) {
	prev, err := e.g.Screenshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	for waited := settleInterval; waited <= settleMax; waited += settleInterval {
		if err := e.sleep(ctx, settleInterval); err != nil {
			return nil, err
		}
		cur, err := e.g.Screenshot(ctx)
		if err != nil {
			return nil, fmt.Errorf("screenshot: %w", err)
		}
		if bytes.Equal(prev, cur) {
			return cur, nil
		}
		prev = cur
	}
	e.log().Info("screen still changing after setup; observing anyway", zap.Duration("waited", settleMax))
	return prev, nil
}

func (e *Env) log() *zap.Logger {
	if e.cfg.Log != nil {
		return e.cfg.Log
	}
	return zap.NewNop()
}

// safeName keeps a task id from escaping the cache directory.
func safeName(s string) string {
	b := filepath.Base("/" + strings.ReplaceAll(s, "\\", "_"))
	if b == "/" || b == "." || b == ".." {
		return "task"
	}
	return b
}

// Observe takes the observation the observation type asks for.
func (e *Env) Observe(ctx context.Context) (env.Observation, error) {
	return e.observe(ctx, nil)
}

// observe is Observe with the screenshot already taken when shot is not
// nil.
func (e *Env) observe(ctx context.Context, shot []byte) (env.Observation, error) {
	obs := env.Observation{Screenshot: shot}
	if obs.Screenshot == nil {
		var err error
		if obs.Screenshot, err = e.g.Screenshot(ctx); err != nil {
			return obs, fmt.Errorf("screenshot: %w", err)
		}
	}
	if strings.Contains(e.cfg.ObservationType, "a11y_tree") {
		// A missing tree (no AT-SPI in the guest) is an empty observation,
		// not a failed episode.
		obs.A11yTree, _ = e.g.Accessibility(ctx)
	}
	if e.cfg.RequireTerminal {
		obs.Terminal, _ = e.g.Terminal(ctx)
	}
	return obs, nil
}

// Step executes the actions in order and observes. An action the guest
// refuses is a failed result, not an error; an unreachable guest is.
func (e *Env) Step(ctx context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	results := make([]env.Result, len(acts))
	for i := 0; i < len(acts); {
		a := acts[i]
		switch {
		case a.Type == action.TypeWait || a.Terminal():
			results[i] = env.Result{OK: true}
			i++
		case a.Type == action.TypeCode:
			results[i] = e.runCode(ctx, a.Code)
			if isUnreachable(results[i]) {
				return results, env.Observation{}, fmt.Errorf("execute: %w: %s", env.ErrGuestUnreachable, results[i].Error)
			}
			i++
		case a.Type == action.TypeTool:
			results[i] = env.Result{Error: "the desktop environment has no tools"}
			i++
		default:
			// A run of computer_13 actions goes to /v1/actions in one call.
			j := i
			for j < len(acts) && action.IsComputer13(acts[j].Type) && !acts[j].Terminal() && acts[j].Type != action.TypeWait {
				j++
			}
			if err := e.runComputer13(ctx, acts[i:j], results[i:j]); err != nil {
				return results, env.Observation{}, err
			}
			i = j
		}
	}
	if err := e.sleep(ctx, e.cfg.Settle); err != nil {
		return results, env.Observation{}, err
	}
	obs, err := e.Observe(ctx)
	return results, obs, err
}

func (e *Env) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if e.cfg.Sleep != nil {
		return e.cfg.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func isUnreachable(r env.Result) bool {
	return !r.OK && strings.Contains(r.Error, env.ErrGuestUnreachable.Error())
}

func (e *Env) runCode(ctx context.Context, code string) env.Result {
	res, err := e.g.RunPythonCommand(ctx, FixLessThan(code))
	if err != nil {
		return env.Result{Error: err.Error()}
	}
	if res.ReturnCode != 0 || (res.Status != "" && res.Status != "success") {
		msg := res.Error
		if msg == "" {
			msg = res.Message
		}
		return env.Result{Error: strings.TrimSpace(msg), Output: res.Output}
	}
	return env.Result{OK: true, Output: res.Output}
}

func (e *Env) runComputer13(ctx context.Context, acts []action.Action, out []env.Result) error {
	if e.actionsAPI == nil || *e.actionsAPI {
		dicts := make([]any, len(acts))
		for i, a := range acts {
			dicts[i] = a.OSWorldDict()
		}
		outcomes, err := e.g.Actions(ctx, dicts)
		switch {
		case err == guest.ErrNoActionsAPI:
			no := false
			e.actionsAPI = &no
		case err != nil:
			return fmt.Errorf("actions: %w", err)
		default:
			yes := true
			e.actionsAPI = &yes
			for i := range out {
				if i < len(outcomes) {
					out[i] = env.Result{OK: outcomes[i].OK, Error: outcomes[i].Error}
				} else {
					out[i] = env.Result{Error: "guest gave no result for this action"}
				}
			}
			return nil
		}
	}
	// A stock OSWorld guest: run the code OSWorld's controller would, but
	// type text its pyautogui would drop through the clipboard.
	for i, a := range acts {
		code := a.Code
		if text, _ := a.Params["text"].(string); a.Type == "TYPING" && action.NeedsPaste(text) {
			code = action.PasteCode(text)
		}
		if code == "" {
			var err error
			if code, err = action.Code(a); err != nil {
				out[i] = env.Result{Error: err.Error()}
				continue
			}
		}
		out[i] = e.runCode(ctx, code)
		if isUnreachable(out[i]) {
			return fmt.Errorf("execute: %w", env.ErrGuestUnreachable)
		}
	}
	return nil
}

// Evaluate runs the task's postconfig and evaluator.
func (e *Env) Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error) {
	if e.sess == nil {
		return env.Evaluation{}, fmt.Errorf("evaluate before reset")
	}
	return e.sess.Evaluate(ctx, e.task, in)
}

// StartRecording starts the guest's screen recording.
func (e *Env) StartRecording(ctx context.Context) error { return e.g.StartRecording(ctx) }

// EndRecording stops it and returns the MP4.
func (e *Env) EndRecording(ctx context.Context) ([]byte, error) { return e.g.EndRecording(ctx) }

// Close drops the episode's connections to the guest (the guest itself
// belongs to its lease) and its scratch directory.
func (e *Env) Close(context.Context) error {
	e.g.Close()
	if e.episodeDir == "" {
		return nil
	}
	dir := e.episodeDir
	e.episodeDir = ""
	return os.RemoveAll(dir)
}

var (
	pressLT    = regexp.MustCompile(`pyautogui\.press\(["'](?:<|\\u003c)["']\)`)
	typewriteS = regexp.MustCompile(`pyautogui\.typewrite\('([^']*)'\)`)
	typewriteD = regexp.MustCompile(`pyautogui\.typewrite\("([^"]*)"\)`)
)

// FixLessThan is OSWorld's _fix_pyautogui_less_than_bug: pyautogui types
// '>' for '<' on some layouts, so press('<') and '<' inside typewrite(...)
// become hotkey("shift", ",").
func FixLessThan(code string) string {
	code = pressLT.ReplaceAllString(code, `pyautogui.hotkey("shift", ",")`)
	fix := func(q string) func(string) string {
		return func(m string) string {
			inner := m[len("pyautogui.typewrite(")+1 : len(m)-2]
			if !strings.Contains(inner, "<") {
				return m
			}
			var parts []string
			for i, p := range strings.Split(inner, "<") {
				if i > 0 {
					parts = append(parts, `pyautogui.hotkey("shift", ",")`)
				}
				if p != "" {
					parts = append(parts, "pyautogui.typewrite("+q+p+q+")")
				}
			}
			return strings.Join(parts, "; ")
		}
	}
	code = typewriteS.ReplaceAllStringFunc(code, fix("'"))
	return typewriteD.ReplaceAllStringFunc(code, fix(`"`))
}
