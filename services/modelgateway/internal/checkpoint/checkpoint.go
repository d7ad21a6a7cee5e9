// Package checkpoint watches a directory for new model checkpoints and
// hands the newest complete one to the gateway's weight update, so that the
// backends serve the latest model without a trainer calling in. A checkpoint
// is complete when a marker file appears in it or when its size has not
// changed for a while; a half-written one is never loaded.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
)

// Completion rules.
const (
	CompleteMarker     = "marker"
	CompleteStableSize = "stable_size"
)

// Config is the gateway's `checkpoints` section.
type Config struct {
	// Dir holds one checkpoint per entry (a directory, or a file with
	// stable_size).
	Dir string `yaml:"dir"`
	// Pattern selects entries by name (filepath.Match; default "*").
	Pattern string `yaml:"pattern"`
	// Complete is marker (default) or stable_size.
	Complete string `yaml:"complete"`
	// Marker is the file whose presence inside a checkpoint directory
	// says it is complete (default "COMPLETE").
	Marker string `yaml:"marker"`
	// StableFor is how long a checkpoint's total size and newest
	// modification time must stay unchanged with stable_size (default 30s).
	StableFor time.Duration `yaml:"stable_for"`
	// Interval between scans (default 10s).
	Interval time.Duration `yaml:"interval"`
	// Strategy of the update: rolling (default) or all_at_once.
	Strategy string `yaml:"strategy"`
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Pattern == "" {
		c.Pattern = "*"
	}
	if c.Complete == "" {
		c.Complete = CompleteMarker
	}
	if c.Marker == "" {
		c.Marker = "COMPLETE"
	}
	if c.StableFor == 0 {
		c.StableFor = 30 * time.Second
	}
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.Strategy == "" {
		c.Strategy = "rolling"
	}
}

// Validate checks c after Defaults; errors name the field.
func (c *Config) Validate() error {
	if c.Dir == "" {
		return errors.New("dir: required")
	}
	if _, err := filepath.Match(c.Pattern, "x"); err != nil {
		return fmt.Errorf("pattern: %w", err)
	}
	switch c.Complete {
	case CompleteMarker, CompleteStableSize:
	default:
		return fmt.Errorf("complete: %q is not marker or stable_size", c.Complete)
	}
	if strings.ContainsAny(c.Marker, "/\x00") || c.Marker == "." || c.Marker == ".." {
		return fmt.Errorf("marker: %q is not a file name", c.Marker)
	}
	if c.StableFor < 0 || c.Interval < 0 {
		return errors.New("stable_for, interval: must be >= 0")
	}
	switch c.Strategy {
	case "rolling", "all_at_once":
	default:
		return fmt.Errorf("strategy: %q is not rolling or all_at_once", c.Strategy)
	}
	return nil
}

// ErrRetry from Apply says the update could not run now (no backend is
// running yet): the checkpoint is tried again at the next scan.
var ErrRetry = errors.New("retry later")

// Options connect the watcher to the gateway.
type Options struct {
	Clock clock.Clock
	Log   *zap.Logger
	// Current is the gateway's weight version.
	Current func() int64
	// Apply moves the backends to the checkpoint at path as version.
	Apply func(ctx context.Context, path string, version int64) error
	// OnResult hears updated, refused and skipped.
	OnResult func(result string)
}

// Watcher scans Dir.
type Watcher struct {
	cfg  Config
	opts Options

	mu      sync.Mutex
	seen    map[string]*entry
	lastErr string
	last    string
}

type entry struct {
	size, files int64
	mtime       time.Time
	since       time.Time
	done        bool
}

// New returns a watcher; cfg must have passed Validate.
func New(cfg Config, opts Options) *Watcher {
	cfg.Defaults()
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.OnResult == nil {
		opts.OnResult = func(string) {}
	}
	return &Watcher{cfg: cfg, opts: opts, seen: map[string]*entry{}}
}

// Run scans until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	for {
		w.Scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-w.opts.Clock.After(w.cfg.Interval):
		}
	}
}

// Status reports the last checkpoint loaded and the last refusal.
func (w *Watcher) Status() (loaded, lastErr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.lastErr
}

type candidate struct {
	name, path string
	version    int64 // -1: no number in the name
	mtime      time.Time
}

var digitsRE = regexp.MustCompile(`[0-9]+`)

// VersionOf is the last number in a checkpoint's name (step-200 -> 200), or
// -1 when it has none or it is out of range.
func VersionOf(name string) int64 {
	all := digitsRE.FindAllString(name, -1)
	if len(all) == 0 {
		return -1
	}
	v, err := strconv.ParseInt(all[len(all)-1], 10, 64)
	if err != nil || v > 1<<53-1 {
		return -1
	}
	return v
}

// Scan looks at the directory once and loads the newest complete
// checkpoint if it is newer than what the backends serve.
func (w *Watcher) Scan(ctx context.Context) {
	ents, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		w.opts.Log.Warn("checkpoint dir unreadable", zap.String("dir", w.cfg.Dir), zap.Error(err))
		return
	}
	now := w.opts.Clock.Now()
	var cands []candidate
	w.mu.Lock()
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if ok, _ := filepath.Match(w.cfg.Pattern, name); !ok {
			continue
		}
		st := w.seen[name]
		if st == nil {
			st = &entry{}
			w.seen[name] = st
		}
		if st.done {
			continue
		}
		path := filepath.Join(w.cfg.Dir, name)
		if !w.complete(path, e, st, now) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		cands = append(cands, candidate{name: name, path: path, version: VersionOf(name), mtime: info.ModTime()})
	}
	w.mu.Unlock()
	if len(cands) == 0 {
		return
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.version != b.version {
			return int(min(max(a.version-b.version, -1), 1))
		}
		return a.mtime.Compare(b.mtime)
	})
	newest := cands[len(cands)-1]
	for _, c := range cands[:len(cands)-1] {
		w.finish(c.name, "skipped")
		w.opts.Log.Info("checkpoint skipped: a newer one is complete", zap.String("checkpoint", c.path), zap.String("newer", newest.path))
	}
	cur := w.opts.Current()
	v := newest.version
	if v < 0 {
		v = cur + 1
	}
	if v <= cur {
		w.finish(newest.name, "skipped")
		w.opts.Log.Info("checkpoint skipped: the backends serve this version or a newer one",
			zap.String("checkpoint", newest.path), zap.Int64("checkpoint_version", v), zap.Int64("version", cur))
		return
	}
	err = w.opts.Apply(ctx, newest.path, v)
	switch {
	case errors.Is(err, ErrRetry):
		return
	case err != nil:
		w.mu.Lock()
		w.lastErr = fmt.Sprintf("checkpoint %s (version %d) refused: %v", newest.path, v, err)
		w.mu.Unlock()
		w.finish(newest.name, "refused")
		w.opts.Log.Error("checkpoint refused; the previous version keeps serving", zap.String("checkpoint", newest.path),
			zap.Int64("checkpoint_version", v), zap.Int64("version", w.opts.Current()), zap.Error(err))
	default:
		w.mu.Lock()
		w.last = newest.path
		w.mu.Unlock()
		w.finish(newest.name, "updated")
		w.opts.Log.Info("checkpoint loaded", zap.String("checkpoint", newest.path), zap.Int64("version", v))
	}
}

func (w *Watcher) finish(name, result string) {
	w.mu.Lock()
	if st := w.seen[name]; st != nil {
		st.done = true
	}
	w.mu.Unlock()
	w.opts.OnResult(result)
}

// complete applies the completion rule; st carries what stable_size saw.
func (w *Watcher) complete(path string, e fs.DirEntry, st *entry, now time.Time) bool {
	if w.cfg.Complete == CompleteMarker {
		if !e.IsDir() {
			return false
		}
		fi, err := os.Stat(filepath.Join(path, w.cfg.Marker))
		return err == nil && fi.Mode().IsRegular()
	}
	size, files, mtime, err := measure(path)
	if err != nil || files == 0 {
		return false
	}
	if size != st.size || files != st.files || !mtime.Equal(st.mtime) || st.since.IsZero() {
		st.size, st.files, st.mtime, st.since = size, files, mtime, now
		return w.cfg.StableFor == 0
	}
	return now.Sub(st.since) >= w.cfg.StableFor
}

// maxFiles bounds the walk of one checkpoint.
const maxFiles = 100000

// measure sums the sizes of the regular files under path and finds the
// newest modification time.
func measure(path string) (size, files int64, mtime time.Time, err error) {
	err = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		if files > maxFiles {
			return fmt.Errorf("more than %d files", maxFiles)
		}
		size += info.Size()
		if info.ModTime().After(mtime) {
			mtime = info.ModTime()
		}
		return nil
	})
	return size, files, mtime, err
}
