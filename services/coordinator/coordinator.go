// Package coordinator builds the rolloutmesh coordinator service: it takes
// rollouts from training code, expands tasks into GRPO groups, dispatches
// episodes to runners over their Work streams (pull with credits), leases
// VMs for desktop episodes from vmmanager, and hands back whole finished
// groups in batches, with its state in SQLite (or PostgreSQL) so that a
// crash loses nothing acknowledged and reruns nothing finished.
//
// The cmd/coordinator binary and the all-in-one `rollout` CLI both build it
// with New; the CLI passes in-process client connections through Config.
package coordinator

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
	"google.golang.org/grpc/backoff"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/leasing"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/scheduler"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// Config configures the coordinator.
type Config struct {
	// VMManager, Storage and Gateway are gRPC addresses of the other
	// services; empty disables what needs them (desktop episodes,
	// include_trajectories, update_gateway).
	VMManager string
	Storage   string
	Gateway   string
	// PeerToken is sent as a bearer token to vmmanager, storage and the
	// gateway (their --auth-token).
	PeerToken string
	// PeerTLS, when its CA is set, dials vmmanager, storage and the gateway
	// over TLS (with a client certificate for peers that require one).
	PeerTLS tlscreds.Client
	// Database is a postgres:// DSN, a sqlite:<path>, or empty for SQLite
	// in the data directory.
	Database string

	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	LeaseTTL          time.Duration
	LeaseWait         time.Duration
	SweepInterval     time.Duration
	AckTimeout        time.Duration
	LeaseAhead        int
	AdoptGrace        time.Duration

	// Clients given directly (the all-in-one binary passes in-process
	// connections); they win over the addresses above.
	VMManagerClient pb.VMManagerClient
	StorageClient   pb.StorageClient
	GatewayClient   pb.ModelGatewayClient

	// TaskRoots are the directories RolloutSpec.task_source may name paths
	// in (--task-root, repeatable). Empty: the data directory's tasks/,
	// created at start.
	TaskRoots []string

	// Clock drives deadlines, heartbeats, renewals and ack timeouts; nil is
	// the wall clock.
	Clock scheduler.Clock
}

// RegisterFlags adds the coordinator's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.VMManager, "vmmanager", "", "vmmanager gRPC address (needed for desktop episodes)")
	fs.StringVar(&c.Storage, "storage", "", "storage gRPC address (needed for GetBatch include_trajectories)")
	fs.StringVar(&c.Gateway, "gateway", "", "modelgateway gRPC address (needed for UpdateModelVersion update_gateway)")
	fs.StringVar(&c.PeerToken, "peer-token", "", "bearer token sent to vmmanager, storage and the gateway")
	c.PeerTLS.RegisterFlags(fs, "peer-")
	fs.StringVar(&c.Database, "database", "", "postgres:// DSN, or sqlite:<path>; default SQLite coordinator.db under --data-dir")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "how often runners heartbeat")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", 20*time.Second, "a runner silent this long is dropped and its episodes requeued")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", time.Minute, "VM lease TTL (renewed every third of it while the runner heartbeats)")
	fs.DurationVar(&c.LeaseWait, "lease-wait", 30*time.Second, "how long to wait for a free VM before trying again later")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", 500*time.Millisecond, "how often deadlines, heartbeats, renewals and ack timeouts are checked")
	fs.DurationVar(&c.AckTimeout, "ack-timeout", 5*time.Minute, "default time a batch stays reserved before it is handed out again")
	fs.DurationVar(&c.AdoptGrace, "adopt-grace", 15*time.Second, "how long a runner whose stream broke has to reconnect and re-adopt its running episodes before they are requeued (negative: at once)")
	fs.Var((*rootList)(&c.TaskRoots), "task-root", "directory task_source paths must lie in (repeatable; a value may list several, separated by commas or colons, as ROLLOUTMESH_TASK_ROOT does); default tasks/ under --data-dir")
	fs.IntVar(&c.LeaseAhead, "lease-ahead", 2, "VMs leased ahead for the next queued desktop episodes while every runner slot is busy")
}

// rootList is the repeatable --task-root flag. One value may also name
// several roots separated by commas or colons: envflag sets a flag from its
// environment variable once, so ROLLOUTMESH_TASK_ROOT=/a,/b is how a
// container names two.
type rootList []string

func (l *rootList) String() string { return strings.Join(*l, ",") }

func (l *rootList) Set(v string) error {
	for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ':' }) {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// taskRoots opens the configured task roots, or the data directory's
// tasks/ (made if missing) when none is configured.
func taskRoots(dirs []string, dataDir string) (*tasksource.Roots, error) {
	if len(dirs) == 0 && dataDir != "" {
		def := filepath.Join(dataDir, "tasks")
		if err := os.MkdirAll(def, 0o750); err != nil {
			return nil, fmt.Errorf("task root: %w", err)
		}
		dirs = []string{def}
	}
	return tasksource.NewRoots(dirs)
}

// Service is the coordinator.
type Service struct {
	pb.UnimplementedCoordinatorServer

	log     *zap.Logger
	engine  *scheduler.Engine
	store   *state.Store
	storage pb.StorageClient
	gateway pb.ModelGatewayClient
	conns   []*grpc.ClientConn
	stop    context.CancelFunc
	swept   chan struct{}
	// updating holds the one UpdateModelVersion running (see there).
	updating chan struct{}
}

var (
	_ daemon.Service   = (*Service)(nil)
	_ daemon.Drainer   = (*Service)(nil)
	_ daemon.Validator = (*Service)(nil)
)

// New opens the database, restores its state (requeuing episodes that were
// running when the last coordinator died) and starts the scheduler.
func New(ctx context.Context, cfg Config, env daemon.Env) (*Service, error) {
	log := env.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Service{log: log, storage: cfg.StorageClient, gateway: cfg.GatewayClient, updating: make(chan struct{}, 1)}
	roots, err := taskRoots(cfg.TaskRoots, env.DataDir)
	if err != nil {
		return nil, err
	}
	log.Info("task roots", zap.Strings("dirs", roots.Dirs()))
	creds, err := cfg.PeerTLS.Credentials()
	if err != nil {
		return nil, fmt.Errorf("peer TLS: %w", err)
	}
	vm := cfg.VMManagerClient
	dial := func(addr string) (*grpc.ClientConn, error) {
		// A restarted peer should be found again within seconds, not after
		// gRPC's default reconnect backoff of up to two minutes.
		opts := []grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second}}),
			// Stored trajectories (GetBatch include_trajectories) can be
			// large; the servers allow 64 MiB messages.
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPeerMsg), grpc.MaxCallSendMsgSize(maxPeerMsg)),
		}
		opts = append(opts, grpcserver.PeerDialOptions()...)
		if cfg.PeerToken != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(cfg.PeerToken)))
		}
		cc, err := grpc.NewClient(addr, opts...)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		s.conns = append(s.conns, cc)
		return cc, nil
	}
	if vm == nil && cfg.VMManager != "" {
		cc, err := dial(cfg.VMManager)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		vm = pb.NewVMManagerClient(cc)
	}
	if s.storage == nil && cfg.Storage != "" {
		cc, err := dial(cfg.Storage)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		s.storage = pb.NewStorageClient(cc)
	}
	if s.gateway == nil && cfg.Gateway != "" {
		cc, err := dial(cfg.Gateway)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		s.gateway = pb.NewModelGatewayClient(cc)
	}
	store, err := state.Open(ctx, cfg.Database, env.DataDir)
	if err != nil {
		s.closeConns()
		return nil, err
	}
	s.store = store
	var reg prometheus.Registerer
	if env.Registry != nil {
		reg = env.Registry
	}
	m := scheduler.NewMetrics(reg)
	scfg := scheduler.Config{
		HeartbeatInterval: cfg.HeartbeatInterval,
		HeartbeatTimeout:  cfg.HeartbeatTimeout,
		DefaultAckTimeout: cfg.AckTimeout,
		LeaseAhead:        cfg.LeaseAhead,
		AdoptGrace:        cfg.AdoptGrace,
		TaskRoots:         roots,
		MaxBatchBytes:     maxPeerMsg,
	}
	var eng *scheduler.Engine
	if vm != nil {
		leases := leasing.New(vm, leasing.Config{TTL: cfg.LeaseTTL, Wait: cfg.LeaseWait})
		eng, err = scheduler.New(ctx, scfg, cfg.Clock, log, store, leases, m)
	} else {
		eng, err = scheduler.New(ctx, scfg, cfg.Clock, log, store, nil, m)
	}
	if err != nil {
		store.Close()
		s.closeConns()
		return nil, fmt.Errorf("restore state: %w", err)
	}
	s.engine = eng
	sweep := cfg.SweepInterval
	if sweep <= 0 {
		sweep = 500 * time.Millisecond
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.swept = make(chan struct{})
	go func() {
		defer close(s.swept)
		eng.Run(runCtx, sweep)
	}()
	return s, nil
}

// StoreStats reports database commits made and records written, for the
// benchmark: records per commit shows how well writes are group-committed.
func (s *Service) StoreStats() (commits, records int64) { return s.store.Stats() }

// Register adds the Coordinator service to a gRPC server.
func (s *Service) Register(g *grpc.Server) { pb.RegisterCoordinatorServer(g, s) }

// Drain stops dispatching, lets running episodes finish within ctx and then
// closes every Work stream with UNAVAILABLE so runners reconnect elsewhere.
func (s *Service) Drain(ctx context.Context) error {
	return s.engine.Drain(ctx)
}

// Close stops the scheduler and closes the database after the gRPC server
// stopped. Episodes still running stay RUNNING in the database and are
// requeued by the next start.
func (s *Service) Close(ctx context.Context) error {
	s.stop()
	<-s.swept
	s.engine.Close()
	err := s.store.Close()
	s.closeConns()
	return err
}

func (s *Service) closeConns() {
	for _, cc := range s.conns {
		cc.Close()
	}
	s.conns = nil
}

// ValidateRequest checks the required identifiers before a handler runs;
// the handlers check everything that needs state.
func (s *Service) ValidateRequest(method string, req any) error {
	var id string
	switch r := req.(type) {
	case *pb.StartRolloutRequest:
		if r.Spec == nil {
			return daemon.InvalidField("spec", "is required")
		}
		return nil
	case *pb.GetRolloutRequest:
		id = r.RolloutId
	case *pb.CancelRolloutRequest:
		id = r.RolloutId
	case *pb.AddTasksRequest:
		id = r.RolloutId
	case *pb.GetBatchRequest:
		id = r.RolloutId
	case *pb.AckBatchRequest:
		if r.BatchId == "" {
			return daemon.InvalidField("batch_id", "is required")
		}
		if len(r.BatchId) > 64 {
			return daemon.InvalidField("batch_id", "must be at most 64 bytes")
		}
		id = r.RolloutId
	case *pb.ListQueuedEpisodesRequest:
		// Optional: empty lists every rollout's episodes.
		if len(r.RolloutId) > 64 {
			return daemon.InvalidField("rollout_id", "must be at most 64 bytes")
		}
		return nil
	default:
		return nil
	}
	if id == "" {
		return daemon.InvalidField("rollout_id", "is required")
	}
	if len(id) > 64 {
		return daemon.InvalidField("rollout_id", "must be at most 64 bytes")
	}
	return nil
}

var errNoDependency = errors.New("dependency not configured")

// maxPeerMsg bounds messages to and from the other services.
const maxPeerMsg = 64 << 20

// bearer sends the peer token on every outbound call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the mesh runs plaintext inside its
// network unless --peer-tls-ca turns TLS on.
func (bearer) RequireTransportSecurity() bool { return false }
