package storage

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics records ingest and read-path measurements in the service's
// registry.
type metrics struct {
	steps, duplicates, blobBytes prometheus.Counter
	commitSeconds, commitSteps   prometheus.Histogram
	blobCorrupt                  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "rolloutmesh_storage_steps_acked_total",
			Help: "Steps acknowledged by AppendSteps, duplicates included."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "rolloutmesh_storage_duplicate_steps_total",
			Help: "Acknowledged steps that were already stored."}),
		blobBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "rolloutmesh_storage_blob_bytes_written_total",
			Help: "Blob bytes newly written (content already stored is not written again)."}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rolloutmesh_storage_commit_seconds",
			Help: "Duration of group commits.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		commitSteps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rolloutmesh_storage_commit_steps",
			Help: "Steps per group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		blobCorrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "rolloutmesh_storage_blob_corrupt_total",
			Help: "Reads refused with DataLoss because the stored blob was damaged (content not hashing to its key, truncated or missing)."}),
	}
	for _, c := range []prometheus.Collector{m.steps, m.duplicates, m.blobBytes, m.commitSeconds, m.commitSteps, m.blobCorrupt} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register storage metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) Committed(_, steps int, took time.Duration) {
	m.commitSeconds.Observe(took.Seconds())
	m.commitSteps.Observe(float64(steps))
}

func (m *metrics) BlobWritten(n int) { m.blobBytes.Add(float64(n)) }

func (m *metrics) Appended(steps, duplicates int) {
	m.steps.Add(float64(steps))
	m.duplicates.Add(float64(duplicates))
}

func (m *metrics) BlobCorrupt() { m.blobCorrupt.Inc() }
