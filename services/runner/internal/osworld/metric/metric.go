// Package metric defines the shape of OSWorld's metric functions
// (desktop_env/evaluators/metrics), the helpers they share to read getter
// results with Python's semantics, and the general-purpose metrics (text,
// JSON, lists, the OS checks, Thunderbird's profile files, VS Code's
// settings). Metrics of one application family live in the subpackages
// (table, slides, docs, media, browser); the osworld package joins every
// family's Table into the one registry that the evaluator and `rollout
// tasks check` read.
package metric

import "context"

// Func scores a getter result against an expected value (present when
// hasExpected), with the evaluator's options, in [0, 1]. A nil result
// (Python's None, such as a file the agent never saved) scores 0 in every
// metric, as in OSWorld; an error means the inputs could not be judged,
// such as an input over a size cap of this implementation (ErrOverCap).
// Where a 0 comes from an input that does not open or a point where
// OSWorld's Python raises, the metric says so through its context
// (Because, Notef), for the evaluator details.
type Func func(ctx context.Context, result, expected any, hasExpected bool, options map[string]any) (float64, error)

// Spec is one metric function.
type Spec struct {
	Fn Func
	// Options lists the option keys the function reads, for `rollout tasks
	// check` to report a task using an option this implementation ignores.
	Options []string
}

// Table maps OSWorld's function names (as task files spell them) to specs.
type Table map[string]Spec

// General returns the metrics of this package: those of OSWorld's
// general.py, basic_os.py, thunderbird.py and vscode.py.
func General() Table {
	return Table{
		// general.py
		"exact_match":              {Fn: metricExactMatch},
		"match_in_list":            {Fn: metricMatchInList},
		"is_in_list":               {Fn: metricIsInList},
		"literal_match":            {Fn: metricLiteralMatch, Options: []string{"type", "ignore_case"}},
		"check_include_exclude":    {Fn: metricIncludeExclude},
		"fuzzy_match":              {Fn: metricFuzzyMatch},
		"check_direct_json_object": {Fn: metricDirectJSON},
		"check_list":               {Fn: metricCheckList},
		"check_csv":                {Fn: metricCheckCSV},
		"check_json":               {Fn: metricCheckJSON, Options: []string{"is_yaml"}},
		"check_line_number":        {Fn: metricCheckLineNumber},
		"file_contains":            {Fn: metricFileContains},
		"diff_text_file":           {Fn: metricDiffTextFile},
		"compare_python_pure_text": {Fn: metricComparePythonPureText},
		"fuzzy_place_math":         {Fn: metricFuzzyPlaceMath},
		"run_sqlite3":              {Fn: metricRunSQLite3},
		"check_accessibility_tree": {Fn: metricAccessibilityTree, Options: []string{"osname"}},
		// basic_os.py
		"is_utc_0":                  {Fn: metricIsUTC0},
		"check_gnome_favorite_apps": {Fn: metricGnomeFavoriteApps},
		"check_moved_jpgs":          {Fn: metricMovedJPGs},
		"is_in_vm_clickboard":       {Fn: metricInClipboard},
		// thunderbird.py
		"check_thunderbird_prefs":  {Fn: metricThunderbirdPrefs},
		"check_thunderbird_filter": {Fn: metricThunderbirdFilter},
		"check_thunderbird_folder": {Fn: metricThunderbirdFolder, Options: []string{"remove_deleted", "remove_duplicate", "ignore_status", "ignore_keys"}},
		// vscode.py
		"check_json_settings":             {Fn: metricJSONSettings},
		"check_json_keybindings":          {Fn: metricJSONKeybindings},
		"compare_config":                  {Fn: metricCompareConfig, Options: []string{"containment_ok"}},
		"compare_text_file":               {Fn: metricCompareTextFile, Options: []string{"ignore_blanks", "ignore_case"}},
		"compare_result_files":            {Fn: metricCompareResultFiles},
		"compare_zip_files":               {Fn: metricCompareZipFiles},
		"is_extension_installed":          {Fn: metricExtensionInstalled},
		"check_python_file_by_test_suite": {Fn: metricPythonTestSuite, Options: []string{"test_function_name"}},
	}
}
