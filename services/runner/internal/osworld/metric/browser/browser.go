// Package browser implements OSWorld's Chrome metrics
// (desktop_env/evaluators/metrics/chrome.py): URLs, tabs, bookmarks,
// cookies, history, extensions.
package browser

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table { return metric.Table{} }
