// Package slides implements OSWorld's presentation metrics
// (desktop_env/evaluators/metrics/slides.py) over pptx files read by the
// pptx subpackage, and the Impress settings checks over LibreOffice's
// registrymodifications.xcu.
//
// A Python exception in OSWorld's metric leaves the episode without a
// reward; these metrics score 0 there instead (an unreadable result file
// included), and return an error only when the task's own inputs (its
// rules or reference file) cannot be read.
package slides
