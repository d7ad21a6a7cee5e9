// Package slides implements OSWorld's presentation metrics
// (desktop_env/evaluators/metrics/slides.py) over pptx files read by the
// pptx subpackage, and the Impress settings checks over LibreOffice's
// registrymodifications.xcu.
//
// A Python exception in OSWorld's metric leaves the episode without a
// reward; these metrics score 0 there instead (an unreadable result file
// included), and return an error only when the task's own inputs (its
// rules or reference file) cannot be read, or when a file is over a size
// cap of the pptx reader that python-pptx would read past
// (metric.ErrOverCap).
package slides

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table {
	return metric.Table{
		"compare_pptx_files":                         {Fn: metricComparePptx, Options: compareOptionKeys()},
		"check_slide_orientation_Portrait":           {Fn: metricPortrait},
		"check_presenter_console_disable":            {Fn: metricPresenterConsoleDisabled},
		"check_page_number_colors":                   {Fn: metricPageNumberColors},
		"check_left_panel":                           {Fn: metricLeftPanel},
		"check_auto_saving_time":                     {Fn: metricAutoSaveTime},
		"check_image_stretch_and_center":             {Fn: metricImageStretch},
		"check_transition":                           {Fn: metricTransition},
		"evaluate_presentation_fill_to_rgb_distance": {Fn: metricFillDistance},
	}
}
