package modelgateway

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/breaker"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/checkpoint"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/routing"
)

// The config sections, usable from other modules (the all-in-one CLI builds
// a FileConfig in code).
type (
	// BackendConfig describes one backend: id, base_url, kind, model,
	// api_key_env / api_key_file, max_concurrent, weight.
	BackendConfig = backend.Config
	// RoutingConfig selects and tunes the routing policy.
	RoutingConfig = routing.Config
	// RetryConfig bounds retries and backoff.
	RetryConfig = gateway.RetryConfig
	// HealthConfig tunes health probing.
	HealthConfig = gateway.HealthConfig
	// BreakerConfig tunes the per-backend circuit breakers.
	BreakerConfig = breaker.Config
	// LaunchConfig is a backend's launch section: the gateway starts and
	// restarts the servers itself.
	LaunchConfig = launch.Config
	// CheckpointsConfig watches a directory for new checkpoints.
	CheckpointsConfig = checkpoint.Config
)

// Backend kinds for BackendConfig.Kind.
const (
	KindVLLM   = backend.KindVLLM
	KindSGLang = backend.KindSGLang
	KindOpenAI = backend.KindOpenAI
)

// FileConfig is the YAML config file (see examples/modelgateway.yaml).
type FileConfig struct {
	// DefaultModel answers requests without a model name (default: the
	// first backend's model).
	DefaultModel string `yaml:"default_model"`
	// InitialVersion is the weight version the backends serve at start.
	InitialVersion int64           `yaml:"initial_version"`
	Backends       []BackendConfig `yaml:"backends"`
	Routing        RoutingConfig   `yaml:"routing"`
	Retry          RetryConfig     `yaml:"retry"`
	Health         HealthConfig    `yaml:"health"`
	Breaker        BreakerConfig   `yaml:"breaker"`
	Limits         Limits          `yaml:"limits"`
	// Checkpoints, when set, loads each new complete checkpoint found in
	// a directory (UpdateWeights with it as the source).
	Checkpoints *CheckpointsConfig `yaml:"checkpoints"`
	// HTTPFront tunes the OpenAI HTTP front.
	HTTPFront HTTPFrontConfig `yaml:"http_front"`
	// GRPCFront tunes the gRPC front.
	GRPCFront GRPCFrontConfig `yaml:"grpc_front"`
}

// GRPCFrontConfig tunes the gRPC front.
type GRPCFrontConfig struct {
	// Engine serves the front: EngineEventLoop (package grpcloop: HTTP/2
	// on gnet's event loops, which serve Chat themselves, run
	// ListBackends and UpdateWeights on workers, and hand health,
	// reflection and streams to grpc-go's server; plain HTTP/2 only) or
	// EngineGoroutines (grpc-go's server). The default is the event loop,
	// and goroutines over TLS.
	Engine string `yaml:"engine"`
}

// HTTPFrontConfig tunes the OpenAI HTTP front.
type HTTPFrontConfig struct {
	// Engine serves the front: EngineEventLoop (gnet, one event loop per
	// CPU and no goroutine per connection; plain HTTP only) or
	// EngineGoroutines (fasthttp, a goroutine per connection). The
	// default is the event loop, and goroutines over TLS.
	Engine string `yaml:"engine"`
}

// HTTP front engines for HTTPFrontConfig.Engine.
const (
	EngineGoroutines = "goroutines"
	EngineEventLoop  = "event_loop"
)

// Limits bound requests. Zero fields take the defaults.
type Limits struct {
	// MaxImageBytes bounds one image (default 20 MiB).
	MaxImageBytes int `yaml:"max_image_bytes"`
	// MaxRequestBytes bounds an HTTP request body (default 64 MiB).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// MaxResponseBytes bounds a backend answer (default 64 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// RequestTimeout applies when the caller set no deadline (default 10m).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MaxMessages bounds a conversation (default 4096).
	MaxMessages int `yaml:"max_messages"`
	// MaxImages bounds the images of one request (default 128).
	MaxImages int `yaml:"max_images"`
	// ImageCacheBytes bounds the images of recent gRPC Chat requests kept
	// by digest, which later requests may name instead of sending the
	// bytes again (default 512 MiB; negative turns the cache off).
	ImageCacheBytes int64 `yaml:"image_cache_bytes"`
}

// DefaultImageCacheBytes is the image cache's default bound: about 2,500
// screenshots of 200 KB, which is two steps' worth of images for 1,024
// episodes sending three recent screenshots per request.
const DefaultImageCacheBytes = 512 << 20

func (l *Limits) defaults() {
	if l.MaxImageBytes <= 0 {
		l.MaxImageBytes = 20 << 20
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = 64 << 20
	}
	if l.MaxResponseBytes <= 0 {
		l.MaxResponseBytes = 64 << 20
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 10 * time.Minute
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = 4096
	}
	if l.MaxImages <= 0 {
		l.MaxImages = 128
	}
	if l.ImageCacheBytes == 0 {
		l.ImageCacheBytes = DefaultImageCacheBytes
	}
}

// maxConfigBytes bounds the config file; a config of hundreds of backends
// is tens of kilobytes.
const maxConfigBytes = 1 << 20

// MaxVersion bounds weight versions, as a caller's UpdateWeights and the
// config's initial_version set them: a JSON number keeps integers up to
// 2^53 exact, and no training run makes that many updates.
const MaxVersion = 1<<53 - 1

// LoadFile reads and checks a YAML config file. Unknown keys are errors, so
// that a misspelt key is not silently ignored. The file must be a regular
// one of at most 1 MiB: a FIFO or a device would block or never end.
func LoadFile(path string) (*FileConfig, error) {
	raw, err := boundedread.ReadFile(path, maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseConfig(raw)
}

// ParseConfig parses YAML config.
func ParseConfig(raw []byte) (*FileConfig, error) {
	var fc FileConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if err := fc.Validate(); err != nil {
		return nil, err
	}
	return &fc, nil
}

// Validate checks the config; errors name the key.
func (fc *FileConfig) Validate() error {
	if len(fc.Backends) == 0 {
		return errors.New("backends: at least one backend is required")
	}
	if fc.InitialVersion < 0 || fc.InitialVersion > MaxVersion {
		return fmt.Errorf("initial_version: must be in [0, %d]", int64(MaxVersion))
	}
	for i := range fc.Backends {
		if err := fc.Backends[i].Validate(); err != nil {
			return fmt.Errorf("backends[%d].%w", i, err)
		}
	}
	if _, err := routing.New(fc.Routing, routing.Hooks{}); err != nil {
		return fmt.Errorf("routing.policy: %w", err)
	}
	switch fc.HTTPFront.Engine {
	case "", EngineGoroutines, EngineEventLoop:
	default:
		return fmt.Errorf("http_front.engine: %q is not %s or %s", fc.HTTPFront.Engine, EngineGoroutines, EngineEventLoop)
	}
	switch fc.GRPCFront.Engine {
	case "", EngineGoroutines, EngineEventLoop:
	default:
		return fmt.Errorf("grpc_front.engine: %q is not %s or %s", fc.GRPCFront.Engine, EngineGoroutines, EngineEventLoop)
	}
	if fc.Checkpoints != nil {
		cc := *fc.Checkpoints
		cc.Defaults()
		if err := cc.Validate(); err != nil {
			return fmt.Errorf("checkpoints.%w", err)
		}
	}
	return nil
}
