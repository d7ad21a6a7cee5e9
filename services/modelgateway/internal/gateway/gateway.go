// Package gateway is the routing core shared by the gRPC and HTTP fronts:
// it picks a backend by policy, counts the request in flight there, retries
// with backoff and fails over on connection errors and 408/429/5xx within the
// caller's deadline, probes backend health, and orchestrates weight updates
// and the version every answer is stamped with.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/breaker"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/metrics"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/routing"
)

// Errors the fronts translate.
var (
	// ErrUnknownModel: no backend serves the requested model.
	ErrUnknownModel = errors.New("unknown model")
	// ErrNoBackend: no backend could answer within the attempts and deadline.
	ErrNoBackend = errors.New("no backend available")
	// ErrStaleVersion: an update to a version not above the current one.
	ErrStaleVersion = errors.New("version must be greater than the current version")
	// ErrUpdateFailed: no backend took the new weights.
	ErrUpdateFailed = errors.New("weight update failed on every backend")
)

// StatusError is a backend's final error answer after retries ran out; the
// HTTP front passes it on, the gRPC front maps it.
type StatusError struct {
	Backend string
	Code    int
	Body    []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("backend %s answered %d: %s", e.Backend, e.Code, e.Body)
}

// RetryConfig bounds retries.
type RetryConfig struct {
	// MaxAttempts per request, first try included (default 3).
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffBase doubles per retry up to BackoffMax (defaults 20ms, 1s),
	// with ±20% jitter.
	BackoffBase time.Duration `yaml:"backoff_base"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
}

// HealthConfig tunes health probing.
type HealthConfig struct {
	// Interval between probes (default 2s).
	Interval time.Duration `yaml:"interval"`
	// Timeout of one probe (default 1s).
	Timeout time.Duration `yaml:"timeout"`
	// FailureThreshold consecutive failures mark a backend unhealthy
	// (default 3), SuccessThreshold successes healthy again (default 2).
	FailureThreshold int `yaml:"failure_threshold"`
	SuccessThreshold int `yaml:"success_threshold"`
}

// Config configures a Gateway.
type Config struct {
	Backends []backend.Config
	Routing  routing.Config
	Retry    RetryConfig
	Health   HealthConfig
	Breaker  breaker.Config
	// DefaultModel answers requests without a model (default: the first
	// backend's model).
	DefaultModel string
	// InitialVersion is the weight version the backends start at.
	InitialVersion int64
}

func (c *Config) defaults() {
	if c.Retry.MaxAttempts <= 0 {
		c.Retry.MaxAttempts = 3
	}
	if c.Retry.BackoffBase <= 0 {
		c.Retry.BackoffBase = 20 * time.Millisecond
	}
	if c.Retry.BackoffMax <= 0 {
		c.Retry.BackoffMax = time.Second
	}
	if c.Health.Interval <= 0 {
		c.Health.Interval = 2 * time.Second
	}
	if c.Health.Timeout <= 0 {
		c.Health.Timeout = time.Second
	}
	if c.Health.FailureThreshold <= 0 {
		c.Health.FailureThreshold = 3
	}
	if c.Health.SuccessThreshold <= 0 {
		c.Health.SuccessThreshold = 2
	}
}

// Gateway routes requests to backends.
type Gateway struct {
	cfg     Config
	log     *zap.Logger
	clk     clock.Clock
	met     *metrics.Metrics
	policy  routing.Policy
	all     []*backend.Backend
	byModel map[string][]*backend.Backend
	// targets is byModel as routing targets: what pick hands the policy
	// when every backend of the model is a candidate, without building
	// the list per request.
	targets map[string][]target
	models  []string
	// counters holds each backend's hot-path counters; set in New, read
	// only after.
	counters map[*backend.Backend]*metrics.BackendCounters

	version  atomic.Int64
	updateMu sync.Mutex
	// autoVersion: the current version came from the checkpoint watcher
	// (guarded by updateMu).
	autoVersion bool

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New builds a gateway; Start begins health probing.
func New(cfg Config, client *http.Client, clk clock.Clock, met *metrics.Metrics, log *zap.Logger) (*Gateway, error) {
	cfg.defaults()
	g := &Gateway{cfg: cfg, log: log, clk: clk, met: met, byModel: map[string][]*backend.Backend{},
		targets: map[string][]target{}, counters: map[*backend.Backend]*metrics.BackendCounters{}}
	policy, err := routing.New(cfg.Routing, routing.Hooks{
		Pin:   func(id string) { met.Pins.WithLabelValues(id, "pin").Inc() },
		Unpin: func(id string) { met.Pins.WithLabelValues(id, "unpin").Inc() },
	})
	if err != nil {
		return nil, fmt.Errorf("routing.policy: %w", err)
	}
	g.policy = policy
	seen := map[string]bool{}
	for i, bc := range cfg.Backends {
		if seen[bc.ID] {
			return nil, fmt.Errorf("backends[%d].id: duplicate id %q", i, bc.ID)
		}
		seen[bc.ID] = true
		b, err := backend.New(bc, backend.Options{
			Client: client, Clock: clk, Breaker: cfg.Breaker,
			OnBreaker: func(id string, from, to breaker.State) {
				met.BreakerTransitions.WithLabelValues(id, to.String()).Inc()
				log.Warn("breaker state changed", zap.String("backend", id), zap.Stringer("from", from), zap.Stringer("to", to))
			},
		})
		if err != nil {
			return nil, fmt.Errorf("backends[%d]: %w", i, err)
		}
		b.SetVersion(cfg.InitialVersion)
		if err := met.BackendGauges(b.ID(),
			func() float64 { return float64(b.Load()) },
			func() float64 {
				if b.Healthy() {
					return 1
				}
				return 0
			}); err != nil {
			return nil, err
		}
		g.all = append(g.all, b)
		g.counters[b] = met.Backend(b.ID())
		if _, ok := g.byModel[b.Model()]; !ok {
			g.models = append(g.models, b.Model())
		}
		g.byModel[b.Model()] = append(g.byModel[b.Model()], b)
		g.targets[b.Model()] = append(g.targets[b.Model()], b)
	}
	if g.cfg.DefaultModel == "" && len(g.all) > 0 {
		g.cfg.DefaultModel = g.all[0].Model()
	}
	if _, ok := g.byModel[g.cfg.DefaultModel]; !ok && len(g.all) > 0 {
		return nil, fmt.Errorf("default_model: no backend serves %q", g.cfg.DefaultModel)
	}
	g.version.Store(cfg.InitialVersion)
	met.ModelVersion.Set(float64(cfg.InitialVersion))
	return g, nil
}

// Start runs health probing until Stop.
func (g *Gateway) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.probeLoop(ctx)
	}()
}

// Stop ends health probing and waits for it.
func (g *Gateway) Stop() {
	if g.stop != nil {
		g.stop()
	}
	g.wg.Wait()
}

// Models lists the served model names in config order.
func (g *Gateway) Models() []string { return g.models }

// Backends lists the backends in config order.
func (g *Gateway) Backends() []*backend.Backend { return g.all }

// Version is the recorded weight version.
func (g *Gateway) Version() int64 { return g.version.Load() }

// PolicyName names the routing policy.
func (g *Gateway) PolicyName() string { return g.policy.Name() }

// PinCounts reports pinned keys per backend id.
func (g *Gateway) PinCounts() map[string]int { return routing.PinCounts(g.policy) }

// ResolveModel maps a requested model name ("" = default) to a served one.
func (g *Gateway) ResolveModel(model string) (string, error) {
	if model == "" {
		return g.cfg.DefaultModel, nil
	}
	if _, ok := g.byModel[model]; !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	return model, nil
}

func (g *Gateway) probeLoop(ctx context.Context) {
	for {
		var wg sync.WaitGroup
		for _, b := range g.all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, g.cfg.Health.Timeout)
				err := b.Probe(pctx)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if b.ProbeResult(err, g.cfg.Health.FailureThreshold, g.cfg.Health.SuccessThreshold) {
					g.log.Warn("backend health changed", zap.String("backend", b.ID()), zap.Bool("healthy", b.Healthy()), zap.Error(err))
				}
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-g.clk.After(g.cfg.Health.Interval):
		}
	}
}

// Request is one chat call to route.
type Request struct {
	// Model is a resolved model name.
	Model      string
	RoutingKey string
	// Body is the JSON body. OpenAIBody, when set, makes the body for
	// kind openai backends, which reject vLLM's extra fields; it is called
	// only when the request goes to one.
	Body       []byte
	OpenAIBody func() ([]byte, error)
}

// Response is an open backend answer. The caller reads it and must call
// Finish (or FinishCanceled) exactly once.
type Response struct {
	*backend.Answer
	Backend  *backend.Backend
	Attempts int
	Start    time.Time
	epoch    int64
	done     atomic.Bool
}

// Finish closes the body, ends the in-flight count and records the outcome;
// it reports whether a weight update happened while the request was in
// flight.
func (r *Response) Finish(ok bool, errText string) (versionChanged bool) {
	if !r.done.CompareAndSwap(false, true) {
		return r.Backend.Epoch() != r.epoch
	}
	if r.Answer != nil {
		r.Answer.Close()
	}
	r.Backend.Release()
	r.Backend.Result(ok, time.Since(r.Start), errText, true)
	return r.Backend.Epoch() != r.epoch
}

// CountTokens adds a backend's usage report to the token counters.
func (g *Gateway) CountTokens(b *backend.Backend, prompt, completion int64) {
	c := g.counters[b]
	if c == nil {
		return
	}
	if prompt > 0 {
		c.PromptTokens.Add(float64(prompt))
	}
	if completion > 0 {
		c.CompletionTokens.Add(float64(completion))
	}
}

// ReadAnswer returns a non-streamed answer of at most limit bytes. One the
// backend sent with its length (every non-streamed one) was read with the
// headers and is returned as it is, without a copy: it is valid until
// Finish. Others are read into a new buffer.
func ReadAnswer(r *Response, limit int64) ([]byte, error) {
	if b, ok := r.Inline(); ok {
		if int64(len(b)) > limit {
			return nil, errors.New(TooLong(int64(len(b)), limit))
		}
		return b, nil
	}
	n := r.ContentLength
	if n > limit {
		return nil, errors.New(TooLong(n, limit))
	}
	if n < 0 {
		n = 4096
	}
	// bytes.Buffer.ReadFrom would grow a buffer of exactly n+1 bytes
	// (it wants 512 free before each read).
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r.Answer, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, errors.New(TooLong(-1, limit))
	}
	return buf.Bytes(), nil
}

// TooLong says why an answer of length bytes (-1: not known) is refused
// over limit: ReadAnswer's words, which the event loops' readers use too.
func TooLong(length, limit int64) string {
	if length >= 0 {
		return fmt.Sprintf("answer of %d bytes exceeds the %d-byte limit", length, limit)
	}
	return fmt.Sprintf("answer exceeds the %d-byte limit", limit)
}

// FinishCanceled is Finish for a request the caller abandoned: the backend
// did nothing wrong, so neither the breaker nor the failure count hear of it.
func (r *Response) FinishCanceled() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	if r.Answer != nil {
		r.Answer.Close()
	}
	r.Backend.Release()
	r.Backend.Breaker().Cancel()
}

// chatPath is the backend path of chat completions.
const chatPath = "/v1/chat/completions"

// Do sends req to a backend chosen by policy, retrying on another backend
// after connection errors and 408/429/5xx answers while attempts and the
// caller's deadline allow. ctx bounds the whole request, body included.
func (g *Gateway) Do(ctx context.Context, req *Request) (*Response, error) {
	var a Attempts
	return g.Resume(ctx, req, &a)
}

// Attempts is where a request's attempts stand: how many were made, the
// backends tried and the last error. A caller that makes the first
// attempt itself (the event-loop HTTP front, which cannot block) starts
// with First and hands the rest to Resume, which goes on as Do would
// have. It must not be copied once used (tried may point into it).
type Attempts struct {
	n       int
	tried   []*backend.Backend
	buf     [4]*backend.Backend // tried's first array, for the usual one or two
	lastErr error
	openAI  []byte
}

// First chooses the backend of the first attempt without waiting: routed,
// acquired and let through by its breaker, as Do's first attempt does. It
// returns nil when that attempt needs a wait (a weight update holds every
// backend) or found no backend, or when the backend chosen is not one the
// caller can send to (can false); Resume then goes on from there. body is
// what to send it.
func (g *Gateway) First(req *Request, a *Attempts, can func(*backend.Backend) bool) (b *backend.Backend, body []byte, epoch int64) {
	a.tried = a.buf[:0]
	a.n = 1
	b = g.pick(req.Model, req.RoutingKey, nil)
	if b == nil {
		if g.updating(req.Model) {
			a.n = 0 // Resume waits for the update, as Do does
		} else {
			g.met.Retries.WithLabelValues("no_backend").Inc()
		}
		return nil, nil, 0
	}
	if (b.Kind() == backend.KindOpenAI && req.OpenAIBody != nil) || !can(b) {
		a.n = 0 // Resume makes the first attempt itself
		return nil, nil, 0
	}
	a.tried = append(a.tried, b)
	if !g.admit(b) {
		return nil, nil, 0
	}
	return b, req.Body, b.Epoch()
}

// admit counts a request in at b and asks b's breaker, as each attempt
// does; false when either refused (and the refusal is counted).
func (g *Gateway) admit(b *backend.Backend) bool {
	if !b.Acquire() {
		g.met.Retries.WithLabelValues("busy").Inc()
		return false
	}
	if !b.Breaker().Allow() {
		b.Release()
		g.met.Retries.WithLabelValues("breaker_open").Inc()
		return false
	}
	return true
}

// Failed records an attempt on b that got no answer (err, after start),
// as Do does before it tries again. When ctx ended (the caller went away
// or ran out of time), it is not the backend's failure: Failed returns
// ctx's error, and the request is over.
func (g *Gateway) Failed(ctx context.Context, a *Attempts, b *backend.Backend, start time.Time, err error) error {
	if ctx.Err() != nil {
		Abandon(b)
		return ctx.Err()
	}
	b.Release()
	g.met.Requests.WithLabelValues(b.ID(), "error").Inc()
	g.met.Retries.WithLabelValues("connection").Inc()
	b.Result(false, time.Since(start), err.Error(), true)
	a.lastErr = fmt.Errorf("%w: backend %s: %v", ErrNoBackend, b.ID(), err)
	return nil
}

// Abandon ends an attempt on b whose caller went away or ran out of time
// before an answer: not the backend's failure, so neither the breaker nor
// the failure count hear of it.
func Abandon(b *backend.Backend) {
	b.Release()
	b.Breaker().Cancel()
}

// Answered records an answer's status from b. It reports whether another
// attempt is due (408, 429, 5xx): the answer is then recorded as failed,
// msg (its start) kept as the last error, and b released. Otherwise the
// caller has the answer and must end it with Response.Finish.
func (g *Gateway) Answered(a *Attempts, b *backend.Backend, start time.Time, code int, msg []byte) (retry bool) {
	if code == http.StatusOK {
		g.counters[b].OK.Inc()
	} else {
		g.met.Requests.WithLabelValues(b.ID(), statusLabel(code)).Inc()
	}
	if !retryable(code) {
		return false
	}
	b.Release()
	// Overload (408, 429) is not breakage: only 5xx trips the breaker.
	b.Result(false, time.Since(start), fmt.Sprintf("status %d", code), code >= 500)
	if code < 500 {
		b.Breaker().Cancel()
	}
	g.met.Retries.WithLabelValues(statusLabel(code)).Inc()
	// msg may be the caller's buffer, reused once this returns.
	a.lastErr = &StatusError{Backend: b.ID(), Code: code, Body: append([]byte(nil), msg...)}
	return true
}

// NewResponse is the Response of an answer the caller read itself (First's
// attempt): Finish ends it, with no Answer to close.
func NewResponse(a *Attempts, b *backend.Backend, start time.Time, epoch int64) *Response {
	return &Response{Backend: b, Attempts: a.n, Start: start, epoch: epoch}
}

// Resume makes the attempts after those a records, until one is answered
// or none is left; Do is Resume from the start.
func (g *Gateway) Resume(ctx context.Context, req *Request, a *Attempts) (*Response, error) {
	if a.tried == nil {
		a.tried = a.buf[:0]
	}
	if a.lastErr == nil {
		a.lastErr = ErrNoBackend
	}
	for a.n < g.cfg.Retry.MaxAttempts {
		a.n++
		if a.n > 1 {
			if err := g.backoff(ctx, a.n); err != nil {
				return nil, g.explain(a.lastErr, req.Model)
			}
		}
		b := g.pick(req.Model, req.RoutingKey, a.tried)
		if b == nil && len(a.tried) > 0 {
			// Every backend failed once; give them another chance.
			a.tried = a.tried[:0]
			b = g.pick(req.Model, req.RoutingKey, a.tried)
		}
		if b == nil && g.updating(req.Model) {
			// A weight update holds every backend: wait for it rather
			// than fail, as long as the caller's deadline allows.
			if err := g.waitUpdate(ctx, req.Model); err != nil {
				return nil, err
			}
			a.n--
			continue
		}
		if b == nil {
			g.met.Retries.WithLabelValues("no_backend").Inc()
			continue
		}
		a.tried = append(a.tried, b)
		body := req.Body
		if b.Kind() == backend.KindOpenAI && req.OpenAIBody != nil {
			if a.openAI == nil {
				var err error
				if a.openAI, err = req.OpenAIBody(); err != nil {
					return nil, err
				}
			}
			body = a.openAI
		}
		if !g.admit(b) {
			continue
		}
		start, epoch := time.Now(), b.Epoch()
		resp, err := b.Send(ctx, chatPath, body, req.RoutingKey)
		if err != nil {
			if err := g.Failed(ctx, a, b, start, err); err != nil {
				return nil, err
			}
			continue
		}
		if g.Answered(a, b, start, resp.StatusCode, nil) {
			// The message is read only now: Answered released b, but
			// the answer is still open.
			msg, _ := io.ReadAll(io.LimitReader(resp, 4096))
			resp.Close()
			a.lastErr.(*StatusError).Body = msg
			continue
		}
		return &Response{Answer: resp, Backend: b, Attempts: a.n, Start: start, epoch: epoch}, nil
	}
	return nil, g.explain(a.lastErr, req.Model)
}

// explain gives a bare ErrNoBackend the last errors of the model's
// backends: when probes or the breaker keep every backend out of routing,
// no attempt reaches one, and "no backend available" alone reads like a
// bad model rather than, say, a connection refused.
func (g *Gateway) explain(err error, model string) error {
	if err != ErrNoBackend {
		return err
	}
	var why []string
	for _, b := range g.byModel[model] {
		if e := b.Snapshot().LastError; e != "" {
			why = append(why, "backend "+b.ID()+": "+e)
		}
	}
	if len(why) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", ErrNoBackend, strings.Join(why, "; "))
}

// updating reports whether a backend of model is being updated.
func (g *Gateway) updating(model string) bool {
	for _, b := range g.byModel[model] {
		if b.Updating() {
			return true
		}
	}
	return false
}

// waitUpdate waits until no backend of model is being updated. Polling is
// fine here: updates are rare and last seconds.
func (g *Gateway) waitUpdate(ctx context.Context, model string) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for g.updating(model) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

var statusLabels = func() map[int]string {
	m := map[int]string{}
	for c := 100; c < 600; c++ {
		m[c] = fmt.Sprint(c)
	}
	return m
}()

func statusLabel(code int) string {
	if s, ok := statusLabels[code]; ok {
		return s
	}
	return "other"
}

// backoff sleeps before attempt, or returns an error when the caller's
// deadline would pass first.
func (g *Gateway) backoff(ctx context.Context, attempt int) error {
	d := g.cfg.Retry.BackoffBase << (attempt - 2)
	if d > g.cfg.Retry.BackoffMax || d <= 0 {
		d = g.cfg.Retry.BackoffMax
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return context.DeadlineExceeded
	}
	// Real time on purpose: the delay is milliseconds, bounded by the
	// caller's deadline, and a test that freezes the injected clock to
	// hold a breaker open must not freeze retries with it.
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// target adapts a backend to routing.Target.
type target = routing.Target

// pick chooses among the model's backends not yet tried: healthy and
// available ones first; if none, available ones whose probes are failing
// (a probe can lag behind a recovered backend).
func (g *Gateway) pick(model, key string, tried []*backend.Backend) *backend.Backend {
	cands := g.byModel[model]
	all := len(tried) == 0
	for _, b := range cands {
		if all && (!b.Healthy() || !b.Available()) {
			all = false
		}
	}
	if all && len(cands) > 0 {
		// The common case: the policy chooses among them all.
		return cands[g.policy.Pick(key, g.targets[model])]
	}
	var ts []target
	for _, needHealthy := range []bool{true, false} {
		ts = ts[:0]
		for _, b := range cands {
			if (needHealthy && !b.Healthy()) || !b.Available() || contains(tried, b) {
				continue
			}
			ts = append(ts, b)
		}
		if len(ts) > 0 {
			return ts[g.policy.Pick(key, ts)].(*backend.Backend)
		}
	}
	return nil
}

func contains(bs []*backend.Backend, b *backend.Backend) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}
