// Package docs implements OSWorld's document metrics
// (desktop_env/evaluators/metrics/docs.py) over docx, odt and text files.
package docs

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table { return metric.Table{} }
