package osworld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// guestAPI is what the task machinery needs of the guest server; it is
// implemented by *guest.Client.
type guestAPI interface {
	Execute(ctx context.Context, command any, shell, setup bool) (guest.ExecResult, error)
	ExecuteWithVerification(ctx context.Context, params map[string]any) error
	Launch(ctx context.Context, command any, shell bool) error
	OpenFile(ctx context.Context, path string) error
	Window(ctx context.Context, verb, name string, strict, byClass bool) error
	Upload(ctx context.Context, path string, data []byte) error
	File(ctx context.Context, path string) ([]byte, error)
}

var _ guestAPI = (*guest.Client)(nil)

// Session runs one task's steps and evaluator against one guest.
type Session struct {
	Guest guestAPI
	// TaskID names the task's cache directory.
	TaskID string
	// CacheDir is the host cache (OSWorld's cache/<task_id>); downloads and
	// getter results land here.
	CacheDir string
	// ClientPassword, ScreenWidth and ScreenHeight fill the placeholders of
	// execute steps.
	ClientPassword            string
	ScreenWidth, ScreenHeight int
	// HTTP downloads files for download steps and cloud_file getters.
	HTTP *http.Client
	// Sleep waits d or until ctx ends; tests inject a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxDownload bounds a downloaded or uploaded file; default
	// DefaultMaxDownload.
	MaxDownload int64
	// DownloadTimeout bounds one file's download, all attempts and the
	// body included; default DefaultDownloadTimeout.
	DownloadTimeout time.Duration
	// Downloads is the store download steps and cloud_file getters fetch
	// through, shared by every session of the runner (and by runners given
	// the same --cache-dir); nil keeps one next to CacheDir.
	Downloads *dlcache.Cache
	// Google are the account settings of the googledrive and login steps
	// and the googledrive_file getter (--google-settings); nil refuses
	// them (Task.MissingFor).
	Google *GoogleSettings
	// Log receives what a step passes over (a window that never
	// appeared); nil discards it.
	Log *zap.Logger
	// WindowWait bounds a setup step that waits for a window to appear
	// (open); default DefaultWindowWait.
	WindowWait time.Duration
	// EvalTimeout bounds Evaluate: postconfig, getters and metrics; default
	// DefaultEvalTimeout.
	EvalTimeout time.Duration

	// launched are the process names (as pgrep -x reads them) of the
	// programs this config's launch steps started: an activate_window
	// step waits longer for a window while one of them is still starting.
	launched []string
	// appearWait replaces windowAppearWait in tests; zero keeps it.
	appearWait time.Duration

	// postconfig is set while the evaluator's postconfig runs: its
	// activate_window steps are best effort, as in OSWorld (the agent may
	// have renamed or closed the window).
	postconfig bool
}

// Defaults of Session's limits. A task names its files, so a hostile or
// broken task could otherwise point a download at an endless stream or a
// server that sends a byte a minute.
const (
	DefaultMaxDownload     = 1 << 30
	DefaultDownloadTimeout = 10 * time.Minute
)

// DefaultWindowWait bounds a step that waits for a window to appear.
// OSWorld's server waits up to 1800 s for an opened file's window; a file
// no application takes would then hold the VM and the episode's slot for
// half an hour before failing. LibreOffice opening a large document on a
// loaded VM takes seconds to tens of seconds, so two minutes is ample.
const DefaultWindowWait = 2 * time.Minute

func (s *Session) windowWait() time.Duration {
	if s.WindowWait > 0 {
		return s.WindowWait
	}
	return DefaultWindowWait
}

func (s *Session) maxDownload() int64 {
	if s.MaxDownload > 0 {
		return s.MaxDownload
	}
	return DefaultMaxDownload
}

func (s *Session) sleep(ctx context.Context, d time.Duration) error {
	if s.Sleep != nil {
		return s.Sleep(ctx, d)
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

type stepFunc func(ctx context.Context, s *Session, p map[string]any) error

// coreSteps are the steps of this file; registry.go joins every family.
var coreSteps = map[string]stepFunc{
	"download":                  stepDownload,
	"upload_file":               stepUploadFile,
	"open":                      stepOpen,
	"launch":                    stepLaunch,
	"execute":                   stepExecute,
	"command":                   stepExecute,
	"execute_with_verification": stepExecuteWithVerification,
	"sleep":                     stepSleep,
	"activate_window":           stepWindow("activate"),
	"close_window":              stepWindow("close"),
}

// Run executes steps in order. The first failing step aborts, as in
// OSWorld's SetupController.
func (s *Session) Run(ctx context.Context, steps []Step) error {
	for i, st := range steps {
		h, ok := stepHandlers[st.Type]
		if !ok {
			return &env.UnsupportedError{Kind: "step", Name: st.Type}
		}
		p := map[string]any{}
		if len(st.Parameters) > 0 && string(st.Parameters) != "null" {
			if err := json.Unmarshal(st.Parameters, &p); err != nil {
				return fmt.Errorf("step %d (%s): parameters: %v", i, st.Type, err)
			}
		}
		if err := h(ctx, s, p); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, st.Type, err)
		}
	}
	return nil
}

func str(p map[string]any, k string) string {
	s, _ := p[k].(string)
	return s
}

// boolean is Python's truth value of parameter k: task files write
// "shell": "true" as often as true, and OSWorld passes either on as is.
func boolean(p map[string]any, k string) bool { return metric.Truthy(p[k]) }

// replacePlaceholders fills OSWorld's {CLIENT_PASSWORD}, {SCREEN_WIDTH}...
func (s *Session) replacePlaceholders(v string) string {
	r := strings.NewReplacer(
		"{CLIENT_PASSWORD}", s.ClientPassword,
		"{SCREEN_WIDTH_HALF}", strconv.Itoa(s.ScreenWidth/2),
		"{SCREEN_HEIGHT_HALF}", strconv.Itoa(s.ScreenHeight/2),
		"{SCREEN_WIDTH}", strconv.Itoa(s.ScreenWidth),
		"{SCREEN_HEIGHT}", strconv.Itoa(s.ScreenHeight),
	)
	return r.Replace(v)
}

// command returns the command parameter with placeholders filled: a string
// or a list of strings.
func (s *Session) command(p map[string]any) (any, error) {
	switch c := p["command"].(type) {
	case string:
		return s.replacePlaceholders(c), nil
	case []any:
		out := make([]string, 0, len(c))
		for _, e := range c {
			es, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("command list entries must be strings")
			}
			out = append(out, s.replacePlaceholders(es))
		}
		return out, nil
	}
	return nil, fmt.Errorf("command must be a string or a list of strings")
}

// Retries of an execute step with "until", as OSWorld's _execute_setup
// does them: every untilPause, a failed request counting towards
// untilMaxFailures; a request that succeeds without meeting the condition
// does not count. OSWorld then polls for ever; we stop after untilMaxTries.
const (
	untilPause       = 300 * time.Millisecond
	untilMaxFailures = 5
	untilMaxTries    = 200 // a minute of polling
)

func stepExecute(ctx context.Context, s *Session, p map[string]any) error {
	cmd, err := s.command(p)
	if err != nil {
		return err
	}
	until, _ := p["until"].(map[string]any)
	failures := 0
	for try := 1; ; try++ {
		res, err := s.Guest.Execute(ctx, cmd, boolean(p, "shell"), true)
		if outputNotText(err) && len(until) == 0 {
			// The command ran; OSWorld's setup logs the 500 its server
			// answers for output that is not UTF-8, and goes on.
			return nil
		}
		if err != nil {
			if len(until) == 0 || ctx.Err() != nil {
				return err
			}
			failures++
			if failures >= untilMaxFailures {
				return fmt.Errorf("%d failed requests while waiting for until %v: %w", failures, until, err)
			}
		} else {
			for k, content := range map[string]string{"stdout": res.Output, "stderr": res.Error} {
				if name := str(p, k); name != "" {
					if err := s.writeCache(name, []byte(content)); err != nil {
						return err
					}
				}
			}
			if len(until) == 0 || untilMet(until, res) {
				return nil
			}
		}
		if try >= untilMaxTries {
			return fmt.Errorf("until %v not met after %d tries (last: returncode %d, output %.200q)", until, try, res.ReturnCode, res.Output)
		}
		if err := s.sleep(ctx, untilPause); err != nil {
			return err
		}
	}
}

func untilMet(until map[string]any, res guest.ExecResult) bool {
	if rc, ok := until["returncode"].(float64); ok && int(rc) == res.ReturnCode {
		return true
	}
	if o, ok := until["stdout"].(string); ok && strings.Contains(res.Output, o) {
		return true
	}
	if e, ok := until["stderr"].(string); ok && strings.Contains(res.Error, e) {
		return true
	}
	return false
}

func stepExecuteWithVerification(ctx context.Context, s *Session, p map[string]any) error {
	cmd, err := s.command(p)
	if err != nil {
		return err
	}
	q := map[string]any{}
	for k, v := range p {
		q[k] = v
	}
	q["command"] = cmd
	return s.Guest.ExecuteWithVerification(ctx, q)
}

func stepLaunch(ctx context.Context, s *Session, p map[string]any) error {
	cmd, err := s.command(p)
	if err != nil {
		return err
	}
	if c, ok := cmd.(string); ok && !boolean(p, "shell") {
		// OSWorld splits a string of several words on whitespace, and
		// passes one word on as it is.
		if f := strings.Fields(c); len(f) > 1 {
			cmd = f
		}
	}
	if err := s.Guest.Launch(ctx, cmd, boolean(p, "shell")); err != nil {
		return err
	}
	if name := processName(cmd); name != "" {
		s.launched = append(s.launched, name)
	}
	return nil
}

// processName is the name the kernel gives the process a launch command
// starts (its program's base name, cut to the 15 bytes of a task's comm),
// or "" when the command is shell code whose first word names no program.
func processName(cmd any) string {
	var first string
	switch c := cmd.(type) {
	case []string:
		if len(c) > 0 {
			first = c[0]
		}
	case string:
		if f := strings.Fields(c); len(f) > 0 {
			first = f[0]
		}
	}
	name := path.Base(first)
	if first == "" || strings.ContainsAny(name, "=;&|<>()$`\"'") {
		return ""
	}
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}

// stepOpen opens a file (or starts a program) in the guest, which answers
// once a window whose title names it appears. The wait is bounded here,
// not by the guest: OSWorld's server takes no timeout, and desktopd's
// default is OSWorld's 1800 s. Cancelling the request ends desktopd's wait
// too.
func stepOpen(ctx context.Context, s *Session, p map[string]any) error {
	path := str(p, "path")
	if path == "" {
		return fmt.Errorf("path is required")
	}
	bound := s.windowWait()
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := s.Guest.OpenFile(wctx, path)
	if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		// The guest answered nothing within the bound: a slow window, not
		// a dead guest (the client reads its own deadline as one).
		return fmt.Errorf("no window for %s appeared within %v (the bound of setup steps that wait for a window: the runner's --setup-window-timeout)", path, bound)
	}
	return err
}

func stepSleep(ctx context.Context, s *Session, p map[string]any) error {
	sec, ok := p["seconds"].(float64)
	if !ok || sec < 0 || sec > 3600 {
		return fmt.Errorf("seconds must be a number in 0..3600")
	}
	return s.sleep(ctx, time.Duration(sec*float64(time.Second)))
}

func stepWindow(verb string) stepFunc {
	return func(ctx context.Context, s *Session, p map[string]any) error {
		name, strict, byClass := str(p, "window_name"), boolean(p, "strict"), boolean(p, "by_class")
		if verb == "activate" && !s.postconfig {
			return s.activateAndWait(ctx, name, strict, byClass)
		}
		// OSWorld only logs window errors: the window may legitimately be gone.
		err := s.Guest.Window(ctx, verb, name, strict, byClass)
		if alt := chromiumTitle(name, byClass); err != nil && alt != name {
			_ = s.Guest.Window(ctx, verb, alt, strict, byClass)
		}
		return ctx.Err()
	}
}

// chromiumTitle is name with "Google Chrome" read as "Chromium": tasks
// name Chrome's window by its title ("... - Google Chrome"), and a guest
// whose browser is Chromium (Debian's, or OSWorld's ARM image) titles it
// "... - Chromium".
func chromiumTitle(name string, byClass bool) string {
	if byClass {
		return name
	}
	return strings.ReplaceAll(name, "Google Chrome", "Chromium")
}

func fileList(p map[string]any) ([]map[string]any, error) {
	raw, ok := p["files"].([]any)
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("files must be a non-empty list")
	}
	var out []map[string]any
	for _, f := range raw {
		m, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("files entries must be objects")
		}
		out = append(out, m)
	}
	return out, nil
}

// stepDownload puts each file in the guest, fetched through the download
// store: once per URL for every episode and runner sharing it, and never in
// offline mode unless it is stored (dlcache).
func stepDownload(ctx context.Context, s *Session, p map[string]any) error {
	files, err := fileList(p)
	if err != nil {
		return err
	}
	for _, f := range files {
		u, dst := str(f, "url"), str(f, "path")
		if u == "" || dst == "" {
			return fmt.Errorf("download entries need url and path")
		}
		src, err := s.source(ctx, u)
		if err != nil {
			return err
		}
		if err := s.upload(ctx, dst, src); err != nil {
			return fmt.Errorf("download %s: %w", u, err)
		}
	}
	return nil
}

func stepUploadFile(ctx context.Context, s *Session, p map[string]any) error {
	files, err := fileList(p)
	if err != nil {
		return err
	}
	for _, f := range files {
		lp, dst := str(f, "local_path"), str(f, "path")
		if lp == "" || dst == "" {
			return fmt.Errorf("upload_file entries need local_path and path")
		}
		data, err := boundedread.ReadFile(lp, s.maxDownload())
		if err != nil {
			return fmt.Errorf("upload_file: %w", err)
		}
		if err := s.Guest.Upload(ctx, dst, data); err != nil {
			return err
		}
	}
	return nil
}

// fetch puts u's content at local unless local exists, as OSWorld's
// cloud_file getter does (so a file put in the task's cache by hand
// wins). http(s) URLs come through the download store; file:// URLs and
// plain paths are copied.
func (s *Session) fetch(ctx context.Context, u, local string) error {
	if _, err := os.Stat(local); err == nil {
		return nil
	}
	if isHTTP(u) {
		src, err := s.source(ctx, u)
		if err != nil {
			return err
		}
		return linkOrCopy(src, local, s.maxDownload())
	}
	if err := copyFile(strings.TrimPrefix(u, "file://"), local, s.maxDownload()); err != nil {
		return fmt.Errorf("download %s: %w", u, err)
	}
	return nil
}

// writeCache writes data to cache/<name> through a temporary file and a
// rename: a reader never sees half a file, and a name that is a hard link
// into the download store is replaced, not written through.
func (s *Session) writeCache(name string, data []byte) error {
	p, err := s.cachePath(name)
	if err != nil {
		return err
	}
	return writeAtomic(p, bytes.NewReader(data), int64(len(data)))
}

// cachePath joins name under the cache dir, refusing escapes.
func (s *Session) cachePath(name string) (string, error) {
	if s.CacheDir == "" {
		// Joined to "", the name would land at the root of the file system.
		return "", fmt.Errorf("cache file %q: the session has no cache directory", name)
	}
	clean := filepath.Clean("/" + name)
	if clean == "/" {
		return "", fmt.Errorf("empty cache file name")
	}
	return filepath.Join(s.CacheDir, clean), nil
}
