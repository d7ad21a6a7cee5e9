package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics. Episode and queue gauges
// are computed at scrape time from the live state, so the hot path only
// touches histograms and counters.
type Metrics struct {
	dispatchLatency prometheus.Histogram
	leaseWait       prometheus.Histogram
	batchWait       prometheus.Histogram
	staleness       prometheus.Histogram
	episodesDone    prometheus.Counter
	staleResults    prometheus.Counter
	groupsTrimmed   prometheus.Counter

	episodesDesc *prometheus.Desc
	queueDesc    *prometheus.Desc
	runnersDesc  *prometheus.Desc
	versionDesc  *prometheus.Desc

	// Per rollout, computed at scrape time from the rollouts in memory, so
	// a deleted rollout's series go with it.
	rolloutEpisodesDesc *prometheus.Desc
	successRateDesc     *prometheus.Desc
	scoreDesc           *prometheus.Desc
	stepsDesc           *prometheus.Desc
	failuresDesc        *prometheus.Desc

	e *Engine
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		dispatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinator_dispatch_latency_seconds", Help: "Time from an episode being queued to its runner slot being reserved.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}),
		leaseWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinator_lease_wait_seconds", Help: "Time spent acquiring a VM lease.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		batchWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinator_batch_wait_seconds", Help: "Time GetBatch waited before handing out a batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		staleness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinator_batch_episode_staleness_versions", Help: "Model versions between an episode's start and the batch hand-out.",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32}}),
		episodesDone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinator_episodes_done_total", Help: "Episodes finished DONE and committed."}),
		staleResults: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinator_stale_results_total", Help: "Results ignored because the runner no longer held the episode."}),
		groupsTrimmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinator_batch_groups_trimmed_total", Help: "Groups handed out without some episode fields (omitted_fields), their batch too large for one answer with them."}),
		episodesDesc: prometheus.NewDesc("coordinator_episodes", "Episodes by state.", []string{"state"}, nil),
		queueDesc:    prometheus.NewDesc("coordinator_queue_depth", "Episodes queued for a runner slot.", nil, nil),
		runnersDesc:  prometheus.NewDesc("coordinator_runners", "Connected runners.", nil, nil),
		versionDesc:  prometheus.NewDesc("coordinator_model_version", "Model version in force.", nil, nil),
		rolloutEpisodesDesc: prometheus.NewDesc("coordinator_rollout_episodes",
			"Episodes of a rollout by status.", []string{"rollout", "status"}, nil),
		successRateDesc: prometheus.NewDesc("coordinator_rollout_success_rate",
			"Share of a rollout's DONE episodes that scored 0.5 or more.", []string{"rollout"}, nil),
		scoreDesc: prometheus.NewDesc("coordinator_rollout_score",
			"Scores of a rollout's DONE episodes (failed episodes have no score).", []string{"rollout"}, nil),
		stepsDesc: prometheus.NewDesc("coordinator_rollout_steps_per_episode",
			"Steps of a rollout's DONE episodes.", []string{"rollout"}, nil),
		failuresDesc: prometheus.NewDesc("coordinator_rollout_failed_episodes",
			"Episodes of a rollout failed for good, by failure reason.", []string{"rollout", "reason"}, nil),
	}
	if reg != nil {
		reg.MustRegister(m.dispatchLatency, m.leaseWait, m.batchWait, m.staleness, m.episodesDone, m.staleResults, m.groupsTrimmed, m)
	}
	return m
}

func (m *Metrics) attach(e *Engine) { m.e = e }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.episodesDesc
	ch <- m.queueDesc
	ch <- m.runnersDesc
	ch <- m.versionDesc
	ch <- m.rolloutEpisodesDesc
	ch <- m.successRateDesc
	ch <- m.scoreDesc
	ch <- m.stepsDesc
	ch <- m.failuresDesc
}

// rolloutSample is what one scrape reads of a rollout under the lock.
type rolloutSample struct {
	id                                     string
	queued, running, done, failed, aborted int64
	successes                              int64
	scoreCounts, stepCounts                map[float64]uint64
	scoreSum, stepSum                      float64
	scoreN, stepN                          uint64
	failures                               map[string]int64
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	e := m.e
	if e == nil {
		return
	}
	e.mu.Lock()
	var queued, running, done, failed, aborted int64
	samples := make([]rolloutSample, 0, len(e.order))
	for _, r := range e.order {
		queued += r.queued
		running += r.running
		done += r.done
		failed += r.failed
		aborted += r.aborted
		o := &r.outcomes
		s := rolloutSample{id: r.id, queued: r.queued, running: r.running, done: r.done, failed: r.failed,
			aborted: r.aborted, successes: r.successes,
			scoreCounts: o.scores.cumulative(scoreBuckets), scoreSum: o.scores.sum, scoreN: o.scores.n,
			stepCounts: o.steps.cumulative(stepBuckets), stepSum: o.steps.sum, stepN: o.steps.n,
			failures: make(map[string]int64, len(o.failures))}
		for k, v := range o.failures {
			s.failures[k] = v
		}
		samples = append(samples, s)
	}
	runners := len(e.runners)
	v := e.modelVersion
	e.mu.Unlock()
	for st, n := range map[string]int64{"queued": queued, "running": running, "done": done, "failed": failed, "aborted": aborted} {
		ch <- prometheus.MustNewConstMetric(m.episodesDesc, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(m.queueDesc, prometheus.GaugeValue, float64(queued))
	ch <- prometheus.MustNewConstMetric(m.runnersDesc, prometheus.GaugeValue, float64(runners))
	ch <- prometheus.MustNewConstMetric(m.versionDesc, prometheus.GaugeValue, float64(v))
	for _, s := range samples {
		for st, n := range map[string]int64{"queued": s.queued, "running": s.running, "done": s.done, "failed": s.failed, "aborted": s.aborted} {
			ch <- prometheus.MustNewConstMetric(m.rolloutEpisodesDesc, prometheus.GaugeValue, float64(n), s.id, st)
		}
		if s.done > 0 {
			ch <- prometheus.MustNewConstMetric(m.successRateDesc, prometheus.GaugeValue, float64(s.successes)/float64(s.done), s.id)
		}
		ch <- prometheus.MustNewConstHistogram(m.scoreDesc, s.scoreN, s.scoreSum, s.scoreCounts, s.id)
		ch <- prometheus.MustNewConstHistogram(m.stepsDesc, s.stepN, s.stepSum, s.stepCounts, s.id)
		for reason, n := range s.failures {
			ch <- prometheus.MustNewConstMetric(m.failuresDesc, prometheus.GaugeValue, float64(n), s.id, reason)
		}
	}
}
