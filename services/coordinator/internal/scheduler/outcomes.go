package scheduler

import (
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// scoreBuckets and stepBuckets are the upper bounds of the per-rollout
// score and steps-per-episode histograms the metrics export.
var (
	scoreBuckets = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	stepBuckets  = []float64{1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100}
)

const (
	// maxReasons bounds the distinct failure reasons a rollout reports, so
	// that a runner inventing reasons cannot grow the metrics without end.
	maxReasons = 32
	// maxReasonLen bounds one reason's length in a label.
	maxReasonLen = 64
	otherReason  = "other"
)

// outcomes are what a rollout's finished episodes add up to: the score and
// steps histograms of DONE episodes and the failure reasons of episodes
// failed for good. The metrics read them at scrape time, so a rollout's
// series live exactly as long as the rollout does.
type outcomes struct {
	scores   histCounts
	steps    histCounts
	failures map[string]int64
}

// histCounts are non-cumulative bucket counts; the last slot counts values
// above every bound.
type histCounts struct {
	counts []uint64
	sum    float64
	n      uint64
}

func (h *histCounts) observe(bounds []float64, v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

// cumulative returns the counts per upper bound as Prometheus wants them.
func (h *histCounts) cumulative(bounds []float64) map[float64]uint64 {
	out := make(map[float64]uint64, len(bounds))
	var acc uint64
	for i, b := range bounds {
		if h.counts != nil {
			acc += h.counts[i]
		}
		out[b] = acc
	}
	return out
}

func (o *outcomes) done(res *pb.Episode) {
	o.scores.observe(scoreBuckets, res.GetScore())
	o.steps.observe(stepBuckets, float64(res.GetNumSteps()))
}

func (o *outcomes) failed(res *pb.Episode) {
	reason := res.GetFailureReason()
	if reason == "" {
		reason = "unknown"
	}
	reason = strings.ToValidUTF8(reason, "?")
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen]
	}
	if o.failures == nil {
		o.failures = map[string]int64{}
	}
	if _, ok := o.failures[reason]; !ok && len(o.failures) >= maxReasons {
		reason = otherReason
	}
	o.failures[reason]++
}
