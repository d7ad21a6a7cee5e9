// Package media implements OSWorld's image, audio, video and PDF metrics
// (desktop_env/evaluators/metrics/gimp.py, vlc.py, pdf.py, others.py and the
// PDF comparisons of chrome.py).
package media

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table { return metric.Table{} }
