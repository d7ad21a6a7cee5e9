// Package storage builds the rolloutmesh storage service: trajectories,
// steps and blobs (screenshots, recordings), exports for training and in
// OSWorld's layout, statistics and retention. The index lives in SQLite (the
// default, under --data-dir) or PostgreSQL; blobs live in files under
// --data-dir (the default) or in an S3-compatible bucket. A step is
// acknowledged only once its database commit and its blobs are durable.
package storage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/api"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/ingest"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// Config is the storage service's own configuration.
type Config struct {
	// Index is an SQLite file path or a postgres:// DSN; empty means
	// <data-dir>/index.db.
	Index string
	// Blobs is a directory or s3://bucket/prefix; empty means
	// <data-dir>/blobs.
	Blobs string
	// S3Endpoint and S3Region locate an S3-compatible server. Credentials
	// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	S3Endpoint, S3Region string
	// MaxBlobBytes bounds one blob; MaxStepBytes bounds a step or episode
	// header without blob data.
	MaxBlobBytes int64
	MaxStepBytes int
	// BatchSteps is how many steps a stream gathers before it commits.
	BatchSteps int
	// MaxInlineBytes bounds GetEpisode's inline blob data.
	MaxInlineBytes int64
	// SuccessThreshold is the score at or above which a finished episode
	// counts as a success in GetStats; 0 means 1.0.
	SuccessThreshold float64
}

// RegisterFlags adds the storage flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	def := ingest.DefaultLimits()
	fs.StringVar(&c.Index, "index", "", "index database: an SQLite file path or a postgres:// DSN (default <data-dir>/index.db)")
	fs.StringVar(&c.Blobs, "blobs", "", "blob store: a directory or s3://bucket/prefix (default <data-dir>/blobs)")
	fs.StringVar(&c.S3Endpoint, "s3-endpoint", "", "S3-compatible endpoint URL for s3:// blobs, e.g. http://127.0.0.1:7070 (empty: AWS)")
	fs.StringVar(&c.S3Region, "s3-region", "us-east-1", "S3 region")
	fs.Int64Var(&c.MaxBlobBytes, "max-blob-bytes", 32<<20, "largest accepted blob (screenshot, tree, recording) in bytes")
	fs.IntVar(&c.MaxStepBytes, "max-step-bytes", def.MaxStepBytes, "largest accepted step or episode header without blob data, in bytes")
	fs.IntVar(&c.BatchSteps, "batch-steps", def.BatchSteps, "steps a stream gathers before committing them")
	fs.Int64Var(&c.MaxInlineBytes, "max-inline-bytes", 32<<20, "largest total of blob data GetEpisode returns inline")
	fs.Float64Var(&c.SuccessThreshold, "success-threshold", 1.0, "score at or above which a finished episode counts as a success")
}

// Service is the running storage service.
type Service struct {
	idx    *index.DB
	writer *ingest.Writer
	api    *api.Server
	http   http.Handler
	cancel context.CancelFunc
	done   chan struct{}
}

var (
	_ daemon.Service   = (*Service)(nil)
	_ daemon.Validator = (*Service)(nil)
)

// New opens the index and the blob store and builds the service.
func New(ctx context.Context, cfg Config, env daemon.Env) (*Service, error) {
	log := env.Logger
	if log == nil {
		log = zap.NewNop()
	}
	indexDSN := cfg.Index
	if indexDSN == "" {
		if env.DataDir == "" {
			return nil, errors.New("--index or --data-dir is required")
		}
		indexDSN = filepath.Join(env.DataDir, "index.db")
	}
	blobs, err := openBlobs(ctx, cfg, env.DataDir)
	if err != nil {
		return nil, err
	}
	idx, err := openIndex(ctx, indexDSN)
	if err != nil {
		return nil, err
	}
	var obs ingest.Observer
	var readObs api.Observer
	if env.Registry != nil {
		m, err := newMetrics(env.Registry)
		if err != nil {
			idx.Close()
			return nil, err
		}
		obs, readObs = m, m
	}
	// The pack store is this process's alone, so a filter of the digests
	// stored spares the index a lookup per new blob; a bucket may be
	// written by another replica too.
	_, ownBlobs := blobs.(*blobstore.Files)
	w := ingest.New(idx, blobs, ingest.Options{
		Limits: ingest.Limits{MaxBlobBytes: cfg.MaxBlobBytes, MaxStepBytes: cfg.MaxStepBytes, BatchSteps: cfg.BatchSteps},
		Logger: log, Observer: obs, FilterDigests: ownBlobs,
	})
	// The committer outlives the start context, which ends on SIGTERM
	// before the drain: Close stops it once the server has stopped.
	if cfg.SuccessThreshold <= 0 {
		cfg.SuccessThreshold = 1.0
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Service{idx: idx, writer: w, cancel: cancel, done: make(chan struct{}),
		api: api.New(idx, blobs, w, api.Options{SuccessThreshold: cfg.SuccessThreshold, MaxInlineBytes: cfg.MaxInlineBytes,
			Logger: log, Observer: readObs})}
	if s.http, err = newHTTPHandler(s.api, idx, env.AuthToken, registerer(env.Registry), log); err != nil {
		cancel()
		idx.Close()
		return nil, err
	}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		w.Run(runCtx)
	}()
	if files, ok := blobs.(*blobstore.Files); ok {
		bg.Add(1)
		go func() {
			defer bg.Done()
			checkAndReclaim(runCtx, log, idx, files)
		}()
	}
	go func() {
		bg.Wait()
		close(s.done)
	}()
	log.Info("storage opened", zap.String("index_backend", idx.Backend()), zap.Int("schema_version", index.SchemaVersion()),
		zap.String("blob_backend", blobBackend(cfg)))
	return s, nil
}

// checkAndReclaim looks for damaged packs, then gives back the space
// earlier processes left that no blob uses, without holding up the start.
//
// Damage found here is logged, naming each pack, and the service keeps
// serving rather than refusing to start: one bad pack must not stop the
// ingest of new steps (they go to a new pack) nor the reads of the
// undamaged blobs, and the read path verifies every blob, so a damaged one
// is refused (DataLoss), never served. `storage fsck` reads every blob to
// find the rest. Reclaim is skipped when damage is found: an index and
// packs that disagree are evidence to keep, and punching out what the
// index does not name could destroy blobs a restored index still needs.
func checkAndReclaim(ctx context.Context, log *zap.Logger, idx *index.DB, files *blobstore.Files) {
	each := func(fn func(string, int64) error) error { return idx.EachBlobLocation(ctx, fn) }
	problems, err := files.CheckPacks(ctx, each)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("check packs failed", zap.Error(err))
		}
		return
	}
	for _, p := range problems {
		log.Error("damaged pack file; its blobs will be refused with DataLoss, run storage fsck",
			zap.String("pack", p.Path), zap.String("location", p.Pack), zap.String("problem", p.Problem), zap.Int("blobs", p.Blobs))
	}
	if len(problems) > 0 {
		log.Error("not reclaiming unused pack space while packs are damaged", zap.Int("damaged_packs", len(problems)))
		return
	}
	freed, err := files.Reclaim(ctx, each)
	if err != nil && ctx.Err() == nil {
		log.Warn("reclaim unused pack space failed", zap.Int64("bytes_freed", freed), zap.Error(err))
		return
	}
	log.Info("reclaimed unused pack space", zap.Int64("bytes_freed", freed))
}

// openIndex opens the index. An SQLite path must be a regular file if it
// exists: the driver answers a FIFO or a device with an opaque "disk I/O
// error". Errors name the SQLite file, never a PostgreSQL DSN, which holds
// a password.
func openIndex(ctx context.Context, dsn string) (*index.DB, error) {
	name := "postgresql index"
	if !index.IsPostgresDSN(dsn) {
		name = "index " + dsn
		if st, err := os.Stat(dsn); err == nil {
			if err := boundedread.CheckMode(dsn, st.Mode(), false); err != nil {
				return nil, fmt.Errorf("open index: %w", err)
			}
		}
	}
	idx, err := index.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return idx, nil
}

type blobStore interface {
	ingest.Blobs
	api.Blobs
}

func openBlobs(ctx context.Context, cfg Config, dataDir string) (blobStore, error) {
	if strings.HasPrefix(cfg.Blobs, "s3://") {
		st, err := blobstore.NewS3(ctx, blobstore.S3Config{URL: cfg.Blobs, Endpoint: cfg.S3Endpoint, Region: cfg.S3Region,
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY")})
		if err != nil {
			return nil, fmt.Errorf("open s3 blobs: %w", err)
		}
		return st, nil
	}
	dir := cfg.Blobs
	if dir == "" {
		if dataDir == "" {
			return nil, errors.New("--blobs or --data-dir is required")
		}
		dir = filepath.Join(dataDir, "blobs")
	}
	st, err := blobstore.NewFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("open file blobs: %w", err)
	}
	return st, nil
}

func blobBackend(cfg Config) string {
	if strings.HasPrefix(cfg.Blobs, "s3://") {
		return "s3"
	}
	return "files"
}

// Register adds the Storage gRPC service.
func (s *Service) Register(g *grpc.Server) { s.api.Register(g) }

// ValidateRequest checks unary and server-streaming requests before their
// handlers run.
func (s *Service) ValidateRequest(_ string, req any) error {
	if err := api.Validate(req); err != nil {
		if fe, ok := validate.AsFieldError(err); ok {
			return daemon.InvalidField(fe.Field, "%s", fe.Reason)
		}
		return err
	}
	return nil
}

// Close stops the committer and closes the index. The gRPC server has
// stopped, so no stream is waiting on a commit.
func (s *Service) Close(ctx context.Context) error {
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.idx.Close()
}
