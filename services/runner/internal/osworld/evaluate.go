package osworld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// getterFunc fetches a value for a metric; nil stands for Python's None
// (a missing file), which metrics score 0.
type getterFunc func(ctx context.Context, s *Session, cfg map[string]any) (any, error)

// coreGetters are the getters of this file; registry.go joins every family.
var coreGetters = map[string]getterFunc{
	"vm_file":         getVMFile,
	"vm_command_line": getVMCommandLine,
	"rule":            getRule,
	"cache_file":      getCacheFile,
	"cloud_file":      getCloudFile,
}

// getVMFile saves guest files to cache/<dest> and returns the local path,
// or nil when the file does not exist, as OSWorld's get_vm_file: with
// multi, path and dest are lists, every file is fetched, and only the
// indices in gives (default [0]) are returned, one value bare, several as a
// list.
func getVMFile(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	paths, dests, err := pathDests(cfg)
	if err != nil {
		return nil, fmt.Errorf("vm_file: %w", err)
	}
	give, err := gives(cfg)
	if err != nil {
		return nil, fmt.Errorf("vm_file: %w", err)
	}
	var out []any
	for i := range paths {
		v, err := s.vmFile(ctx, paths[i], dests[i])
		if err != nil {
			return nil, err
		}
		if give[i] {
			if v == nil {
				metric.Notef(ctx, "the guest has no file %s", paths[i])
			}
			out = append(out, v)
		}
	}
	return given(out), nil
}

// vmFile saves one guest file to cache/<dest>: the local path, or nil
// when the guest has no such file.
func (s *Session) vmFile(ctx context.Context, p, d string) (any, error) {
	data, err := s.Guest.File(ctx, p)
	var he *guest.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	local, err := s.cachePath(d)
	if err != nil {
		return nil, err
	}
	if err := s.writeCache(d, data); err != nil {
		return nil, err
	}
	return local, nil
}

// getVMCommandLine returns the output of a command run in the guest.
func getVMCommandLine(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	cmd, err := s.command(cfg)
	if err != nil {
		return nil, fmt.Errorf("vm_command_line: %w", err)
	}
	res, err := s.Guest.Execute(ctx, cmd, boolean(cfg, "shell"), false)
	if why := commandOutcome(err); why != "" {
		return noneBecause(ctx, "%s", why)
	}
	if err != nil {
		// OSWorld logs a non-200 answer and returns None, which its metrics
		// score 0; but the guest answers a failing command with 200 and its
		// return code, so an error here means the command could not run: the
		// evaluator has no input, and the episode fails with env_error.
		return nil, err
	}
	return res.Output, nil
}

// commandOutcome says why err is the guest's 500 for a command that ran
// and did something OSWorld's server cannot answer: it outlived its
// timeout, or printed bytes that are not UTF-8; "" for any other err. What
// the command does is the agent's doing (a script it wrote, a file it
// saved), and OSWorld's getter answers None, which its metrics score 0.
func commandOutcome(err error) string {
	switch {
	case outputNotText(err):
		return "the command's output is not UTF-8, which OSWorld's server answers with an error"
	case guestError(err, "timed out after"):
		return "the command outlived its timeout"
	}
	return ""
}

// outputNotText tells whether err is the guest's 500 for a command whose
// output is not UTF-8 (Python's UnicodeDecodeError in OSWorld's server):
// it ran to its end.
func outputNotText(err error) bool { return guestError(err, "codec can't decode") }

func guestError(err error, says string) bool {
	var he *guest.HTTPError
	return errors.As(err, &he) && he.Status == http.StatusInternalServerError && strings.Contains(he.Body, says)
}

func getRule(_ context.Context, _ *Session, cfg map[string]any) (any, error) {
	r, ok := cfg["rules"]
	if !ok {
		return nil, fmt.Errorf("rule: rules is required")
	}
	return r, nil
}

func getCacheFile(_ context.Context, s *Session, cfg map[string]any) (any, error) {
	p, err := s.cachePath(str(cfg, "path"))
	if err != nil {
		return nil, fmt.Errorf("cache_file: %w", err)
	}
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("cache_file: %s is not in the cache", str(cfg, "path"))
	}
	return p, nil
}

// getCloudFile downloads URLs into cache/<dest>, each unless that file
// exists, through the download store; multi and gives as in getVMFile.
func getCloudFile(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	paths, dests, err := pathDests(cfg)
	if err != nil {
		return nil, fmt.Errorf("cloud_file: %w", err)
	}
	give, err := gives(cfg)
	if err != nil {
		return nil, fmt.Errorf("cloud_file: %w", err)
	}
	var out []any
	for i := range paths {
		local, err := s.cachePath(dests[i])
		if err != nil {
			return nil, fmt.Errorf("cloud_file: %w", err)
		}
		if err := s.fetch(ctx, paths[i], local); err != nil {
			return nil, fmt.Errorf("cloud_file: %w", err)
		}
		if give[i] {
			out = append(out, local)
		}
	}
	return given(out), nil
}

// Evaluate runs the task's postconfig and evaluator, as DesktopEnv.evaluate
// does, within the session's evaluation deadline (EvalTimeout). Past it the
// evaluation fails with an *EvalDeadlineError naming what was running; it
// is never scored.
func (s *Session) Evaluate(ctx context.Context, t Task, in env.EvalInput) (env.Evaluation, error) {
	limit := s.evalTimeout()
	ectx, cancel := context.WithTimeoutCause(ctx, limit, errEvalDeadline)
	defer cancel()
	var stage string
	ev, err := s.evaluate(ectx, t, in, &stage)
	// The caller's own deadline or cancellation keeps its error: the
	// episode then ends as a timeout or aborted, not as a failed evaluation.
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(ectx), errEvalDeadline) {
		return env.Evaluation{}, &EvalDeadlineError{Limit: limit, Stage: stage}
	}
	return ev, err
}

// evaluate is Evaluate without its deadline; *stage names what runs, for
// the error of an evaluation that outlives it.
func (s *Session) evaluate(ctx context.Context, t Task, in env.EvalInput, stage *string) (env.Evaluation, error) {
	ev := t.Evaluator
	// The episode's cache folder is made only for steps and getters that
	// may put files there: an episode scored without them (infeasible, or a
	// last action of FAIL) touches no disk. Made and removed for every
	// episode, it was 5 % of a runner's CPU in bench-mesh, most of it ext4
	// searching past recently deleted inodes for a free one.
	if len(ev.Postconfig) > 0 {
		if err := s.makeCacheDir(); err != nil {
			return env.Evaluation{}, err
		}
	}
	*stage = "postconfig"
	s.postconfig = true
	err := s.Run(ctx, ev.Postconfig)
	s.postconfig = false
	if err != nil {
		return env.Evaluation{}, env.EnvError(fmt.Errorf("postconfig: %w", err))
	}
	details := map[string]any{"func": ev.Func}
	if len(ev.Func) == 1 && ev.Func[0] == "infeasible" {
		score := 0.0
		if in.LastActionFailed {
			score = 1
		}
		return env.Evaluation{Score: score, Details: details}, nil
	}
	if in.LastActionFailed {
		details["last_action"] = "FAIL"
		return env.Evaluation{Score: 0, Details: details}, nil
	}
	if err := s.makeCacheDir(); err != nil {
		return env.Evaluation{}, err
	}
	conj := ev.Conj
	if conj == "" {
		conj = "and"
	}
	var scores []float64
	var results []any
	// notes[i] says what metric i noted of its score (an input that does
	// not open, a point where OSWorld's Python raises): a 0 for a broken
	// file then reads differently from a 0 for a wrong value.
	var notes [][]string
	noted := false
	for i, name := range ev.Func {
		m, ok := metrics[name]
		if !ok {
			return env.Evaluation{}, &env.UnsupportedError{Kind: "metric", Name: name}
		}
		mctx, mnotes := metric.WithNotes(ctx)
		*stage = "the result getter of " + name
		res, err := s.get(mctx, "result", ev.Result[i])
		if err != nil {
			return env.Evaluation{}, err
		}
		var exp any
		hasExp := ev.Expected[i] != nil
		if hasExp {
			*stage = "the expected getter of " + name
			if exp, err = s.get(mctx, "expected", ev.Expected[i]); err != nil {
				return env.Evaluation{}, err
			}
		}
		*stage = "metric " + name
		score, err := s.runMetric(mctx, name, m.Fn, res, exp, hasExp, ev.Options[i])
		if err != nil {
			return env.Evaluation{}, fmt.Errorf("metric %s: %w", name, err)
		}
		scores = append(scores, score)
		results = append(results, res)
		n := mnotes.List()
		if n == nil {
			n = []string{}
		}
		notes = append(notes, n)
		noted = noted || len(n) > 0
		if conj == "and" && score == 0 {
			break
		}
		if conj == "or" && score == 1 {
			break
		}
	}
	details["scores"] = scores
	details["results"] = results
	if noted {
		details["notes"] = notes
	}
	return env.Evaluation{Score: combine(conj, scores), Details: details}, nil
}

// makeCacheDir makes the session's cache folder, which getters and tools
// that write there expect to exist.
func (s *Session) makeCacheDir() error {
	if s.CacheDir == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Clean(s.CacheDir), 0o755); err != nil {
		return fmt.Errorf("make the episode's cache folder: %w", err)
	}
	return nil
}

// combine applies OSWorld's conj: "and" is 0 at the first 0 else the mean;
// "or" is 1 at the first 1 else the max.
func combine(conj string, scores []float64) float64 {
	if len(scores) == 0 {
		return 0
	}
	if conj == "or" {
		best := 0.0
		for _, s := range scores {
			best = max(best, s)
		}
		return best
	}
	sum := 0.0
	for _, s := range scores {
		if s == 0 {
			return 0
		}
		sum += s
	}
	return sum / float64(len(scores))
}

// get runs the getter cfg names, the metric's input of the given role
// ("result" or "expected"). A getter that gives None notes why (see
// noneBecause); those notes join the metric's in ctx, so that a 0 scored
// on a file the agent never saved says so beside the score.
func (s *Session) get(ctx context.Context, role string, cfg map[string]any) (any, error) {
	typ := str(cfg, "type")
	if cfg == nil {
		metric.Notef(ctx, "the %s getter %q gave None", role, typ)
		return nil, nil
	}
	g, ok := getters[typ]
	if !ok {
		return nil, &env.UnsupportedError{Kind: "getter", Name: typ}
	}
	gctx, gnotes := metric.WithNotes(ctx)
	v, err := g(gctx, s, cfg)
	if err != nil {
		return nil, env.EnvError(fmt.Errorf("getter %s: %w", typ, err))
	}
	why := gnotes.List()
	switch {
	case v == nil && len(why) > 0:
		metric.Notef(ctx, "the %s getter %q gave None: %s", role, typ, strings.Join(why, "; "))
	case v == nil:
		metric.Notef(ctx, "the %s getter %q gave None", role, typ)
	default:
		for _, w := range why {
			metric.Notef(ctx, "the %s getter %q: %s", role, typ, w)
		}
	}
	return v, nil
}

// noneBecause is a getter's None (nil, which metrics score 0 as OSWorld's
// do) with the reason noted: the guest has no such file, the command's
// output is not text. Session.get puts the reason in the episode's
// evaluator details.
func noneBecause(ctx context.Context, format string, args ...any) (any, error) {
	metric.Notef(ctx, format, args...)
	return nil, nil
}
