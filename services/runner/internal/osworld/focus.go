package osworld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// Bounds of the wait for an activate_window step of a task's config. The
// window may still be starting (tasks launch an application and activate
// it in the next step), so a missing window is looked for again; once one
// matches, it must become the active window. Mousepad took 11-15 s to map
// its window on a freshly booted qemu guest under software emulation with
// the host's two cores busy; with a 10 s bound the agent typed into an
// empty desktop. A name no window ever takes (a title another desktop
// does not give) costs the whole bound once per episode. Past the bound
// the wait goes on, up to the session's windowWait (--setup-window-timeout,
// as for an open step), only while a program the config launched is
// running without a window of its own: a cold start on a loaded host (the
// first Mousepad of a freshly booted qemu guest took over 30 s beside
// three other guests booting).
const (
	windowAppearWait = 30 * time.Second
	windowFocusWait  = 5 * time.Second
	windowPoll       = 200 * time.Millisecond
	// windowReactivate re-sends the activation while waiting for the
	// focus: a window manager may refuse the first request while the
	// window is still being mapped.
	windowReactivate = time.Second
)

// activeWindowScript prints the active window's title and class with
// xprop, which OSWorld's Ubuntu guest and ours both have: it works
// through /execute on any guest server. It prints "none" when no window
// is active, and exits non-zero when it cannot tell.
const activeWindowScript = `a=$(xprop -root _NET_ACTIVE_WINDOW) || exit 3
case "$a" in *"not found"*) echo none; exit 0;; esac
id=${a##* }
case "$id" in 0x0|"") echo none; exit 0;; esac
xprop -id "$id" -notype _NET_WM_NAME WM_NAME WM_CLASS`

// activeWindow is the window with the input focus as xprop describes it.
type activeWindow struct {
	None            bool
	Title           string
	Instance, Class string
}

// parseXprop reads activeWindowScript's output. xprop prints a string
// property as NAME = "value" without escaping quotes inside it, and
// WM_CLASS as "instance", "class".
func parseXprop(out string) activeWindow {
	var w activeWindow
	if strings.TrimSpace(out) == "none" {
		return activeWindow{None: true}
	}
	var netName, name string
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "_NET_WM_NAME":
			netName = unquote(v)
		case "WM_NAME":
			name = unquote(v)
		case "WM_CLASS":
			inst, cls, _ := strings.Cut(strings.TrimSpace(v), `", "`)
			w.Instance, w.Class = strings.TrimPrefix(inst, `"`), strings.TrimSuffix(cls, `"`)
		}
	}
	w.Title = netName
	if w.Title == "" {
		w.Title = name
	}
	return w
}

func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// matches is wmctrl's selection, as the guest server applies it: the
// title or, by class, either WM_CLASS string (or both joined by a dot); a
// substring ignoring case unless strict, which is exact.
func (w activeWindow) matches(name string, strict, byClass bool) bool {
	if w.None {
		return false
	}
	cands := []string{w.Title}
	if byClass {
		cands = []string{w.Instance, w.Class, w.Instance + "." + w.Class}
	}
	for _, c := range cands {
		if strict && c == name || !strict && strings.Contains(strings.ToLower(c), strings.ToLower(name)) {
			return true
		}
	}
	return false
}

func (w activeWindow) String() string {
	if w.None {
		return "no window"
	}
	return fmt.Sprintf("%q (class %s.%s)", w.Title, w.Instance, w.Class)
}

// errCannotTell means the guest cannot say which window is active (no
// xprop): the focus is then not checked.
var errCannotTell = errors.New("the guest cannot tell the active window")

func (s *Session) activeWindow(ctx context.Context) (activeWindow, error) {
	res, err := s.Guest.Execute(ctx, []string{"sh", "-c", activeWindowScript}, false, true)
	if err != nil {
		return activeWindow{}, err
	}
	if res.ReturnCode != 0 {
		return activeWindow{}, fmt.Errorf("%w: exit %d: %s", errCannotTell, res.ReturnCode, strings.TrimSpace(res.Error))
	}
	return parseXprop(res.Output), nil
}

func isNotFound(err error) bool {
	var he *guest.HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound
}

func (s *Session) log() *zap.Logger {
	if s.Log != nil {
		return s.Log
	}
	return zap.NewNop()
}

// activateAndWait is a config activate_window step proven done: it
// activates the window, looking for it again while it does not exist yet,
// then waits until it is the active window. A window that never appears
// (within windowAppearWait, or longer while the program launched for it
// is still starting: launchStarting) is logged and passed over, as
// OSWorld's wmctrl call does (tasks name windows by titles that another
// desktop may not give, such as "Terminal"); one that exists but never
// takes the focus fails the step, since the agent would then type into
// another window.
func (s *Session) activateAndWait(ctx context.Context, name string, strict, byClass bool) error {
	names := []string{name}
	if alt := chromiumTitle(name, byClass); alt != name {
		names = append(names, alt)
	}
	activate := func() (string, error) {
		var err error
		for _, n := range names {
			if err = s.Guest.Window(ctx, "activate", n, strict, byClass); err == nil {
				return n, nil
			}
		}
		return "", err
	}
	var matched string
	extended := false
	for waited := time.Duration(0); ; waited += windowPoll {
		n, err := activate()
		if err == nil {
			matched = n
			break
		}
		if !isNotFound(err) {
			// A guest server that cannot activate windows (OSWorld's
			// only logs this too).
			s.log().Warn("activate_window failed", zap.String("window", name), zap.Error(err))
			return ctx.Err()
		}
		if waited >= s.windowAppearWait() && waited%windowReactivate == 0 {
			starting := ""
			if waited < s.windowWait() {
				starting = s.launchStarting(ctx)
			}
			if starting == "" {
				// The program may have mapped the window since the
				// activation above (launchStarting then finds it up):
				// look once more.
				if n, err := activate(); err == nil {
					matched = n
					break
				}
				s.log().Warn("activate_window: no window matches; going on as OSWorld does",
					zap.String("window", name), zap.Duration("waited", waited))
				return ctx.Err()
			}
			if !extended {
				extended = true
				s.log().Info("activate_window: no window matches yet, but the program launched for it is still starting; waiting longer",
					zap.String("window", name), zap.String("program", starting), zap.Duration("waited", waited), zap.Duration("bound", s.windowWait()))
			}
		}
		if err := s.sleep(ctx, windowPoll); err != nil {
			return err
		}
	}
	var last activeWindow
	for waited := time.Duration(0); ; waited += windowPoll {
		w, err := s.activeWindow(ctx)
		if errors.Is(err, errCannotTell) {
			s.log().Warn("activate_window: focus not checked", zap.String("window", name), zap.Error(err))
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the active window: %w", err)
		}
		if w.matches(matched, strict, byClass) {
			return nil
		}
		last = w
		if waited >= windowFocusWait {
			// OSWorld's own server answers 200 whether or not a window
			// matched: fail only when one is there.
			if exists, err := s.windowExists(ctx, matched, strict, byClass); err != nil || !exists {
				s.log().Warn("activate_window: the window is not active and no longer listed; going on as OSWorld does",
					zap.String("window", name), zap.Stringer("active", last), zap.Error(err))
				return ctx.Err()
			}
			return fmt.Errorf("window %q exists but never became the active window within %v (active: %v)", name, windowFocusWait, last)
		}
		if waited > 0 && waited%windowReactivate == 0 {
			if _, err := activate(); err != nil && !isNotFound(err) {
				return fmt.Errorf("activate window %q: %w", name, err)
			}
		}
		if err := s.sleep(ctx, windowPoll); err != nil {
			return err
		}
	}
}

func (s *Session) windowAppearWait() time.Duration {
	if s.appearWait > 0 {
		return s.appearWait
	}
	return windowAppearWait
}

// launchStarting names a program this config launched that is still
// starting: running, with no window of its own mapped yet. It returns ""
// when every launched program has exited or mapped a window (it is up, and
// the step's name just selects none of its windows), and when the guest
// cannot tell (no pgrep or wmctrl). Process VMs share the host's process
// table: another VM's program of the same name, which has no window on
// this display, reads as starting, and a name no window takes then waits
// the longer bound.
func (s *Session) launchStarting(ctx context.Context) string {
	if len(s.launched) == 0 {
		return ""
	}
	pids := map[string]string{} // pid -> program
	for _, name := range s.launched {
		res, err := s.Guest.Execute(ctx, []string{"pgrep", "-x", "--", name}, false, true)
		if err != nil || res.ReturnCode != 0 {
			continue // exit 1: no such process
		}
		for _, pid := range strings.Fields(res.Output) {
			pids[pid] = name
		}
	}
	if len(pids) == 0 {
		return ""
	}
	// wmctrl -lp: "<id> <desktop> <pid> <host> <title>"; the pid is the
	// window's _NET_WM_PID.
	res, err := s.Guest.Execute(ctx, []string{"wmctrl", "-lp"}, false, true)
	if err != nil || res.ReturnCode != 0 {
		return ""
	}
	for _, line := range strings.Split(res.Output, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && pids[f[2]] != "" {
			return ""
		}
	}
	for _, prog := range pids {
		return prog
	}
	return ""
}

// windowExists says whether the window manager lists a window that name
// selects, from wmctrl -lx: "<id> <desktop> <instance>.<class> <host> <title>".
func (s *Session) windowExists(ctx context.Context, name string, strict, byClass bool) (bool, error) {
	res, err := s.Guest.Execute(ctx, []string{"wmctrl", "-lx"}, false, true)
	if err != nil {
		return false, err
	}
	if res.ReturnCode != 0 {
		return false, fmt.Errorf("%w: wmctrl -lx: exit %d", errCannotTell, res.ReturnCode)
	}
	for _, line := range strings.Split(res.Output, "\n") {
		f, title := fieldsThenRest(line, 4)
		if len(f) < 4 {
			continue
		}
		inst, cls, _ := strings.Cut(f[2], ".")
		if (activeWindow{Title: title, Instance: inst, Class: cls}).matches(name, strict, byClass) {
			return true, nil
		}
	}
	return false, nil
}

// fieldsThenRest splits the first n space-separated fields off line and
// returns them with the rest of the line after one separator, spaces kept.
func fieldsThenRest(line string, n int) ([]string, string) {
	var f []string
	rest := line
	for len(f) < n {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return f, ""
		}
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			return append(f, rest), ""
		}
		f = append(f, rest[:i])
		rest = rest[i:]
	}
	if rest != "" {
		rest = rest[1:]
	}
	return f, rest
}
