package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/a11y"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/input"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/recording"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *Server) screenshot(w http.ResponseWriter, r *http.Request) error {
	d, err := s.display()
	if err != nil {
		return err
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := d.d.Screenshot(r.Context(), buf); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
	return nil
}

func (s *Server) screenSize(w http.ResponseWriter, r *http.Request) error {
	d, err := s.display()
	if err != nil {
		return err
	}
	wd, ht := d.d.Size()
	writeJSON(w, http.StatusOK, map[string]int{"width": wd, "height": ht})
	return nil
}

func (s *Server) cursorPosition(w http.ResponseWriter, r *http.Request) error {
	d, err := s.display()
	if err != nil {
		return err
	}
	x, y, err := d.d.Pointer(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []int{x, y})
	return nil
}

// windowSize answers the size of the first window whose WM_CLASS names
// match app_class_name (case-insensitive). OSWorld returns None when
// nothing matches, which Flask turns into a 500; we answer 404.
func (s *Server) windowSize(w http.ResponseWriter, r *http.Request) error {
	name, err := formValue(r, "app_class_name")
	if err != nil {
		return err
	}
	if name == "" {
		return badRequest("form field app_class_name is required")
	}
	d, err := s.display()
	if err != nil {
		return err
	}
	wins, err := d.d.Windows(r.Context())
	if err != nil {
		return err
	}
	for _, win := range wins {
		if strings.EqualFold(win.Instance, name) || strings.EqualFold(win.Class, name) {
			writeJSON(w, http.StatusOK, map[string]int{"width": win.Width, "height": win.Height})
			return nil
		}
	}
	return errorf(http.StatusNotFound, "no window with WM_CLASS %q", name)
}

func (s *Server) accessibility(w http.ResponseWriter, r *http.Request) error {
	d, err := s.display()
	if err != nil {
		return err
	}
	timeout := s.cfg.A11yTimeout
	if timeout <= 0 {
		timeout = DefaultA11yTimeout
	}
	deadline := time.Now().Add(timeout)
	if s.at != nil {
		// The whole walk has one deadline, not each D-Bus call: a desktop
		// of slow applications answers late but does answer.
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		start := time.Now()
		apps, complete, err := s.at.Tree(ctx)
		cancel()
		if err == nil {
			if !complete {
				s.log.Warn("accessibility tree truncated", zap.Duration("timeout", timeout),
					zap.Duration("took", time.Since(start)), zap.Int("applications", len(apps)))
			}
			writeJSON(w, http.StatusOK, map[string]string{"AT": a11y.Render("atspi", !complete, apps)})
			return nil
		}
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		if !errors.Is(err, a11y.ErrNoBus) {
			s.log.Debug("AT-SPI tree failed, using the X window tree", zap.Error(err))
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), x11Budget(deadline, time.Now()))
	defer cancel()
	wins, err := d.d.Windows(ctx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"AT": a11y.Render("x11", false, a11y.FromWindows(ctx, wins))})
	return nil
}

// minX11Tree is the least time the X window tree gets after a failed
// AT-SPI walk: one X round trip per window, which a desktop answers in
// well under this.
const minX11Tree = 2 * time.Second

// x11Budget is how long the X window tree may take at now: what is left
// of the request's bound, so that an AT-SPI walk that failed late does
// not double it, but at least minX11Tree.
func x11Budget(deadline, now time.Time) time.Duration {
	return max(deadline.Sub(now), minX11Tree)
}

// terminal returns the text of a terminal widget found through AT-SPI
// (gnome-terminal exposes one; xterm does not), or null. OSWorld's
// SetupController polls this endpoint to see that the server is up, so
// it answers 200 even without a display.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) error {
	var out *string
	if s.at != nil && !s.cfg.Headless {
		ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		defer cancel()
		if apps, _, err := s.at.Tree(ctx); err == nil {
			if text, ok := a11y.FindText(apps, "terminal"); ok {
				out = &text
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"output": out, "status": "success"})
	return nil
}

// actionResult is the answer for one action of POST /v1/actions.
type actionResult struct {
	Index      int    `json:"index"`
	ActionType string `json:"action_type,omitempty"`
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
}

// MaxActions bounds one POST /v1/actions.
const MaxActions = 1000

// MaxBatchWait bounds the WAITs of one POST /v1/actions together: each is
// at most input.MaxDuration, but a thousand of them would hold the input
// for hours (and no client waits that long for its answer).
const MaxBatchWait = 5 * time.Minute

// actions runs a JSON array of computer_13 actions. All actions are
// checked first: if any is invalid nothing runs and the answer is 400.
// Then they run in order; the first failure stops the batch and the rest
// are reported as skipped.
func (s *Server) actions(w http.ResponseWriter, r *http.Request) error {
	var raws []json.RawMessage
	if err := decodeJSON(r, &raws); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusBadRequest {
			return badRequest("body must be a JSON array of computer_13 actions: %v", err)
		}
		return err
	}
	if len(raws) > MaxActions {
		return badRequest("%d actions in one request; the limit is %d", len(raws), MaxActions)
	}
	d, err := s.display()
	if err != nil {
		return err
	}
	wd, ht := d.d.Size()
	acts := make([]input.Action, len(raws))
	results := make([]actionResult, len(raws))
	invalid := 0
	for i, raw := range raws {
		a, err := input.ParseAction(raw, wd, ht)
		results[i] = actionResult{Index: i, ActionType: a.Type, OK: err == nil}
		if err != nil {
			results[i].Error = err.Error()
			invalid++
		}
		acts[i] = a
	}
	if invalid == 0 {
		var wait float64
		for _, a := range acts {
			if a.Type == "WAIT" {
				wait += a.Seconds
			}
		}
		if wait > MaxBatchWait.Seconds() {
			return badRequest("the batch's WAITs add up to %.0f s; at most %.0f s in one request", wait, MaxBatchWait.Seconds())
		}
	}
	if invalid > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"status": "error", "ok": false, "results": results,
			"message": fmt.Sprintf("%d of %d actions are invalid; none was performed", invalid, len(raws)),
			"error":   fmt.Sprintf("%d of %d actions are invalid; none was performed", invalid, len(raws)),
		})
		return nil
	}
	failed := -1
	err = d.in.Do(r.Context(), func(a *input.Actor) error {
		for i, act := range acts {
			if err := a.Perform(r.Context(), act); err != nil {
				failed = i
				return err
			}
		}
		return nil
	})
	if failed >= 0 {
		results[failed].OK, results[failed].Error = false, err.Error()
		for i := failed + 1; i < len(results); i++ {
			results[i].OK, results[i].Error = false, "skipped: an earlier action failed"
		}
	} else if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": failed < 0, "results": results})
	return nil
}

type windowRequest struct {
	WindowName string `json:"window_name"`
	Strict     bool   `json:"strict"`
	ByClass    bool   `json:"by_class"`
}

func (s *Server) findWindow(r *http.Request) (*desktop, x11.Window, error) {
	var req windowRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, x11.Window{}, err
	}
	if req.WindowName == "" {
		return nil, x11.Window{}, badRequest("window_name required")
	}
	d, err := s.display()
	if err != nil {
		return nil, x11.Window{}, err
	}
	wins, err := d.d.Windows(r.Context())
	if err != nil {
		return nil, x11.Window{}, err
	}
	for _, win := range wins {
		if x11.Match(win, req.WindowName, req.Strict, req.ByClass) {
			return d, win, nil
		}
	}
	return nil, x11.Window{}, errorf(http.StatusNotFound, "no window matches %q", req.WindowName)
}

// activateWindow does what OSWorld does with `wmctrl -[x][F]a`, natively.
// OSWorld answers 200 even when no window matched; we answer 404.
func (s *Server) activateWindow(w http.ResponseWriter, r *http.Request) error {
	d, win, err := s.findWindow(r)
	if err != nil {
		return err
	}
	if err := d.d.Activate(r.Context(), win.ID); err != nil {
		return err
	}
	writeText(w, http.StatusOK, "Window activated successfully")
	return nil
}

func (s *Server) closeWindow(w http.ResponseWriter, r *http.Request) error {
	d, win, err := s.findWindow(r)
	if err != nil {
		return err
	}
	if err := d.d.CloseWindow(r.Context(), win.ID); err != nil {
		return err
	}
	writeText(w, http.StatusOK, "Window closed successfully")
	return nil
}

// openFile opens a file with xdg-open (or runs it when it names a program
// on PATH, as OSWorld does), waits for a window whose title contains the
// file name, and activates it. OSWorld waits up to 1800 s; the optional
// "timeout" field (seconds) shortens that.
func (s *Server) openFile(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path    string   `json:"path"`
		Timeout *float64 `json:"timeout"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return badRequest("path required")
	}
	timeout := 1800 * time.Second
	if req.Timeout != nil {
		if *req.Timeout <= 0 || *req.Timeout > 1800 {
			return badRequest("timeout must be in (0, 1800] seconds")
		}
		timeout = time.Duration(*req.Timeout * float64(time.Second))
	}
	d, err := s.display()
	if err != nil {
		return err
	}
	path := s.run.ExpandPath(req.Path)
	var argv []string
	if _, err := os.Stat(path); err == nil {
		argv = []string{"xdg-open", path}
	} else if prog, lerr := lookPath(req.Path); lerr == nil {
		argv = []string{prog}
	} else {
		return errorf(http.StatusNotFound, "File not found: %s", path)
	}
	if err := s.run.Launch(commandSpec(argv)); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	base := filepath.Base(path)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		wins, err := d.d.Windows(ctx)
		if err == nil {
			for _, win := range wins {
				t := strings.ToLower(win.Title)
				if win.Mapped && (strings.Contains(t, strings.ToLower(base)) || stem != "" && strings.Contains(t, strings.ToLower(stem))) {
					if err := d.d.Activate(ctx, win.ID); err != nil {
						return err
					}
					writeText(w, http.StatusOK, "File opened successfully")
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if r.Context().Err() != nil {
				return r.Context().Err()
			}
			return errorf(http.StatusInternalServerError, "no window for %s appeared within %v", base, timeout)
		case <-tick.C:
		}
	}
}

func (s *Server) startRecording(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.display(); err != nil {
		return err
	}
	if s.rec == nil {
		return errorf(http.StatusInternalServerError, "recording unavailable")
	}
	err := s.rec.Start(r.Context())
	switch {
	case errors.Is(err, recording.ErrAlreadyRecording):
		return badRequest("Recording is already in progress.")
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "success", "message": "Started recording."})
	return nil
}

func (s *Server) endRecording(w http.ResponseWriter, r *http.Request) error {
	if s.rec == nil {
		return badRequest("No recording in progress to stop.")
	}
	path, err := s.rec.Stop(r.Context())
	switch {
	case errors.Is(err, recording.ErrNotRecording):
		return badRequest("No recording in progress to stop.")
	case err != nil:
		return err
	}
	return sendFile(w, r, path, "video/mp4")
}
