// Package backend is one OpenAI-compatible model server behind the gateway:
// its HTTP client, in-flight load, health, circuit breaker, statistics, and
// the kind-specific calls (vLLM, SGLang, generic OpenAI) that move it to new
// weights.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/breaker"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
)

// Backend kinds.
const (
	KindVLLM   = "vllm"
	KindSGLang = "sglang"
	KindOpenAI = "openai"
)

// Config describes one backend.
type Config struct {
	// ID names the backend in metrics, logs and ListBackends.
	ID string `yaml:"id"`
	// BaseURL is the server root, e.g. http://127.0.0.1:8001 (a trailing
	// /v1 is accepted and stripped).
	BaseURL string `yaml:"base_url"`
	// Kind is vllm, sglang or openai (default vllm).
	Kind string `yaml:"kind"`
	// Model is the served model name.
	Model string `yaml:"model"`
	// APIKeyEnv names an environment variable holding the API key.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKeyFile names a file holding the API key.
	APIKeyFile string `yaml:"api_key_file"`
	// APIKey is set by code (the all-in-one binary); never read from YAML
	// so that keys do not end up in config files.
	APIKey string `yaml:"-"`
	// MaxConcurrent bounds requests in flight (0 = unlimited).
	MaxConcurrent int `yaml:"max_concurrent"`
	// Weight is the share for the weighted policy (default 1).
	Weight float64 `yaml:"weight"`
	// Launch, when set, makes the gateway start the servers itself: one
	// backend per replica, "<id>-<i>", base_url left empty.
	Launch *launch.Config `yaml:"launch"`
	// Managed marks a launched replica: it gets no traffic until its
	// launcher says it is ready. Set by the gateway, never read from YAML.
	Managed bool `yaml:"-"`
}

// Validate checks c; errors name the field.
func (c *Config) Validate() error {
	if c.ID == "" {
		return errors.New("id: required")
	}
	if c.Launch != nil {
		if c.BaseURL != "" {
			return errors.New("base_url: must be empty with launch: the gateway picks each replica's port")
		}
		lc := *c.Launch
		lc.Defaults()
		if err := lc.Validate(); err != nil {
			return fmt.Errorf("launch.%w", err)
		}
		if c.Model == "" {
			return errors.New("model: required")
		}
		return c.validateRest()
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url: %q is not an http(s) URL", c.BaseURL)
	}
	if u.User != nil {
		return errors.New("base_url: must not carry credentials; use api_key_env or api_key_file")
	}
	switch c.Kind {
	case "", KindVLLM, KindSGLang, KindOpenAI:
	default:
		return fmt.Errorf("kind: %q is not vllm, sglang or openai", c.Kind)
	}
	if c.Model == "" {
		return errors.New("model: required")
	}
	return c.validateRest()
}

func (c *Config) validateRest() error {
	switch c.Kind {
	case "", KindVLLM, KindSGLang, KindOpenAI:
	default:
		return fmt.Errorf("kind: %q is not vllm, sglang or openai", c.Kind)
	}
	if c.MaxConcurrent < 0 {
		return errors.New("max_concurrent: must be >= 0")
	}
	if c.Weight < 0 {
		return errors.New("weight: must be >= 0")
	}
	return nil
}

// Options are the shared settings every backend gets.
type Options struct {
	// Client makes the rare calls: health probes and weight updates.
	// Chat requests go through a fasthttp client of the backend's own.
	Client  *http.Client
	Clock   clock.Clock
	Breaker breaker.Config
	// OnBreaker observes breaker transitions.
	OnBreaker func(id string, from, to breaker.State)
}

// Backend is safe for concurrent use.
type Backend struct {
	cfg    Config
	base   string
	apiKey string
	client *http.Client
	fast   *fasthttp.HostClient
	wire   *Wire
	// target is the last path Send posted to (the chat path).
	target  atomic.Pointer[postTarget]
	clk     clock.Clock
	breaker *breaker.Breaker

	inFlight atomic.Int32
	healthy  atomic.Bool
	// admitted gates a managed replica: false until its launcher saw it
	// answer health and list the model, and again once it exits.
	admitted atomic.Bool
	updating atomic.Bool
	version  atomic.Int64
	// epoch changes whenever an update starts or ends; a request that sees
	// two epochs spanned a weight change.
	epoch              atomic.Int64
	requests, failures atomic.Int64

	mu        sync.Mutex
	lastErr   string
	latencies [128]time.Duration
	latN      int
	probeFail int
	probeOK   int
	replica   launch.Status
}

// maxKeyBytes bounds an API key file; keys are tens of bytes.
const maxKeyBytes = 4 << 10

// headerSafe reports whether s can be a header value as it is: no control
// characters (tab aside).
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// New builds a backend, resolving its API key from env or file.
func New(cfg Config, opts Options) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.ID, err)
	}
	if cfg.Kind == "" {
		cfg.Kind = KindVLLM
	}
	if cfg.Weight == 0 {
		cfg.Weight = 1
	}
	key := cfg.APIKey
	switch {
	case cfg.APIKeyEnv != "":
		v, ok := os.LookupEnv(cfg.APIKeyEnv)
		if !ok {
			return nil, fmt.Errorf("backend %q: api_key_env: variable %s is not set", cfg.ID, cfg.APIKeyEnv)
		}
		key = v
	case cfg.APIKeyFile != "":
		// A regular file, and small: a FIFO would block the start and
		// a device never end.
		b, err := boundedread.ReadFile(cfg.APIKeyFile, maxKeyBytes)
		if err != nil {
			// The error names the file, never its content.
			return nil, fmt.Errorf("backend %q: api_key_file: %w", cfg.ID, err)
		}
		key = strings.TrimSpace(string(b))
	}
	if !headerSafe(key) {
		// It goes into an Authorization header: a line break would let
		// it add headers of its own. The error does not quote it.
		return nil, fmt.Errorf("backend %q: API key holds control characters", cfg.ID)
	}
	b := &Backend{
		cfg:    cfg,
		base:   strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1"),
		apiKey: key,
		client: opts.Client,
		clk:    opts.Clock,
	}
	fast, err := newHostClient(b.base)
	if err != nil {
		return nil, fmt.Errorf("backend %q: base_url: %w", cfg.ID, err)
	}
	b.fast = fast
	b.wire = newWire(b.base, key)
	b.breaker = breaker.New(opts.Breaker, opts.Clock, func(from, to breaker.State) {
		if opts.OnBreaker != nil {
			opts.OnBreaker(cfg.ID, from, to)
		}
	})
	// Optimistic until probes say otherwise; a launched replica waits for
	// its launcher instead.
	b.healthy.Store(!cfg.Managed)
	if cfg.Managed {
		b.replica.State = launch.Starting
	}
	return b, nil
}

// ID is the backend id.
func (b *Backend) ID() string { return b.cfg.ID }

// Kind is vllm, sglang or openai.
func (b *Backend) Kind() string { return b.cfg.Kind }

// Model is the served model name.
func (b *Backend) Model() string { return b.cfg.Model }

// BaseURL is the configured root URL.
func (b *Backend) BaseURL() string { return b.base }

// Load is the number of requests in flight.
func (b *Backend) Load() int { return int(b.inFlight.Load()) }

// Weight is the routing weight.
func (b *Backend) Weight() float64 { return b.cfg.Weight }

// Version is the weight version it serves.
func (b *Backend) Version() int64 { return b.version.Load() }

// SetVersion records the weight version (initial config).
func (b *Backend) SetVersion(v int64) { b.version.Store(v) }

// Epoch changes at the start and end of every weight update.
func (b *Backend) Epoch() int64 { return b.epoch.Load() }

// Healthy reports the probes' verdict.
func (b *Backend) Healthy() bool { return b.healthy.Load() }

// Updating reports a weight update in progress.
func (b *Backend) Updating() bool { return b.updating.Load() }

// Breaker is the backend's circuit breaker.
func (b *Backend) Breaker() *breaker.Breaker { return b.breaker }

// Available reports whether routing may choose it now: not being updated,
// breaker letting requests through, and below its concurrency limit.
// Health is checked separately so that routing can fall back to backends
// whose probes lag behind.
func (b *Backend) Available() bool {
	if b.cfg.Managed && !b.admitted.Load() {
		return false
	}
	if b.updating.Load() || !b.breaker.Peek() {
		return false
	}
	return b.cfg.MaxConcurrent == 0 || int(b.inFlight.Load()) < b.cfg.MaxConcurrent
}

// Managed reports a replica the gateway launched.
func (b *Backend) Managed() bool { return b.cfg.Managed }

// Admitted reports whether a launched replica is ready for traffic (always
// true for other backends).
func (b *Backend) Admitted() bool { return !b.cfg.Managed || b.admitted.Load() }

// APIKey is the key sent to the server; the launcher hands it to the
// servers it starts through their environment.
func (b *Backend) APIKey() string { return b.apiKey }

// SetReplica records a launched replica's state: Ready admits it to
// routing (healthy, at version), anything else takes it out.
func (b *Backend) SetReplica(st launch.Status, version int64) {
	b.mu.Lock()
	b.replica = st
	if st.State == launch.Ready {
		b.probeFail, b.probeOK = 0, 0
		b.version.Store(version)
		b.healthy.Store(true)
		b.lastErr = ""
	}
	b.mu.Unlock()
	b.admitted.Store(st.State == launch.Ready)
	if st.State != launch.Ready {
		b.healthy.Store(false)
	}
}

// Acquire counts a request in flight, failing when the limit is reached.
func (b *Backend) Acquire() bool {
	for {
		n := b.inFlight.Load()
		if b.cfg.MaxConcurrent > 0 && int(n) >= b.cfg.MaxConcurrent {
			return false
		}
		if b.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release ends a request counted by Acquire.
func (b *Backend) Release() { b.inFlight.Add(-1) }

// Send posts body to path (e.g. "/v1/chat/completions"), with the routing
// key (if any) in X-Routing-Key. The request lives as long as ctx: a
// caller that goes away cancels it at the backend, whose connection is
// closed. The caller must Close the answer.
func (b *Backend) Send(ctx context.Context, path string, body []byte, routingKey string) (*Answer, error) {
	t := b.target.Load()
	if t == nil || t.path != path {
		u := &fasthttp.URI{DisablePathNormalizing: true}
		url := b.base + path
		if err := u.Parse(nil, []byte(url)); err != nil {
			return nil, fmt.Errorf("post %s: %w", url, err)
		}
		t = &postTarget{path: path, url: url, uri: u}
		b.target.Store(t)
	}
	return send(ctx, b.fast, t, body, routingKey, b.apiKey)
}

// postTarget is a path Send posts to, with its URL parsed once: fasthttp
// would parse the URL of every request again. The URI is only read (copied
// into each request) once stored.
type postTarget struct {
	path, url string
	uri       *fasthttp.URI
}

// Result records the outcome of a request for statistics and the breaker.
// errText is kept as the last error; it must not hold secrets (the
// transport's errors name the URL, which holds none).
func (b *Backend) Result(ok bool, latency time.Duration, errText string, countBreaker bool) {
	b.requests.Add(1)
	if countBreaker {
		b.breaker.Record(ok)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.latencies[b.latN%len(b.latencies)] = latency
		b.latN++
		return
	}
	b.failures.Add(1)
	b.lastErr = errText
}

// Probe checks the backend once: /health for vLLM and SGLang, /v1/models
// for generic OpenAI servers.
func (b *Backend) Probe(ctx context.Context) error {
	path := "/health"
	if b.cfg.Kind == KindOpenAI {
		path = "/v1/models"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		return err
	}
	if b.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.apiKey)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d", path, resp.StatusCode)
	}
	return nil
}

// ProbeResult applies a probe outcome with hysteresis: failThreshold
// consecutive failures mark it unhealthy, riseThreshold successes healthy
// again. It reports whether health changed.
func (b *Backend) ProbeResult(err error, failThreshold, riseThreshold int) (changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.probeOK = 0
		b.probeFail++
		b.lastErr = err.Error()
		if b.probeFail >= failThreshold && b.healthy.Load() {
			b.healthy.Store(false)
			return true
		}
		return false
	}
	b.probeFail = 0
	b.probeOK++
	if b.probeOK >= riseThreshold && !b.healthy.Load() && b.Admitted() {
		b.healthy.Store(true)
		return true
	}
	return false
}

// Snapshot is a point-in-time view for ListBackends.
type Snapshot struct {
	Config
	Healthy    bool
	Breaker    breaker.State
	InFlight   int
	Version    int64
	Updating   bool
	LatencyP50 time.Duration
	Requests   int64
	Failures   int64
	LastError  string
	// Replica is a launched replica's state (zero for other backends).
	Replica launch.Status
}

// Snapshot returns the current view. The API key is not part of it.
func (b *Backend) Snapshot() Snapshot {
	b.mu.Lock()
	n := min(b.latN, len(b.latencies))
	lat := slices.Clone(b.latencies[:n])
	lastErr := b.lastErr
	replica := b.replica
	b.mu.Unlock()
	var p50 time.Duration
	if n > 0 {
		slices.Sort(lat)
		p50 = lat[n/2]
	}
	cfg := b.cfg
	cfg.APIKey = ""
	cfg.BaseURL = b.base
	return Snapshot{
		Config: cfg, Healthy: b.Healthy(), Breaker: b.breaker.State(), InFlight: b.Load(),
		Version: b.Version(), Updating: b.Updating(), LatencyP50: p50,
		Requests: b.requests.Load(), Failures: b.failures.Load(), LastError: lastErr,
		Replica: replica,
	}
}

// IsConnError reports errors worth failing over for: refused, reset,
// dropped connections, as opposed to the caller's own cancellation.
func IsConnError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection")
}
