package osworld

import (
	"maps"
	"slices"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/browser"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/docs"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/media"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/table"
)

// The registries: one table per family of steps, getters and metrics,
// joined here so that the evaluator, Task.Unsupported and `rollout tasks
// check` read the same names. A name in two tables is a bug that
// TestRegistriesDisjoint catches.
var (
	stepTables   = []map[string]stepFunc{coreSteps, appSteps, chromeSteps, googleSteps}
	getterTables = []map[string]getterFunc{coreGetters, appGetters, chromeGetters, googleGetters}
	metricTables = []metric.Table{metric.General(), table.Metrics(), slides.Metrics(), docs.Metrics(), media.Metrics(), browser.Metrics()}

	stepHandlers = join(stepTables)
	getters      = join(getterTables)
	metrics      = join(metricTables)
)

func join[M ~map[string]V, V any](tables []M) map[string]V {
	out := map[string]V{}
	for _, t := range tables {
		maps.Copy(out, t)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// SupportedSteps lists the step types this package runs.
func SupportedSteps() []string { return sortedKeys(stepHandlers) }

// SupportedGetters lists the getter types this package has.
func SupportedGetters() []string { return sortedKeys(getters) }

// SupportedMetrics lists the metric names this package has, "infeasible"
// (scored by the evaluator itself) included.
func SupportedMetrics() []string { return append(sortedKeys(metrics), "infeasible") }

// MetricOptions returns the option keys a metric reads, and whether the
// metric exists.
func MetricOptions(name string) ([]string, bool) {
	if name == "infeasible" {
		return nil, true
	}
	s, ok := metrics[name]
	return s.Options, ok
}
