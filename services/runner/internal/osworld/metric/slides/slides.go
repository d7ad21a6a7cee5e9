// Package slides implements OSWorld's presentation metrics
// (desktop_env/evaluators/metrics/slides.py) over pptx files.
package slides

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table { return metric.Table{} }
