// Package vmmanager builds the vmmanager service: pools of M VMs (process,
// docker, static, vmware, virtualbox providers) handed out as leases with a
// token and a TTL, persisted in SQLite under the data directory so that a
// restarted vmmanager keeps its VMs and live leases.
//
// cmd/vmmanager runs it alone; the all-in-one `rollout` binary builds it with
// New and pools given in Config.Pools instead of a file.
package vmmanager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Pool spec types, re-exported so that callers outside this module (the
// all-in-one CLI) can build pools without a config file.
type (
	// PoolSpec is one pool: name, provider, size, warm spares and settings.
	PoolSpec = config.Pool
	// ProcessSpec configures the process provider.
	ProcessSpec = config.Process
	// DockerSpec configures the docker provider.
	DockerSpec = config.Docker
	// StaticSpec configures the static provider.
	StaticSpec = config.Static
	// VMwareSpec configures the vmware provider.
	VMwareSpec = config.VMware
	// VirtualBoxSpec configures the virtualbox provider.
	VirtualBoxSpec = config.VirtualBox
	// QEMUSpec configures the qemu provider.
	QEMUSpec = config.QEMU
	// Duration is a duration in YAML ("30s").
	Duration = config.Duration
)

// Config is the service's configuration.
type Config struct {
	// ConfigFile is the YAML pool config (--config).
	ConfigFile string
	// Pools are used when ConfigFile is empty (the all-in-one CLI).
	Pools []PoolSpec
	// KeepVMsOnExit leaves VMs and leases running on shutdown for the next
	// start to re-adopt, instead of stopping every VM.
	KeepVMsOnExit bool

	// clk replaces the wall clock in tests.
	clk clock.Clock
}

// RegisterFlags adds vmmanager's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file with the pools (see examples/vmmanager.process.yaml)")
	fs.BoolVar(&c.KeepVMsOnExit, "keep-vms-on-exit", false, "on shutdown keep VMs and leases for the next start to re-adopt, instead of stopping every VM")
}

// LoadConfigFile reads and validates a pool config file.
func LoadConfigFile(path string) ([]PoolSpec, error) {
	// A FIFO or a device passes for a file of size 0 and may never end.
	data, err := boundedread.ReadFile(path, config.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	pools, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return pools, nil
}

// Service is the running vmmanager.
type Service struct {
	rolloutmeshv1.UnimplementedVMManagerServer

	log   *zap.Logger
	store *store.Store
	hub   *pool.Hub
	pools []*pool.Pool // config order
	byNm  map[string]*pool.Pool
	keep  bool
	// envOK lists by pool the env_config overrides its provider applies.
	envOK map[string][]string

	mu      sync.Mutex
	drained bool
	watches map[*pool.Subscription]struct{}
}

var (
	_ daemon.Service   = (*Service)(nil)
	_ daemon.Drainer   = (*Service)(nil)
	_ daemon.Validator = (*Service)(nil)
)

// New opens the store, builds every pool's provider, re-adopts what a
// previous run left (VMs, live leases), destroys strays and starts
// provisioning. ctx bounds start-up only.
func New(ctx context.Context, cfg Config, env daemon.Env) (*Service, error) {
	specs := cfg.Pools
	if cfg.ConfigFile != "" {
		var err error
		if specs, err = LoadConfigFile(cfg.ConfigFile); err != nil {
			return nil, err
		}
	} else {
		if len(specs) == 0 {
			// Started without a config (e.g. to inspect the API): it serves,
			// and every AcquireLease answers NotFound for the unknown pool.
			env.Logger.Warn("no pools configured; give --config FILE")
		}
		specs = append([]PoolSpec(nil), specs...)
		if len(specs) > 0 {
			if err := config.Validate(specs); err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
		}
	}
	if env.DataDir == "" {
		return nil, errors.New("vmmanager needs a data directory")
	}
	clk := cfg.clk
	if clk == nil {
		clk = clock.Real{}
	}
	st, err := store.Open(ctx, env.DataDir)
	if err != nil {
		return nil, err
	}
	metrics, err := pool.NewMetrics(env.Registry)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	s := &Service{
		log: env.Logger, store: st, hub: pool.NewHub(), byNm: map[string]*pool.Pool{},
		keep: cfg.KeepVMsOnExit, envOK: map[string][]string{}, watches: map[*pool.Subscription]struct{}{},
	}
	for i, spec := range specs {
		prov, err := buildProvider(ctx, fmt.Sprintf("pools[%d]", i), spec, providerEnv{
			dir: filepath.Join(env.DataDir, "vms", spec.Name), instanceID: st.InstanceID(), log: env.Logger,
			pools: poolNames(specs),
		})
		if err != nil {
			s.abort()
			return nil, err
		}
		p := pool.New(pool.Spec{
			Name: spec.Name, Provider: spec.Provider, Size: spec.Size, WarmSpares: spec.WarmSpares,
			OSType: spec.OSType, ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight,
			ClientPassword: spec.ClientPassword, GuestToken: guestToken(spec),
			HealthInterval: durationOrOff(spec.HealthInterval), BootTimeout: durationOf(spec.BootTimeout),
			ResetTimeout: durationOf(spec.ResetTimeout),
		}, pool.Options{Provider: prov, Store: st, Clock: clk, Logger: env.Logger, Metrics: metrics, Hub: s.hub})
		vms, err := st.VMs(ctx, spec.Name)
		if err != nil {
			s.abort()
			return nil, err
		}
		leases, err := st.Leases(ctx, spec.Name)
		if err != nil {
			s.abort()
			return nil, err
		}
		s.pools = append(s.pools, p)
		s.byNm[spec.Name] = p
		s.envOK[spec.Name] = envSupported(spec)
		if err := p.Restore(ctx, vms, leases); err != nil {
			s.abort()
			return nil, fmt.Errorf("restore pool %s: %w", spec.Name, err)
		}
	}
	if names, err := st.Pools(ctx); err == nil {
		for _, n := range names {
			if s.byNm[n] == nil {
				env.Logger.Warn("stored vms of a pool no longer configured are left alone", zap.String("pool", n))
			}
		}
	}
	for _, p := range s.pools {
		p.Start()
	}
	return s, nil
}

// abort undoes a failed New: VMs adopted so far are kept for the next start.
func (s *Service) abort() {
	for _, p := range s.pools {
		p.Close(context.Background(), true)
	}
	s.store.Close()
}

func guestToken(spec PoolSpec) string {
	switch {
	case spec.Process != nil:
		return spec.Process.GuestToken
	case spec.Docker != nil:
		return spec.Docker.GuestToken
	case spec.Static != nil:
		return spec.Static.GuestToken
	case spec.Kubernetes != nil:
		return spec.Kubernetes.GuestToken
	case spec.QEMU != nil:
		return spec.QEMU.GuestToken
	}
	return ""
}

func poolNames(specs []PoolSpec) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// Register adds the VMManager gRPC service.
func (s *Service) Register(g *grpc.Server) {
	rolloutmeshv1.RegisterVMManagerServer(g, s)
}

// Drain ends WatchPool streams and sends AcquireLease waiters away
// (Unavailable) so that the graceful stop is not held up by callers that
// would otherwise wait for minutes.
func (s *Service) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.drained = true
	subs := s.watches
	s.watches = map[*pool.Subscription]struct{}{}
	s.mu.Unlock()
	for sub := range subs {
		sub.Cancel()
	}
	for _, p := range s.pools {
		p.Drain()
	}
	return nil
}

// Close stops every pool (destroying its VMs unless KeepVMsOnExit) and
// closes the store.
func (s *Service) Close(ctx context.Context) error {
	s.Drain(ctx)
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range s.pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Close(ctx, s.keep); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("close pool %s: %w", p.Name(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	return errors.Join(errs...)
}
