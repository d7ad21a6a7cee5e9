package pool

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pools' Prometheus metrics. Label values are pool names,
// states and causes only: never lease ids, tokens or holders.
type Metrics struct {
	vms         *prometheus.GaugeVec
	acquireWait *prometheus.HistogramVec
	hold        *prometheus.HistogramVec
	resetDur    *prometheus.HistogramVec
	expirations *prometheus.CounterVec
	quarantines *prometheus.CounterVec
	utilDesc    *prometheus.Desc
	waitersDesc *prometheus.Desc

	mu    sync.Mutex
	pools []*Pool
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		vms: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vmmanager_vms", Help: "VMs by pool and state.",
		}, []string{"pool", "state"}),
		acquireWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vmmanager_acquire_wait_seconds", Help: "Time AcquireLease waited, by outcome (ok, error).",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
		}, []string{"pool", "outcome"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vmmanager_lease_hold_seconds", Help: "How long leases were held.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}, []string{"pool"}),
		resetDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vmmanager_reset_duration_seconds", Help: "Duration of VM resets.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"pool"}),
		expirations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmmanager_lease_expirations_total", Help: "Leases that expired without renewal.",
		}, []string{"pool"}),
		quarantines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vmmanager_quarantines_total", Help: "VMs quarantined, by cause (boot, reset, health).",
		}, []string{"pool", "cause"}),
		utilDesc:    prometheus.NewDesc("vmmanager_utilisation", "Leased share of the pool's size since start, 0 to 1.", []string{"pool"}, nil),
		waitersDesc: prometheus.NewDesc("vmmanager_waiters", "Callers waiting in AcquireLease.", []string{"pool"}, nil),
	}
	for _, c := range []prometheus.Collector{m.vms, m.acquireWait, m.hold, m.resetDur, m.expirations, m.quarantines, m} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) addPool(p *Pool) {
	m.mu.Lock()
	m.pools = append(m.pools, p)
	m.mu.Unlock()
}

// Describe implements prometheus.Collector for the computed gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.utilDesc
	ch <- m.waitersDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	pools := append([]*Pool(nil), m.pools...)
	m.mu.Unlock()
	for _, p := range pools {
		s := p.Stats()
		ch <- prometheus.MustNewConstMetric(m.utilDesc, prometheus.GaugeValue, s.Utilisation, p.spec.Name)
		ch <- prometheus.MustNewConstMetric(m.waitersDesc, prometheus.GaugeValue, float64(s.Waiters), p.spec.Name)
	}
}
