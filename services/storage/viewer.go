package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/api"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/ui"
)

// newHTTPHandler serves the trajectory viewer under /ui/ (and sends / there).
// reg, when set, receives the viewer's metrics.
func newHTTPHandler(a *api.Server, idx *index.DB, token string, reg prometheus.Registerer, log *zap.Logger) (http.Handler, error) {
	v, err := ui.New(ui.Options{Reads: a, Index: idx, AuthToken: token, Registerer: reg, Logger: log.Named("ui")})
	if err != nil {
		return nil, fmt.Errorf("viewer: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", v)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	return mux, nil
}

// HTTPHandler serves the trajectory viewer under /ui/ on the service's HTTP
// address, beside /metrics and /healthz. It requires the service's bearer
// token (daemon.Env.AuthToken) when one is set.
func (s *Service) HTTPHandler() http.Handler { return s.http }

// Viewer is the trajectory viewer over a storage data directory or index
// and blob store, read-only: `rollout view` serves it after an embedded
// run has stopped. It writes nothing (no pack is started, nothing is
// reclaimed), so it may run beside the service that owns the data.
type Viewer struct {
	idx     *index.DB
	handler http.Handler
}

// OpenViewer opens cfg's index and blobs (the defaults under dataDir) for
// the viewer. token, when set, is required by the pages.
func OpenViewer(ctx context.Context, cfg Config, dataDir, token string, log *zap.Logger) (*Viewer, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Index == "" {
		if dataDir == "" {
			return nil, errors.New("--index or --data-dir is required")
		}
		cfg.Index = filepath.Join(dataDir, "index.db")
	}
	blobs, err := openBlobs(ctx, cfg, dataDir)
	if err != nil {
		return nil, err
	}
	idx, err := openIndex(ctx, cfg.Index)
	if err != nil {
		return nil, err
	}
	if cfg.SuccessThreshold <= 0 {
		cfg.SuccessThreshold = 1.0
	}
	a := api.New(idx, blobs, nil, api.Options{SuccessThreshold: cfg.SuccessThreshold, MaxInlineBytes: cfg.MaxInlineBytes, Logger: log})
	h, err := newHTTPHandler(a, idx, token, nil, log)
	if err != nil {
		idx.Close()
		return nil, err
	}
	return &Viewer{idx: idx, handler: h}, nil
}

// Handler serves the viewer under /ui/.
func (v *Viewer) Handler() http.Handler { return v.handler }

// Close closes the index.
func (v *Viewer) Close() error { return v.idx.Close() }

// registerer is reg as a Registerer, nil (not a nil pointer in an
// interface) when the service has no registry.
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}
