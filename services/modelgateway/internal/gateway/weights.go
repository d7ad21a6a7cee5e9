package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
)

// UpdateOptions says how to move to new weights.
type UpdateOptions struct {
	Version int64
	Source  string
	// Rolling updates one backend at a time while the others serve;
	// otherwise all pause, all update, all resume.
	Rolling bool
	// Abort ends in-flight generations instead of waiting for them.
	Abort bool
	// Auto marks an update the checkpoint watcher started. A caller's
	// update (the trainer's) may then repeat the version it set: the
	// trainer's numbering wins over the watcher's.
	Auto bool
}

// ErrNotRunning is a launched replica's outcome when it was not ready: it
// starts on the newest weights instead.
var ErrNotRunning = errors.New("replica not running; it starts on the newest weights")

// ErrNoneRunning: no backend could take an update because none is running.
var ErrNoneRunning = errors.New("no backend is running")

// BackendUpdate is the outcome on one backend.
type BackendUpdate struct {
	Backend  string
	Err      error
	Duration time.Duration
}

// UpdateResult reports an update.
type UpdateResult struct {
	Version, Previous int64
	Backends          []BackendUpdate
	At                time.Time
}

// UpdateWeights pauses, updates and resumes the backends by kind and records
// the new version. Backends that fail keep their old version (and answers
// from them carry it). It fails when no backend took the new weights.
func (g *Gateway) UpdateWeights(ctx context.Context, opts UpdateOptions) (*UpdateResult, error) {
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	prev := g.version.Load()
	if opts.Version < prev || (opts.Version == prev && (opts.Auto || !g.autoVersion)) {
		return nil, fmt.Errorf("%w: %d <= %d", ErrStaleVersion, opts.Version, prev)
	}
	res := &UpdateResult{Version: opts.Version, Previous: prev, Backends: make([]BackendUpdate, len(g.all))}
	starts := make([]time.Time, len(g.all))
	errs := make([]error, len(g.all))

	// phase runs f on the backends not yet failed: one at a time when
	// rolling is handled by the caller, else all together.
	phase := func(idx []int, f func(ctx context.Context, b *backend.Backend) error) {
		var wg sync.WaitGroup
		for _, i := range idx {
			if errs[i] != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(ctx, g.all[i])
			}()
		}
		wg.Wait()
	}
	for i, b := range g.all {
		if !b.Admitted() {
			errs[i] = ErrNotRunning
		}
	}
	run := func(idx []int) {
		for _, i := range idx {
			if errs[i] != nil {
				continue
			}
			starts[i] = time.Now()
			g.all[i].BeginUpdate()
		}
		phase(idx, func(ctx context.Context, b *backend.Backend) error { return b.Pause(ctx, opts.Abort) })
		phase(idx, func(ctx context.Context, b *backend.Backend) error {
			return b.LoadWeights(ctx, opts.Version, opts.Source)
		})
		// Resume even the backends whose update failed: a paused server
		// serves nobody. Use a fresh context so a caller that went away
		// does not leave backends paused.
		var wg sync.WaitGroup
		for _, i := range idx {
			if errs[i] == ErrNotRunning {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := g.all[i].Resume(rctx); err != nil && errs[i] == nil {
					errs[i] = err
				}
				g.all[i].EndUpdate(opts.Version, errs[i] == nil)
			}()
		}
		wg.Wait()
	}
	if opts.Rolling {
		for i := range g.all {
			run([]int{i})
		}
	} else {
		all := make([]int, len(g.all))
		for i := range all {
			all[i] = i
		}
		run(all)
	}
	ok, notRunning := 0, 0
	for i, b := range g.all {
		res.Backends[i] = BackendUpdate{Backend: b.ID(), Err: errs[i]}
		if !starts[i].IsZero() {
			res.Backends[i].Duration = time.Since(starts[i])
		}
		switch {
		case errs[i] == nil:
			ok++
		case errs[i] == ErrNotRunning:
			notRunning++
		default:
			g.log.Warn("backend weight update failed", zap.String("backend", b.ID()), zap.Int64("version", opts.Version), zap.Error(errs[i]))
		}
	}
	if ok == 0 && notRunning == len(g.all) {
		return res, fmt.Errorf("%w (version %d)", ErrNoneRunning, opts.Version)
	}
	if ok == 0 {
		return res, fmt.Errorf("%w (version %d)", ErrUpdateFailed, opts.Version)
	}
	g.version.Store(opts.Version)
	g.autoVersion = opts.Auto
	g.met.ModelVersion.Set(float64(opts.Version))
	res.At = time.Now()
	g.log.Info("weights updated", zap.Int64("version", opts.Version), zap.Int64("previous", prev), zap.Int("backends_ok", ok))
	return res, nil
}
