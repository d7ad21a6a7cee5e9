// Package runner builds the rolloutmesh runner service: a replica that
// keeps a Coordinator.Work stream open, runs up to --slots episodes at once
// (the agent loop against desktop, math, py, rag and web environments),
// streams every step to storage, reports results, and serves the Runner
// API (GetStatus, ListEpisodes, CancelEpisode) for people. The all-in-one
// binary embeds it through NewWithConns.
package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/cli"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/dial"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/rag"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/episode"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/taskfile"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/work"
)

// Version is the runner's build version, reported in hello and status.
var Version = "dev"

// Config is the runner's configuration.
type Config struct {
	Coordinator string
	Gateway     string
	Storage     string
	// AuthToken is sent as a bearer token to the coordinator, gateway and
	// storage.
	AuthToken string
	// PeerTLS, when its CA is set, dials the coordinator, gateway and
	// storage over TLS.
	PeerTLS  tlscreds.Client
	Slots    int
	RunnerID string
	// Address is this replica's gRPC address as people reach it.
	Address       string
	EnvModes      string
	HistoryImages int
	CacheDir      string
	// Offline fails OSWorld downloads that are not in the download cache
	// (<cache-dir>/downloads) instead of fetching them.
	Offline bool
	// GoogleSettings is a folder of OSWorld's Google settings files
	// (googledrive/settings.yml and the credentials it names,
	// google/settings.json); empty refuses the tasks that need a Google
	// account.
	GoogleSettings string
	// SetupWindowTimeout bounds an OSWorld setup step that waits for a
	// window to appear (open); zero is osworld.DefaultWindowWait.
	SetupWindowTimeout time.Duration
	// EvalTimeout bounds an OSWorld task's evaluation (postconfig, getters,
	// metrics); zero is osworld.DefaultEvalTimeout.
	EvalTimeout time.Duration
	// ClientPassword fills {CLIENT_PASSWORD} when a lease carries none.
	ClientPassword string
	PyTimeout      time.Duration
	PyMemoryMB     int
	PyAllowNetwork bool
	RAGCorpus      string
	WebDocs        string
	WebSearchURL   string
	StorageBuffer  int
	// DefaultEpisodeTimeout applies when an assignment carries no deadline.
	DefaultEpisodeTimeout time.Duration
}

// RegisterFlags adds the runner's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.Coordinator, "coordinator", "127.0.0.1:50052", "coordinator gRPC address")
	fs.StringVar(&c.Gateway, "gateway", "127.0.0.1:50054", "modelgateway gRPC address")
	fs.StringVar(&c.Storage, "storage", "127.0.0.1:50055", "storage gRPC address; empty disables step streaming")
	fs.StringVar(&c.AuthToken, "peer-token", "", "bearer token sent to the coordinator, gateway and storage; prefer --peer-token-file or $ROLLOUTMESH_PEER_TOKEN, which ps does not show")
	c.PeerTLS.RegisterFlags(fs, "peer-")
	fs.IntVar(&c.Slots, "slots", 4, "episodes run at once (the seeds' max_env_num_per_worker)")
	fs.StringVar(&c.RunnerID, "runner-id", fmt.Sprintf("%s-%d", host, os.Getpid()), "stable id of this replica")
	fs.StringVar(&c.Address, "advertise-addr", "", "this replica's gRPC address as reported to the coordinator")
	fs.StringVar(&c.EnvModes, "env-modes", "", "comma-separated env modes this replica runs (desktop,math,py,rag,web); empty means all")
	fs.IntVar(&c.HistoryImages, "history-images", 3, "default number of recent screenshots sent as images")
	fs.StringVar(&c.CacheDir, "cache-dir", "", "host cache of OSWorld task files, and in <cache-dir>/downloads the download cache shared by runners; default <data-dir>/cache")
	fs.BoolVar(&c.Offline, "offline", false, "fail OSWorld downloads (download steps, cloud_file getters) that are not in the download cache, naming the URL, instead of fetching them")
	fs.StringVar(&c.GoogleSettings, "google-settings", "", "folder of OSWorld's Google settings (googledrive/settings.yml with its credentials, google/settings.json) for the googledrive and login steps and the googledrive_file getter; empty refuses those tasks")
	fs.DurationVar(&c.SetupWindowTimeout, "setup-window-timeout", osworld.DefaultWindowWait, "bound of an OSWorld setup step that waits for a window to appear (open, and activate_window while the program launched for it starts): past it an open step fails the episode with the file named, instead of waiting OSWorld's 1800 s")
	fs.DurationVar(&c.EvalTimeout, "eval-timeout", osworld.DefaultEvalTimeout, "bound of an OSWorld task's evaluation (postconfig, getters and metrics): past it the episode fails with reason evaluation instead of being scored")
	fs.StringVar(&c.ClientPassword, "client-password", "password", "guest password for {CLIENT_PASSWORD} when the lease has none")
	fs.DurationVar(&c.PyTimeout, "py-timeout", py.DefaultLimits.Timeout, "wall-clock limit of one local Python run")
	fs.IntVar(&c.PyMemoryMB, "py-memory-mb", int(py.DefaultLimits.MemoryBytes>>20), "address-space limit of one local Python run, MiB")
	fs.BoolVar(&c.PyAllowNetwork, "py-allow-network", false, "let local Python runs use the network (no network namespace)")
	fs.StringVar(&c.RAGCorpus, "rag-corpus", "", "rag corpus: a directory of .txt/.md files or a JSONL of {id,title,text}")
	fs.StringVar(&c.WebDocs, "web-docs", "", "web environment's local collection: JSONL of {url,title,text}")
	fs.StringVar(&c.WebSearchURL, "web-search-url", "", "web environment's HTTP search endpoint (GET ?q=, JSON [{title,url,snippet}])")
	fs.IntVar(&c.StorageBuffer, "storage-buffer", 64, "steps per episode that may wait for storage before new ones are dropped")
	fs.DurationVar(&c.DefaultEpisodeTimeout, "episode-timeout", time.Hour, "episode deadline when the assignment has none")
}

// Conns are the connections the runner talks over. Storage may be nil.
type Conns struct {
	Coordinator grpc.ClientConnInterface
	Gateway     grpc.ClientConnInterface
	Storage     grpc.ClientConnInterface
}

// Service is one runner replica.
type Service struct {
	rmv1.UnimplementedRunnerServer

	cfg     Config
	log     *zap.Logger
	loop    *work.Loop
	closers []func() error
	metrics *serviceMetrics
}

var _ rmv1.RunnerServer = (*Service)(nil)

// New dials the coordinator, gateway and storage and starts the Work loop.
func New(ctx context.Context, cfg Config, denv daemon.Env) (*Service, error) {
	var conns Conns
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	creds, err := cfg.PeerTLS.Credentials()
	if err != nil {
		return nil, fmt.Errorf("peer TLS: %w", err)
	}
	for _, t := range []struct {
		addr string
		dst  *grpc.ClientConnInterface
		name string
	}{{cfg.Coordinator, &conns.Coordinator, "coordinator"}, {cfg.Gateway, &conns.Gateway, "gateway"}, {cfg.Storage, &conns.Storage, "storage"}} {
		if t.addr == "" {
			if t.name == "storage" {
				continue
			}
			closeAll()
			return nil, fmt.Errorf("--%s is required", t.name)
		}
		cc, err := dial.ConnWith(t.addr, cfg.AuthToken, creds)
		if err != nil {
			closeAll()
			return nil, err
		}
		closers = append(closers, cc.Close)
		*t.dst = cc
	}
	s, err := NewWithConns(ctx, cfg, denv, conns)
	if err != nil {
		closeAll()
		return nil, err
	}
	s.closers = closers
	return s, nil
}

// NewWithConns starts a runner over given connections (the all-in-one
// binary passes in-process ones).
func NewWithConns(ctx context.Context, cfg Config, denv daemon.Env, conns Conns) (*Service, error) {
	if conns.Coordinator == nil || conns.Gateway == nil {
		return nil, fmt.Errorf("runner needs coordinator and gateway connections")
	}
	// Zero values take the flag defaults, so code that builds a Config
	// (the all-in-one binary) only sets what it cares about.
	if cfg.Slots == 0 {
		cfg.Slots = 4
	}
	if cfg.Slots < 1 || cfg.Slots > 1024 {
		return nil, fmt.Errorf("--slots must be 1..1024, got %d", cfg.Slots)
	}
	if cfg.DefaultEpisodeTimeout <= 0 {
		cfg.DefaultEpisodeTimeout = time.Hour
	}
	if cfg.HistoryImages <= 0 {
		cfg.HistoryImages = 3
	}
	if cfg.RunnerID == "" {
		host, _ := os.Hostname()
		cfg.RunnerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	log := denv.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = "cache"
		if denv.DataDir != "" {
			cfg.CacheDir = denv.DataDir + "/cache"
		}
	}
	if cfg.Address == "" {
		cfg.Address = denv.GRPCAddr
	}
	opts, err := cfg.episodeOptions()
	if err != nil {
		return nil, err
	}
	m := newServiceMetrics(denv.Registry)
	ex := &executor{
		runnerID: cfg.RunnerID,
		deps:     episode.Deps{Chat: rmv1.NewModelGatewayClient(conns.Gateway), Clock: clock.Real{}, Log: log},
		opts:     opts, log: log, defaultTimeout: cfg.DefaultEpisodeTimeout, metrics: m,
	}
	if conns.Storage != nil {
		ex.deps.Storage = rmv1.NewStorageClient(conns.Storage)
	}
	var modes []string
	for _, m := range strings.Split(cfg.EnvModes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, env.CanonicalMode(m))
		}
	}
	loop := work.New(rmv1.NewCoordinatorClient(conns.Coordinator), work.Config{
		RunnerID: cfg.RunnerID, Slots: cfg.Slots, EnvModes: modes, Address: cfg.Address, Version: Version,
	}, ex.run, clock.Real{}, log)
	loop.Start(ctx)
	return &Service{cfg: cfg, log: log, loop: loop, metrics: m}, nil
}

func (c Config) episodeOptions() (episode.Options, error) {
	lim := py.DefaultLimits
	if c.PyTimeout > 0 {
		lim.Timeout = c.PyTimeout
	}
	if c.PyMemoryMB > 0 {
		lim.MemoryBytes = int64(c.PyMemoryMB) << 20
	}
	lim.AllowNetwork = c.PyAllowNetwork
	o := episode.Options{CacheDir: c.CacheDir, ClientPassword: c.ClientPassword, PyLimits: lim, WindowWait: c.SetupWindowTimeout, EvalTimeout: c.EvalTimeout,
		HistoryImages: c.HistoryImages, WebSearchURL: c.WebSearchURL, StorageBuffer: c.StorageBuffer,
		// One store for every slot's episodes; runners given the same
		// --cache-dir share it too.
		Downloads: &dlcache.Cache{Dir: filepath.Join(c.CacheDir, "downloads"), Offline: c.Offline}}
	var err error
	if c.GoogleSettings != "" {
		if o.Google, err = osworld.LoadGoogleSettings(c.GoogleSettings); err != nil {
			return o, fmt.Errorf("--google-settings: %w", err)
		}
	}
	if c.RAGCorpus != "" {
		if o.RAG, err = rag.Load(c.RAGCorpus); err != nil {
			return o, err
		}
	}
	if c.WebDocs != "" {
		if o.WebDocs, err = rag.Load(c.WebDocs); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Register adds the Runner API.
func (s *Service) Register(g *grpc.Server) { rmv1.RegisterRunnerServer(g, s) }

// Drain stops taking work and finishes or hands back running episodes.
func (s *Service) Drain(ctx context.Context) error { return s.loop.Drain(ctx) }

// Close stops the Work loop and closes the connections it dialled.
func (s *Service) Close(context.Context) error {
	s.loop.Stop()
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// maxEpisodeIDBytes bounds an episode id in a request; the coordinator's
// ids are far shorter.
const maxEpisodeIDBytes = 256

// ValidateRequest checks requests at the boundary.
func (s *Service) ValidateRequest(method string, req any) error {
	if r, ok := req.(*rmv1.CancelEpisodeRequest); ok {
		if r.GetEpisodeId() == "" {
			return daemon.InvalidField("episode_id", "is required")
		}
		if len(r.GetEpisodeId()) > maxEpisodeIDBytes {
			return daemon.InvalidField("episode_id", "must be at most %d bytes", maxEpisodeIDBytes)
		}
		if len(r.GetReason()) > 1024 {
			return daemon.InvalidField("reason", "must be at most 1024 bytes")
		}
	}
	return nil
}

// GetStatus shows the replica.
func (s *Service) GetStatus(context.Context, *rmv1.GetStatusRequest) (*rmv1.GetStatusResponse, error) {
	st := s.loop.Status()
	return &rmv1.GetStatusResponse{
		RunnerId: st.RunnerID, Slots: int32(st.Slots), Busy: int32(st.Busy), Coordinator: s.cfg.Coordinator,
		Connected: st.Connected, Draining: st.Draining, StartTime: timestamppb.New(st.StartTime),
		EpisodesFinished: st.Finished, EpisodesFailed: st.Failed, Reconnects: st.Reconnects, Version: st.Version,
	}, nil
}

// ListEpisodes lists running episodes.
func (s *Service) ListEpisodes(context.Context, *rmv1.ListRunnerEpisodesRequest) (*rmv1.ListRunnerEpisodesResponse, error) {
	return &rmv1.ListRunnerEpisodesResponse{Episodes: s.loop.Episodes()}, nil
}

// CancelEpisode stops one episode; it is reported ABORTED.
func (s *Service) CancelEpisode(_ context.Context, r *rmv1.CancelEpisodeRequest) (*rmv1.CancelEpisodeResponse, error) {
	reason := r.GetReason()
	if reason == "" {
		reason = "operator"
	}
	if err := s.loop.Cancel(r.GetEpisodeId(), reason); err != nil {
		if errors.Is(err, work.ErrNotRunning) {
			return nil, status.Errorf(codes.NotFound, "episode %s is not running on this runner", r.GetEpisodeId())
		}
		return nil, status.Error(codes.Internal, "cancel failed")
	}
	return &rmv1.CancelEpisodeResponse{}, nil
}

// executor runs assignments for the Work loop.
type executor struct {
	runnerID       string
	deps           episode.Deps
	opts           episode.Options
	log            *zap.Logger
	defaultTimeout time.Duration
	metrics        *serviceMetrics
}

func (x *executor) run(ctx context.Context, a *rmv1.Assignment, progress func(string, int)) *rmv1.Episode {
	if a.GetDeadline() == nil && x.defaultTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.defaultTimeout)
		defer cancel()
	}
	x.metrics.started()
	ep := a.GetEpisode()
	task, err := taskfile.FromProto(a.GetTask(), a.GetAgent().GetEvaluationMetric())
	if err != nil {
		out := cloneEpisode(ep)
		out.Status = rmv1.EpisodeStatus_EPISODE_STATUS_FAILED
		out.FailureReason = "bad_task"
		out.Error = err.Error()
		x.metrics.finished(out)
		return out
	}
	ep = cloneEpisode(ep)
	ep.RunnerId = x.runnerID
	spec := episode.Spec{Episode: ep, Task: task, Agent: a.GetAgent(), Progress: progress}
	if l := a.GetLease(); l != nil {
		spec.Guest = l.GetEndpoint()
		spec.GuestToken = l.GetGuestToken()
		spec.GuestPorts = l.GetPorts()
		spec.ClientPassword = l.GetClientPassword()
		if l.GetScreenWidth() > 0 {
			spec.Screen = action.Screen{Width: int(l.GetScreenWidth()), Height: int(l.GetScreenHeight())}
		}
		if ep.GetVmId() == "" {
			ep.VmId = l.GetVmId()
		}
	}
	res := episode.Run(ctx, x.deps, x.opts, spec)
	if res.StorageErr != nil && res.Episode.GetStatus() == rmv1.EpisodeStatus_EPISODE_STATUS_DONE {
		// A DONE the coordinator counts must be in storage: an episode whose
		// trajectory storage did not acknowledge is failed, so the
		// coordinator runs it again (attempt+1) instead of losing it.
		res.Episode.Status = rmv1.EpisodeStatus_EPISODE_STATUS_FAILED
		res.Episode.FailureReason = "storage_unacked"
		res.Episode.Error = res.StorageErr.Error()
	}
	x.metrics.finished(res.Episode)
	return res.Episode
}

// serviceMetrics are the runner's Prometheus metrics.
type serviceMetrics struct {
	running  prometheus.Gauge
	episodes *prometheus.CounterVec
	steps    prometheus.Counter
}

func newServiceMetrics(reg *prometheus.Registry) *serviceMetrics {
	m := &serviceMetrics{
		running:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "rolloutmesh_runner_episodes_running", Help: "Episodes running now."}),
		episodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rolloutmesh_runner_episodes_total", Help: "Finished episodes by status."}, []string{"status"}),
		steps:    prometheus.NewCounter(prometheus.CounterOpts{Name: "rolloutmesh_runner_steps_total", Help: "Steps of finished episodes."}),
	}
	if reg != nil {
		reg.MustRegister(m.running, m.episodes, m.steps)
	}
	return m
}

func (m *serviceMetrics) started() { m.running.Inc() }

func (m *serviceMetrics) finished(ep *rmv1.Episode) {
	m.running.Dec()
	m.episodes.WithLabelValues(strings.TrimPrefix(ep.GetStatus().String(), "EPISODE_STATUS_")).Inc()
	m.steps.Add(float64(ep.GetNumSteps()))
}

func cloneEpisode(ep *rmv1.Episode) *rmv1.Episode {
	if ep == nil {
		return &rmv1.Episode{}
	}
	return proto.Clone(ep).(*rmv1.Episode)
}

// Commands are the runner binary's subcommands: `episode` runs one task
// without a coordinator, `parse` shows what an action space makes of one
// model answer read from stdin.
func Commands() map[string]daemon.Command {
	return map[string]daemon.Command{
		"episode": func(ctx context.Context, args []string) error {
			return cli.Episode(ctx, args, os.Stdout, os.Stderr)
		},
		"parse": func(ctx context.Context, args []string) error {
			return cli.Parse(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		},
	}
}
