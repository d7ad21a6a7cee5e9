// Package metric defines the shape of OSWorld's metric functions
// (desktop_env/evaluators/metrics), the helpers they share to read getter
// results with Python's semantics, and the general-purpose metrics (text,
// JSON, lists, the OS checks). Metrics of one application family live in the
// subpackages (table, slides, docs, media, browser); the osworld package
// joins every family's Table into the one registry that the evaluator and
// `rollout tasks check` read.
package metric

// Func scores a getter result against an expected value (present when
// hasExpected), with the evaluator's options, in [0, 1]. A nil result
// (Python's None, such as a file the agent never saved) scores 0 in every
// metric, as in OSWorld; an error means the inputs could not be judged.
type Func func(result, expected any, hasExpected bool, options map[string]any) (float64, error)

// Spec is one metric function.
type Spec struct {
	Fn Func
	// Options lists the option keys the function reads, for `rollout tasks
	// check` to report a task using an option this implementation ignores.
	Options []string
}

// Table maps OSWorld's function names (as task files spell them) to specs.
type Table map[string]Spec

// General returns the metrics of this package.
func General() Table {
	return Table{
		"exact_match":               {Fn: metricExactMatch},
		"literal_match":             {Fn: metricLiteralMatch, Options: []string{"ignore_case"}},
		"check_include_exclude":     {Fn: metricIncludeExclude},
		"match_in_list":             {Fn: metricMatchInList},
		"fuzzy_match":               {Fn: metricFuzzyMatch},
		"check_direct_json_object":  {Fn: metricDirectJSON},
		"compare_text_file":         {Fn: metricCompareTextFile, Options: []string{"ignore_blanks", "ignore_case"}},
		"check_list":                {Fn: metricCheckList},
		"is_utc_0":                  {Fn: metricIsUTC0},
		"check_command_output":      {Fn: metricCheckCommandOutput},
		"check_file_content_equals": {Fn: metricFileContentEquals},
	}
}
