// Package metrics defines the gateway's Prometheus metrics: requests by
// backend and status, latency and time-to-first-token histograms, tokens in
// and out, in-flight load and health per backend, retries, breaker
// transitions, sticky pin changes and the weight version.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the collectors. All are registered on the registry given to
// New, never on the global one.
type Metrics struct {
	Requests           *prometheus.CounterVec
	Latency            *prometheus.HistogramVec
	TTFT               *prometheus.HistogramVec
	Tokens             *prometheus.CounterVec
	Retries            *prometheus.CounterVec
	BreakerTransitions *prometheus.CounterVec
	Pins               *prometheus.CounterVec
	ModelVersion       prometheus.Gauge
	// ReplicaState is 1 for a launched replica's current state, 0 for the
	// others.
	ReplicaState    *prometheus.GaugeVec
	ReplicaRestarts *prometheus.CounterVec
	// Checkpoints counts checkpoints the watcher acted on, by result
	// (updated, refused, skipped).
	Checkpoints *prometheus.CounterVec
	reg         prometheus.Registerer
}

// latencyBuckets span sub-millisecond gateway answers to minutes-long
// generations.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New creates and registers the metrics.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_requests_total",
			Help: "Backend attempts by backend and outcome (HTTP status code, or error).",
		}, []string{"backend", "status"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelgateway_request_duration_seconds", Help: "Time from receiving a chat request to its full answer, by front (grpc, http).",
			Buckets: latencyBuckets,
		}, []string{"front"}),
		TTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelgateway_time_to_first_token_seconds", Help: "Time from receiving a chat request to its first token, by front.",
			Buckets: latencyBuckets,
		}, []string{"front"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_tokens_total", Help: "Tokens by direction (prompt, completion) and backend, from backend usage reports.",
		}, []string{"backend", "direction"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_retries_total", Help: "Failed backend attempts, each followed by a retry or failover while attempts and deadline allow, by reason (connection, HTTP status code, breaker_open, busy, no_backend).",
		}, []string{"reason"}),
		BreakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_breaker_transitions_total", Help: "Circuit breaker state changes by backend and new state.",
		}, []string{"backend", "to"}),
		Pins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_sticky_pins_total", Help: "Sticky routing changes by event (pin, unpin) and backend.",
		}, []string{"backend", "event"}),
		ModelVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelgateway_model_version", Help: "Weight version the gateway records as current.",
		}),
		ReplicaState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "modelgateway_replica_state", Help: "1 for the current state (starting, ready, backoff, failed, stopped) of each replica the gateway launched.",
		}, []string{"backend", "state"}),
		ReplicaRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_replica_restarts_total", Help: "Restarts of launched replicas after they exited.",
		}, []string{"backend"}),
		Checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgateway_checkpoints_total", Help: "Complete checkpoints the watcher found, by result (updated, refused, skipped).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.Requests, m.Latency, m.TTFT, m.Tokens, m.Retries, m.BreakerTransitions, m.Pins, m.ModelVersion,
		m.ReplicaState, m.ReplicaRestarts, m.Checkpoints} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// Front is one front's latency histograms, looked up once: finding a
// vector's child by its label costs more than the observation.
type Front struct{ Latency, TTFT prometheus.Observer }

// Front returns the histograms of the front named name (grpc, http).
func (m *Metrics) Front(name string) Front {
	return Front{Latency: m.Latency.WithLabelValues(name), TTFT: m.TTFT.WithLabelValues(name)}
}

// BackendCounters are the counters an answered request of a backend
// moves, looked up once.
type BackendCounters struct {
	// OK counts attempts the backend answered with status 200.
	OK prometheus.Counter
	// PromptTokens and CompletionTokens count the tokens of its usage
	// reports.
	PromptTokens, CompletionTokens prometheus.Counter
}

// Backend returns the counters of the backend id.
func (m *Metrics) Backend(id string) *BackendCounters {
	return &BackendCounters{
		OK:               m.Requests.WithLabelValues(id, "200"),
		PromptTokens:     m.Tokens.WithLabelValues(id, "prompt"),
		CompletionTokens: m.Tokens.WithLabelValues(id, "completion"),
	}
}

// BackendGauges registers per-backend gauges read at scrape time, so the hot
// path pays nothing for them.
func (m *Metrics) BackendGauges(id string, inFlight, healthy func() float64) error {
	labels := prometheus.Labels{"backend": id}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgateway_in_flight", Help: "Requests in flight per backend.", ConstLabels: labels}, inFlight),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgateway_backend_healthy", Help: "1 when the backend passes health probes.", ConstLabels: labels}, healthy),
	} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("register backend gauges: %w", err)
		}
	}
	return nil
}
