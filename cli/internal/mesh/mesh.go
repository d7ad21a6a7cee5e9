// Package mesh runs all five rolloutmesh services in one process: the
// embedded default behind `rollout run` and `rollout up`. Each service gets
// its own loopback (or standard) gRPC port and talks to the others over real
// gRPC, exactly as in a distributed deployment; data lives under one
// directory (SQLite indexes, blob files, VM homes).
package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"
)

// Service names, in start order.
const (
	Storage      = "storage"
	ModelGateway = "modelgateway"
	VMManager    = "vmmanager"
	Coordinator  = "coordinator"
	Runner       = "runner"
)

// StandardAddrs are the default ports of a deployment (gRPC, HTTP).
var StandardAddrs = map[string][2]string{
	VMManager:    {":50051", ":9101"},
	Coordinator:  {":50052", ":9102"},
	Runner:       {":50053", ":9103"},
	ModelGateway: {":50054", ":9104"},
	Storage:      {":50055", ":9105"},
}

// WithHost returns addrs with every address's host set to host, so that a
// daemon can listen on loopback by default and on every interface only when
// asked ("0.0.0.0" or "").
func WithHost(addrs map[string][2]string, host string) (map[string][2]string, error) {
	return rewrite(addrs, func(_, port string) (string, error) { return net.JoinHostPort(host, port), nil })
}

// OffsetAddrs returns addrs with every port moved up by offset.
func OffsetAddrs(addrs map[string][2]string, offset int) (map[string][2]string, error) {
	return rewrite(addrs, func(host, port string) (string, error) {
		n, err := strconv.Atoi(port)
		if err != nil || n+offset <= 0 || n+offset > 65535 {
			return "", fmt.Errorf("port offset %d: port %q out of range", offset, port)
		}
		return net.JoinHostPort(host, strconv.Itoa(n+offset)), nil
	})
}

// rewrite returns addrs with every non-empty address passed through fn.
func rewrite(addrs map[string][2]string, fn func(host, port string) (string, error)) (map[string][2]string, error) {
	out := make(map[string][2]string, len(addrs))
	for name, pair := range addrs {
		for i, a := range pair {
			if a == "" {
				continue
			}
			host, port, err := net.SplitHostPort(a)
			if err != nil {
				return nil, fmt.Errorf("address %q: %w", a, err)
			}
			if pair[i], err = fn(host, port); err != nil {
				return nil, err
			}
		}
		out[name] = pair
	}
	return out, nil
}

// Options configure the embedded mesh.
type Options struct {
	// DataDir holds every service's data in a subdirectory.
	DataDir string
	// TaskRoots are the directories the coordinator reads task files from
	// (its --task-root); empty: tasks/ under the coordinator's data
	// directory.
	TaskRoots []string
	// Addrs gives each service's gRPC and HTTP listen address; a missing
	// service listens on an ephemeral loopback port without HTTP.
	Addrs map[string][2]string
	// OpenAIAddr is the gateway's OpenAI-compatible HTTP address; empty
	// disables it.
	OpenAIAddr string
	// Pools are the VM pools; none means no desktop episodes can run.
	Pools []vmmanager.PoolSpec
	// Backends are the model servers. When empty, a fakellm answering from
	// FakeScript is started in-process as the only backend.
	Backends []modelgateway.BackendConfig
	// Checkpoints, when set, makes the gateway load each new complete
	// checkpoint found in a directory.
	Checkpoints *modelgateway.CheckpointsConfig
	// FakeScript is the fakellm script used when Backends is empty.
	FakeScript string
	// Model is the served model name of the fakellm backend.
	Model string
	// RunnerSlots is the number of concurrent episodes (num_rollouts).
	RunnerSlots int
	// Logger receives every service's logs.
	Logger *zap.Logger
	// RAGCorpus, WebDocs and WebSearchURL are the runner's data for rag
	// and web tasks (its --rag-corpus, --web-docs, --web-search-url).
	RAGCorpus, WebDocs, WebSearchURL string
	// CacheDir is the runner's cache of OSWorld task files (its
	// --cache-dir; default <DataDir>/runner/cache), Offline its --offline.
	CacheDir string
	Offline  bool
	// GoogleSettings is the runner's --google-settings: the folder of
	// OSWorld's Google settings files; empty refuses those tasks.
	GoogleSettings string
	// AuthToken, when set, is required on every gRPC call to the services
	// and on the OpenAI-compatible front, and the services send it to each
	// other.
	AuthToken string
}

// Mesh is a running embedded mesh.
type Mesh struct {
	addrs      map[string]string
	openAIAddr string
	fake       *fakellm.Instance
	gw         *modelgateway.Service
	cancels    []context.CancelFunc // in start order
	dones      []chan error
	once       sync.Once
}

// Addr returns the gRPC address of a service.
func (m *Mesh) Addr(service string) string { return m.addrs[service] }

// OpenAIAddr returns the address of the gateway's OpenAI-compatible front,
// or "" when it is off.
func (m *Mesh) OpenAIAddr() string { return m.openAIAddr }

// WaitModels waits until the model servers the gateway launched (backends
// with a launch section) are ready; see modelgateway.Service.WaitLaunched.
func (m *Mesh) WaitModels(ctx context.Context) error {
	if m.gw == nil {
		return nil
	}
	return m.gw.WaitLaunched(ctx)
}

// FakeLLM reports whether the scripted stand-in answers the model calls.
func (m *Mesh) FakeLLM() bool { return m.fake != nil }

// Start starts the five services in dependency order. On error everything
// already started is stopped.
func Start(ctx context.Context, o Options) (_ *Mesh, err error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.RunnerSlots <= 0 {
		o.RunnerSlots = 4
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	o.DataDir = dataDir
	m := &Mesh{addrs: map[string]string{}}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()

	backends := o.Backends
	if len(backends) == 0 {
		cfg := fakellm.Config{Model: o.Model}
		if o.FakeScript != "" {
			rules, err := fakellm.LoadScript(o.FakeScript)
			if err != nil {
				return nil, fmt.Errorf("fakellm script: %w", err)
			}
			cfg.Script = rules
		}
		if m.fake, err = fakellm.Start(ctx, "127.0.0.1:0", cfg); err != nil {
			return nil, fmt.Errorf("start fakellm: %w", err)
		}
		backends = []modelgateway.BackendConfig{{ID: "fakellm", BaseURL: m.fake.URL, Kind: modelgateway.KindVLLM, Model: o.Model}}
	}

	if err := m.serve(ctx, o, Storage, func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		return storage.New(ctx, storage.Config{}, env)
	}); err != nil {
		return nil, err
	}
	if err := m.serve(ctx, o, ModelGateway, func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		gw, err := modelgateway.New(ctx, modelgateway.Config{
			OpenAIAddr: o.OpenAIAddr, AuthToken: o.AuthToken,
			File: &modelgateway.FileConfig{DefaultModel: o.Model, Backends: backends, Checkpoints: o.Checkpoints},
		}, env)
		if err != nil {
			return nil, err
		}
		m.openAIAddr = gw.OpenAIAddr()
		m.gw = gw
		return gw, nil
	}); err != nil {
		return nil, err
	}
	if err := m.serve(ctx, o, VMManager, func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		return vmmanager.New(ctx, vmmanager.Config{Pools: o.Pools}, env)
	}); err != nil {
		return nil, err
	}
	if err := m.serve(ctx, o, Coordinator, func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		return coordinator.New(ctx, coordinator.Config{
			VMManager: m.addrs[VMManager], Storage: m.addrs[Storage], Gateway: m.addrs[ModelGateway],
			TaskRoots: o.TaskRoots, PeerToken: o.AuthToken,
		}, env)
	}); err != nil {
		return nil, err
	}
	if err := m.serve(ctx, o, Runner, func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
		return runner.New(ctx, runner.Config{
			Coordinator: m.addrs[Coordinator], Gateway: m.addrs[ModelGateway], Storage: m.addrs[Storage],
			Slots: o.RunnerSlots, RunnerID: "embedded", Address: env.GRPCAddr, AuthToken: o.AuthToken,
			CacheDir:       CacheDir(o.DataDir, o.CacheDir),
			Offline:        o.Offline,
			GoogleSettings: o.GoogleSettings,
			RAGCorpus:      o.RAGCorpus, WebDocs: o.WebDocs, WebSearchURL: o.WebSearchURL,
		}, env)
	}); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Mesh) serve(ctx context.Context, o Options, name string, build func(context.Context, daemon.Env) (daemon.Service, error)) error {
	addrs, ok := o.Addrs[name]
	if !ok {
		addrs = [2]string{"127.0.0.1:0", ""}
	}
	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", addrs[0])
	if err != nil {
		return fmt.Errorf("%s: listen: %w", name, err)
	}
	var hl net.Listener
	if addrs[1] != "" {
		if hl, err = lc.Listen(ctx, "tcp", addrs[1]); err != nil {
			gl.Close()
			return fmt.Errorf("%s: listen http: %w", name, err)
		}
	}
	env := daemon.Env{
		Logger:   o.Logger.Named(name),
		Registry: daemon.NewRegistry(),
		DataDir:  filepath.Join(o.DataDir, name),
		GRPCAddr: gl.Addr().String(),
		// Services with another front (storage's viewer) require it there.
		AuthToken: o.AuthToken,
	}
	if err := mkdir(env.DataDir); err != nil {
		gl.Close()
		return err
	}
	// The services outlive the caller's ctx only through Close: each gets
	// its own context, cancelled in reverse start order.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	svc, err := build(sctx, env)
	if err != nil {
		cancel()
		gl.Close()
		if hl != nil {
			hl.Close()
		}
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(sctx, daemon.ServeConfig{
			GRPCListener: gl, HTTPListener: hl, Logger: env.Logger, Registry: env.Registry, DrainTimeout: 20 * time.Second,
			AuthToken: o.AuthToken,
		}, svc)
	}()
	m.addrs[name] = gl.Addr().String()
	m.cancels = append(m.cancels, cancel)
	m.dones = append(m.dones, done)
	return nil
}

// Close drains and stops the services in reverse start order (runner
// first, so episodes are handed back before the coordinator goes; vmmanager
// before storage, so every VM is stopped).
func (m *Mesh) Close() error {
	var errs []error
	m.once.Do(func() {
		for i := len(m.cancels) - 1; i >= 0; i-- {
			m.cancels[i]()
			if err := <-m.dones[i]; err != nil {
				errs = append(errs, err)
			}
		}
		if m.fake != nil {
			if err := m.fake.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// CacheDir is the runner's cache directory of an embedded mesh: cacheDir
// when given, else runner/cache under dataDir (where `rollout cache` puts
// its files for `rollout run` to find).
func CacheDir(dataDir, cacheDir string) string {
	if cacheDir != "" {
		return cacheDir
	}
	return filepath.Join(dataDir, Runner, "cache")
}
