package modelgateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/checkpoint"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
)

// replicaOf is what expandLaunched keeps of a launched replica until its
// backend exists (and with it the resolved API key).
type replicaOf struct {
	id     string
	index  int
	cfg    launch.Config
	port   int
	openai bool
}

// expandLaunched turns each backend with a launch section into one backend
// per replica, "<id>-<i>", on a port of its range that nothing listens on.
func expandLaunched(bcs []BackendConfig, log *zap.Logger) ([]BackendConfig, []replicaOf, error) {
	var (
		out   []BackendConfig
		reps  []replicaOf
		taken = map[int]bool{}
	)
	for i, bc := range bcs {
		if bc.Launch == nil {
			out = append(out, bc)
			continue
		}
		lc := *bc.Launch
		lc.Defaults()
		lo, hi, err := launch.ParsePorts(lc.Ports)
		if err != nil {
			return nil, nil, fmt.Errorf("backends[%d].launch.ports: %w", i, err)
		}
		ports, skipped, err := launch.AllocatePorts(lc.Host, lo, hi, lc.Replicas, taken)
		if err != nil {
			return nil, nil, fmt.Errorf("backends[%d].launch.ports: %w", i, err)
		}
		if len(skipped) > 0 {
			log.Warn("launch ports in use, skipped", zap.String("backend", bc.ID), zap.Ints("ports", skipped))
		}
		for r, port := range ports {
			taken[port] = true
			rc := bc
			rc.Launch = nil
			rc.Managed = true
			rc.ID = fmt.Sprintf("%s-%d", bc.ID, r)
			rep := replicaOf{id: rc.ID, index: r, cfg: lc, port: port, openai: bc.Kind == KindOpenAI}
			rc.BaseURL = launch.Spec{Config: lc, Port: port}.BaseURL()
			out = append(out, rc)
			reps = append(reps, rep)
		}
	}
	return out, reps, nil
}

// startLaunched builds the launcher of the replicas, wired to their
// backends' routing gate and to the metrics, and starts it.
func (s *Service) startLaunched(reps []replicaOf, initialVersion int64) {
	if len(reps) == 0 {
		return
	}
	byID := map[string]int{}
	for i, b := range s.g.Backends() {
		byID[b.ID()] = i
	}
	specs := make([]launch.Spec, len(reps))
	for i, r := range reps {
		b := s.g.Backends()[byID[r.id]]
		specs[i] = launch.Spec{ID: r.id, Index: r.index, Name: b.Model(), OpenAI: r.openai, Port: r.port, APIKey: b.APIKey(), Config: r.cfg}
	}
	var l *launch.Launcher
	l = launch.New(specs, launch.Options{
		Clock: s.clk, Log: s.log,
		OnState: func(ev launch.Event) {
			b := s.g.Backends()[byID[ev.ID]]
			var st launch.Status
			for _, r := range l.Replicas() {
				if r.Status().ID == ev.ID {
					st = r.Status()
				}
			}
			b.SetReplica(st, ev.Version)
			for _, x := range launch.States {
				v := 0.0
				if x == ev.State {
					v = 1
				}
				s.met.ReplicaState.WithLabelValues(ev.ID, string(x)).Set(v)
			}
			if ev.State == launch.Backoff {
				s.met.ReplicaRestarts.WithLabelValues(ev.ID).Inc()
			}
		},
	})
	l.SetInitialVersion(initialVersion)
	s.launcher = l
	l.Start()
}

// updateWeights runs a weight update and, when it took, makes launched
// replicas (re)start on the new weights.
func (s *Service) updateWeights(ctx context.Context, opts gateway.UpdateOptions) (*gateway.UpdateResult, error) {
	res, err := s.g.UpdateWeights(ctx, opts)
	if err == nil && s.launcher != nil && opts.Source != "" {
		s.launcher.SetModel(opts.Source, opts.Version)
	}
	return res, err
}

// startWatcher watches the checkpoint directory, if configured.
func (s *Service) startWatcher(cfg *checkpoint.Config) {
	if cfg == nil {
		return
	}
	cc := *cfg
	cc.Defaults()
	w := checkpoint.New(cc, checkpoint.Options{
		Clock: s.clk, Log: s.log, Current: s.g.Version,
		Apply: func(ctx context.Context, path string, version int64) error {
			uctx, cancel := context.WithTimeout(ctx, s.limits.RequestTimeout)
			defer cancel()
			res, err := s.updateWeights(uctx, gateway.UpdateOptions{
				Version: version, Source: path, Rolling: cc.Strategy == "rolling", Auto: true,
			})
			switch {
			case errors.Is(err, gateway.ErrNoneRunning):
				return checkpoint.ErrRetry
			case err != nil:
				return err
			}
			for _, b := range res.Backends {
				if b.Err != nil && !errors.Is(b.Err, gateway.ErrNotRunning) {
					s.log.Warn("checkpoint refused by a backend; it keeps the previous version", zap.String("backend", b.Backend),
						zap.String("checkpoint", path), zap.Error(b.Err))
				}
			}
			return nil
		},
		OnResult: func(result string) { s.met.Checkpoints.WithLabelValues(result).Inc() },
	})
	s.watcher = w
	ctx, cancel := context.WithCancel(context.Background())
	s.watchStop = cancel
	s.watchDone = make(chan struct{})
	go func() {
		defer close(s.watchDone)
		w.Run(ctx)
	}()
}

// stopManaged stops the checkpoint watcher and the launched replicas.
func (s *Service) stopManaged() {
	if s.watchStop != nil {
		s.watchStop()
		<-s.watchDone
	}
	if s.launcher != nil {
		s.launcher.Stop()
	}
}

// WaitLaunched waits until every launched replica is ready, as the seeds'
// run_model.py waits for every model to load before rollouts start. It
// fails when a replica is marked failed (its crash loop and last log lines
// in the error), or when ctx ends first (naming the replicas still
// starting). Without launched backends it returns at once.
func (s *Service) WaitLaunched(ctx context.Context) error {
	if s.launcher == nil {
		return nil
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var waiting []string
		for _, r := range s.launcher.Replicas() {
			st := r.Status()
			switch st.State {
			case launch.Ready:
			case launch.Failed:
				return fmt.Errorf("model server %s failed: %s", st.ID, st.Detail)
			default:
				waiting = append(waiting, fmt.Sprintf("%s (%s, log %s)", st.ID, st.State, st.LogPath))
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("model servers not ready: %s: %w", strings.Join(waiting, ", "), ctx.Err())
		case <-t.C:
		}
	}
}
