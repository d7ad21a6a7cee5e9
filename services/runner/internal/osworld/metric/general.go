package metric

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	// The pure-Go SQLite driver, for run_sqlite3.
	_ "modernc.org/sqlite"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/pyre"
)

// Bool is Python's float(b): 1 for true, 0 for false.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Rules returns the expected value as a rules dict (the "rule" getter's
// output).
func Rules(expected any) (map[string]any, error) {
	m, ok := expected.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected must be a rules object")
	}
	return m, nil
}

// Strings returns the strings of a JSON list (other entries are skipped).
func Strings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// MaxFile bounds a file read by a metric.
const MaxFile = 64 << 20

// ReadText reads a local file named by a getter result (a path string):
// ok is false when v is not a path or the file does not exist (Python's
// None, which metrics score 0); the read is capped at MaxFile, and a
// larger file is an error wrapping ErrOverCap.
func ReadText(v any) (string, bool, error) {
	p, ok := v.(string)
	if !ok || p == "" {
		return "", false, nil
	}
	if _, err := os.Stat(p); err != nil {
		return "", false, nil
	}
	// Stat's size says nothing for a FIFO or a device: the read is capped.
	b, err := boundedread.ReadFile(p, MaxFile)
	if oc := OverCap(err); oc != nil {
		return "", false, oc
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// The metrics of OSWorld's metrics/general.py. Where the Python raises on
// an input the agent produced (a result that is not JSON, a list where a
// string was due), the metric scores 0, as the function's own exception
// handlers do elsewhere; an error is kept for inputs the task file itself
// got wrong.

// metricExactMatch is result == rules["expected"].
func metricExactMatch(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	exp, ok := r["expected"]
	if !ok {
		return 0, fmt.Errorf("exact_match: rules without expected")
	}
	return Bool(PyEqual(result, exp)), nil
}

// metricMatchInList is result in rules["expected"].
func metricMatchInList(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	in, err := PyIn(result, r["expected"])
	if err != nil {
		return 0, Because(ctx, err)
	}
	return Bool(in), nil
}

// metricIsInList is rules["expected"] in result (the reverse of
// match_in_list: the result is the list).
func metricIsInList(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	in, err := PyIn(r["expected"], result)
	if err != nil {
		return 0, Because(ctx, err)
	}
	return Bool(in), nil
}

// metricLiteralMatch compares str(result) with str(expected) (option type
// "str", the default), or two lists element by element (type "list"),
// optionally ignoring case.
func metricLiteralMatch(_ context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	ic, _ := opts["ignore_case"].(bool)
	norm := func(v any) string {
		if ic {
			return PyLower(PyStr(v))
		}
		return PyStr(v)
	}
	typ := "str"
	if t, ok := opts["type"]; ok {
		typ, _ = t.(string)
	}
	switch typ {
	case "str":
		return Bool(norm(result) == norm(expected)), nil
	case "list":
		a, ok1 := pyList(result)
		b, ok2 := pyList(expected)
		if !ok1 || !ok2 || len(a) != len(b) {
			return 0, nil
		}
		for i := range a {
			if norm(a[i]) != norm(b[i]) {
				return 0, nil
			}
		}
		return 1, nil
	}
	return 0, fmt.Errorf("literal_match: type %v is not supported", opts["type"])
}

// metricIncludeExclude needs every include entry in the result and no
// exclude entry (substrings of a string result, members of a list).
func metricIncludeExclude(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if result == nil {
		return 0, nil
	}
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	inc, err := pyIter(r["include"])
	if err != nil {
		return 0, Because(ctx, err)
	}
	exc, err := pyIter(r["exclude"])
	if err != nil {
		return 0, Because(ctx, err)
	}
	for _, e := range inc {
		if in, err := PyIn(e, result); err != nil || !in {
			return 0, Because(ctx, err)
		}
	}
	for _, e := range exc {
		if in, err := PyIn(e, result); err != nil || in {
			return 0, Because(ctx, err)
		}
	}
	return 1, nil
}

// metricFuzzyMatch is rapidfuzz's fuzz.ratio(result, rules["expected"])/100.
func metricFuzzyMatch(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	a, ok1 := result.(string)
	b, ok2 := r["expected"].(string)
	if !ok1 || !ok2 {
		return 0, nil
	}
	return IndelRatio(ctx, a, b)
}

// evaluationFailed is the value a rule getter puts in an expected dict
// when it could not compute it (relative dates, web lookups).
const evaluationFailed = "__EVALUATION_FAILED__"

// metricDirectJSON compares a dict result key by key with
// rules["expected"]. A string result is read as JSON after turning every
// single quote into a double quote, as OSWorld does. With
// expect_in_result, a list expectation needs one of its values in (or
// equal to) the result's, and a string expectation must be in the
// result's value.
func metricDirectJSON(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	if s, ok := result.(string); ok {
		var v any
		if json.Unmarshal([]byte(strings.ReplaceAll(PyStrip(s), "'", `"`)), &v) != nil {
			// Python's json.loads raises here, before the function's own
			// handler; an output that is not JSON is the agent's failure.
			return 0, nil
		}
		result = v
	}
	if result == nil {
		return 0, nil
	}
	// Any Python exception below (a result that is not a dict, an
	// expectation that is not one) is caught by OSWorld and scores 0.
	exp, ok := pyDict(r["expected"])
	if !ok {
		return 0, nil
	}
	for _, v := range exp {
		if v == evaluationFailed {
			return 0, nil
		}
	}
	if len(exp) == 0 {
		// OSWorld's loops have no key to read from the result.
		return 1, nil
	}
	res, ok := pyDict(result)
	if !ok {
		return 0, nil
	}
	inResult := r["expect_in_result"]
	if !Truthy(inResult) {
		// OSWorld looks for ignore_list_order among the expected keys (not
		// in the rules, where one task puts it): keep that.
		sortLists := Truthy(exp["ignore_list_order"])
		for k, ev := range exp {
			rv := res[k]
			if sortLists {
				es, err1 := pySorted(ev)
				rs, err2 := pySorted(rv)
				if err := cmp.Or(err1, err2); err != nil {
					return 0, Because(ctx, err)
				}
				ev, rv = es, rs
			}
			if !PyEqual(ev, rv) {
				return 0, nil
			}
		}
		return 1, nil
	}
	for k, ev := range exp {
		rv := res[k]
		switch e := ev.(type) {
		case string:
			in, err := PyIn(e, rv)
			if err != nil || !in {
				return 0, Because(ctx, err)
			}
		default:
			l, ok := pyList(ev)
			if !ok {
				return 0, nil
			}
			found := false
			for _, each := range l {
				if _, isList := pyList(rv); isList {
					in, _ := PyIn(each, rv)
					found = in
				} else if s, isStr := rv.(string); isStr {
					found = PyEqual(each, s)
				}
				if found {
					break
				}
			}
			if !found {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// Truthy is Python's bool(v) for JSON-like values and getter results:
// task files write "multi": "true" as often as true, and OSWorld only
// tests the value's truth.
func Truthy(v any) bool {
	if v == nil {
		return false
	}
	if n, ok := pyNumber(v); ok {
		return n != 0
	}
	if s, ok := v.(string); ok {
		return s != ""
	}
	if l, ok := pyList(v); ok {
		return len(l) > 0
	}
	if m, ok := pyDict(v); ok {
		return len(m) > 0
	}
	return true
}

// collapseBlanks is compare_text_file's ignore_blanks: tabs and newlines
// become spaces, the ends are stripped, and runs of whitespace (Python's
// Unicode \s) become one space.
func collapseBlanks(s string) string {
	var b strings.Builder
	space := false
	for _, r := range PyStrip(strings.NewReplacer("\t", " ", "\n", " ").Replace(s)) {
		if PyIsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// readTextPair reads the result and expected files as Python text. ok is
// false when the result is missing or not UTF-8 (scored 0); an expected
// file that is missing or unreadable is an error, since Python raises.
func readTextPair(ctx context.Context, result, expected any) (a, b string, ok bool, err error) {
	a, ok, err = readPyFile(ctx, result)
	if err != nil || !ok {
		return "", "", false, err
	}
	b, ok, err = ReadPyText(expected)
	if err != nil {
		return "", "", false, err
	}
	if !ok {
		return "", "", false, fmt.Errorf("expected file %v missing", expected)
	}
	return a, b, true, nil
}

// metricCompareTextFile compares two text files (options ignore_blanks,
// ignore_case).
func metricCompareTextFile(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	a, b, ok, err := readTextPair(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	if ib, _ := opts["ignore_blanks"].(bool); ib {
		a, b = collapseBlanks(a), collapseBlanks(b)
	}
	if ic, _ := opts["ignore_case"].(bool); ic {
		a, b = PyLower(a), PyLower(b)
	}
	return Bool(a == b), nil
}

// compilePatterns compiles Python patterns.
func compilePatterns(l []string) ([]*pyre.Regexp, error) {
	out := make([]*pyre.Regexp, 0, len(l))
	for _, p := range l {
		re, err := pyre.Compile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// searchAny tells whether any pattern re.search-es s.
func searchAny(res []*pyre.Regexp, s string) (bool, error) {
	for _, re := range res {
		m, err := re.Search(s)
		if err != nil {
			return false, err
		}
		if m != nil {
			return true, nil
		}
	}
	return false, nil
}

// metricCheckList checks a file's lines (each with its newline, as Python
// iterates a file) against rules["expect"] patterns, each of which must
// re.search some line, and rules["unexpect"] patterns, which no line may
// match.
func metricCheckList(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := readPyFile(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	exp, err := compilePatterns(Strings(r["expect"]))
	if err != nil {
		return 0, err
	}
	unexp, err := compilePatterns(Strings(r["unexpect"]))
	if err != nil {
		return 0, err
	}
	seen := make([]bool, len(exp))
	for _, line := range pyLines(text) {
		// Each search may backtrack up to pyre.MatchTimeout, and a file
		// holds millions of lines.
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for i, re := range exp {
			if seen[i] {
				continue
			}
			m, err := re.Search(line)
			if err != nil {
				return 0, err
			}
			seen[i] = m != nil
		}
		hit, err := searchAny(unexp, line)
		if err != nil {
			return 0, err
		}
		if hit {
			return 0, nil
		}
	}
	return Bool(!slices.Contains(seen, false)), nil
}

// metricCheckCSV reads a CSV file as csv.DictReader does (the first row
// names the fields) and scores it with expectRecords.
func metricCheckCSV(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	return expectRecords(ctx, result, expected, dictRows)
}

// dictList is a rules list of objects (records, key rules); an entry that
// is no object reads as an empty one.
func dictList(v any) []map[string]any {
	var out []map[string]any
	l, _ := pyList(v)
	for _, e := range l {
		m, _ := pyDict(e)
		out = append(out, m)
	}
	return out
}

// expectRecords is the check that check_csv and check_thunderbird_filter
// share: for each rules["expect"] record some row of the file (as parse
// reads it) holds its key/value pairs, and no row holds any
// rules["unexpect"] record's. A missing, undecodable or unparsable file
// scores 0.
func expectRecords(ctx context.Context, result, expected any, parse func(text string) ([]map[string]any, error)) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	exp, unexp := dictList(r["expect"]), dictList(r["unexpect"])
	text, ok, err := readPyFile(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	rows, err := parse(text)
	if err != nil {
		return 0, Because(ctx, err)
	}
	seen := make([]bool, len(exp))
	for _, row := range rows {
		for i, e := range exp {
			seen[i] = seen[i] || MatchRecord(e, row)
		}
		for _, u := range unexp {
			if MatchRecord(u, row) {
				return 0, nil
			}
		}
	}
	return Bool(!slices.Contains(seen, false)), nil
}

// metricCheckJSON reads a JSON file (a YAML one with option is_yaml) and
// checks the value at each rule's key path with MatchValueToRule:
// rules["expect"] must all match, rules["unexpect"] none (a missing key
// is None there).
func metricCheckJSON(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := readPyFile(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	var data any
	if isYAML, _ := opts["is_yaml"].(bool); isYAML {
		if data, err = loadPyYAML(text); errors.Is(err, ErrYAMLUnsupported) {
			return 0, fmt.Errorf("check_json: %v: %w", result, err)
		} else if err != nil {
			return 0, Because(ctx, fmt.Errorf("%v is not YAML as PyYAML's safe_load reads it: %w", result, err))
		}
		if data == nil {
			return 0, nil
		}
	} else if err := json.Unmarshal([]byte(text), &data); err != nil {
		return 0, Because(ctx, fmt.Errorf("%v is not JSON: %w", result, err))
	}
	match := true
	for _, rule := range dictList(r["expect"]) {
		v, st := lookupKeys(data, rule["key"])
		if st != keyFound {
			return 0, nil
		}
		if match {
			m, err := MatchValueToRule(v, rule)
			if err != nil {
				return 0, RuleErr(ctx, err)
			}
			match = m
		}
	}
	for _, rule := range dictList(r["unexpect"]) {
		v, st := lookupKeys(data, rule["key"])
		if st == keyOutOfRange {
			return 0, nil
		}
		if match {
			m, err := MatchValueToRule(v, rule)
			if err != nil {
				return 0, RuleErr(ctx, err)
			}
			match = !m
		}
	}
	return Bool(match), nil
}

// keyLookup is how a key path walk ended.
type keyLookup int

const (
	keyFound keyLookup = iota
	// keyMissing is Python's KeyError or TypeError (a key of the wrong
	// type, a value that cannot be indexed).
	keyMissing
	// keyOutOfRange is Python's IndexError, which check_json's unexpect
	// loop does not catch where it catches the others.
	keyOutOfRange
)

// lookupKeys walks a key path (dict keys, list indices, characters of a
// string) as value[k] does.
func lookupKeys(v any, keys any) (any, keyLookup) {
	l, ok := pyList(keys)
	if !ok {
		return nil, keyMissing
	}
	index := func(n int, k any) (int, keyLookup) {
		f, ok := k.(float64)
		if !ok || f != math.Trunc(f) {
			return 0, keyMissing
		}
		i := int(f)
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return 0, keyOutOfRange
		}
		return i, keyFound
	}
	for _, k := range l {
		switch c := v.(type) {
		case map[string]any:
			s, ok := k.(string)
			if !ok {
				return nil, keyMissing
			}
			if v, ok = c[s]; !ok {
				return nil, keyMissing
			}
		case []any:
			i, st := index(len(c), k)
			if st != keyFound {
				return nil, st
			}
			v = c[i]
		case string:
			rs := []rune(c)
			i, st := index(len(rs), k)
			if st != keyFound {
				return nil, st
			}
			v = string(rs[i])
		default:
			return nil, keyMissing
		}
	}
	return v, keyFound
}

// timeOfDay is check_line_number's pattern for an HH:MM:SS time (Python's
// \d, which also takes other scripts' digits).
var timeOfDay = mustPyre(`([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)`)

func mustPyre(p string) *pyre.Regexp {
	re, err := pyre.Compile(p)
	if err != nil {
		panic(err)
	}
	return re
}

// metricCheckLineNumber counts the lines holding a time of day and
// compares the count with int(rules["expected"]).
func metricCheckLineNumber(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	count := 0
	for _, line := range pyLines(text) {
		m, err := timeOfDay.Search(line)
		if err != nil {
			// Only a match past pyre.MatchTimeout on a huge line.
			return 0, err
		}
		if m != nil {
			count++
		}
	}
	want, ok := pyInt(r["expected"])
	if !ok {
		return 0, nil
	}
	return Bool(count == want), nil
}

// pyInt is Python's int(v) for a string or a number.
func pyInt(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		n, err := strconv.Atoi(strings.ReplaceAll(PyStrip(x), "_", ""))
		return n, err == nil
	case bool:
		return int(Bool(x)), true
	case float64:
		return int(x), !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return 0, false
}

// metricFileContains needs every rules["expected"] string in the file.
func metricFileContains(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	e, ok := r["expected"]
	if !ok {
		// Python's KeyError, which file_contains catches.
		return 0, nil
	}
	want, err := pyIter(e)
	if err != nil {
		return 0, Because(ctx, err)
	}
	for _, w := range want {
		if in, err := PyIn(w, text); err != nil || !in {
			return 0, Because(ctx, err)
		}
	}
	return 1, nil
}

// metricDiffTextFile is difflib's SequenceMatcher ratio between the two
// files' lines: a fraction.
func metricDiffTextFile(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := readTextPair(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	ratio, err := SequenceRatio(ctx, SplitLines(a), SplitLines(b))
	if err != nil {
		return 0, fmt.Errorf("diff_text_file: %w", err)
	}
	return ratio, nil
}

// metricComparePythonPureText compares two Python sources after dropping
// a shebang or coding line among the first three lines and blank lines,
// expanding tabs to 4 columns and trimming line ends.
func metricComparePythonPureText(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	a, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	b, ok, err := ReadPyText(expected)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	return Bool(normalizePython(a) == normalizePython(b)), nil
}

func normalizePython(text string) string {
	lines := SplitLines(text)
	i := 0
	for i < len(lines) && i < 3 {
		s := PyStrip(lines[i])
		if strings.HasPrefix(s, "#!") || strings.HasPrefix(s, "# -*- coding:") ||
			strings.HasPrefix(s, "# coding:") || strings.HasPrefix(s, "# coding=") {
			i++
			continue
		}
		break
	}
	var out []string
	for ; i < len(lines); i++ {
		if PyStrip(lines[i]) != "" {
			out = append(out, strings.TrimRightFunc(expandTabs(lines[i], 4), PyIsSpace))
		}
	}
	return strings.Join(out, "\n")
}

// expandTabs is Python's str.expandtabs(size) for a line without line
// breaks: each tab pads to the next multiple of size (in characters).
func expandTabs(s string, size int) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		if r == '\t' {
			n := size - col%size
			b.WriteString(strings.Repeat(" ", n))
			col += n
			continue
		}
		b.WriteRune(r)
		col++
	}
	return b.String()
}

// metricFuzzyPlaceMath reads the words of a .docx (its body paragraphs
// split on whitespace) and, when there are exactly three, averages each
// word's best fuzz.ratio against the rules["expected"] answers.
func metricFuzzyPlaceMath(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	if !fileExists(result) {
		return 0, nil
	}
	paras, err := docxParagraphs(result.(string))
	if err != nil {
		return 0, Because(ctx, err)
	}
	var words []string
	for _, p := range paras {
		words = append(words, pySplit(p)...)
	}
	if len(words) != 3 {
		return 0, nil
	}
	answers := Strings(r["expected"])
	sum := 0.0
	for _, w := range words {
		best := 0.0
		for _, a := range answers {
			r, err := IndelRatio(ctx, w, a)
			if err != nil {
				return 0, err
			}
			best = max(best, r)
		}
		sum += best
	}
	return sum / 3, nil
}

// sqliteTimeout bounds run_sqlite3's query (a variable for the test).
var sqliteTimeout = 20 * time.Second

// metricRunSQLite3 runs rules["sql"] on the result database (read-only)
// and returns the first column of the first row as a number; NULL, 0 and
// an empty value score 0. The number is OSWorld's score as is, so a query
// that counts rows can score past 1: the published task's query is a 0/1
// comparison.
func metricRunSQLite3(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	q, ok := r["sql"].(string)
	if !ok {
		return 0, fmt.Errorf("run_sqlite3: rules without sql")
	}
	if !fileExists(result) {
		return 0, nil
	}
	u := url.URL{Scheme: "file", Path: result.(string), RawQuery: "mode=ro"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return 0, fmt.Errorf("run_sqlite3: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, sqliteTimeout)
	defer cancel()
	var v any
	if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		// Python raises on a database it cannot read or a query without a
		// row: the agent's database did not hold what the task asks.
		return 0, Because(ctx, err)
	}
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	case bool:
		return Bool(x), nil
	case []byte:
		v = string(x)
	}
	s, _ := v.(string)
	if s == "" {
		return 0, nil
	}
	f, err := PyFloat(s)
	if err != nil {
		return 0, Because(ctx, err)
	}
	return f, nil
}
