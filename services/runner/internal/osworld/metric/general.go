package metric

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
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

// metricExactMatch is result == rules["expected"].
func metricExactMatch(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	if result == nil {
		return 0, nil
	}
	return Bool(reflect.DeepEqual(result, r["expected"])), nil
}

// metricLiteralMatch compares result with the expected value itself,
// optionally ignoring case.
func metricLiteralMatch(result, expected any, _ bool, opts map[string]any) (float64, error) {
	if result == nil {
		return 0, nil
	}
	rs, ok1 := result.(string)
	es, ok2 := expected.(string)
	if ok1 && ok2 {
		if ic, _ := opts["ignore_case"].(bool); ic {
			return Bool(strings.EqualFold(rs, es)), nil
		}
		return Bool(rs == es), nil
	}
	return Bool(reflect.DeepEqual(result, expected)), nil
}

// metricIncludeExclude needs every include substring and no exclude one.
func metricIncludeExclude(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	for _, inc := range Strings(r["include"]) {
		if !strings.Contains(s, inc) {
			return 0, nil
		}
	}
	for _, exc := range Strings(r["exclude"]) {
		if strings.Contains(s, exc) {
			return 0, nil
		}
	}
	return 1, nil
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

// metricMatchInList is result in rules["expected"].
func metricMatchInList(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	l, _ := r["expected"].([]any)
	return Bool(result != nil && slices.ContainsFunc(l, func(e any) bool { return reflect.DeepEqual(e, result) })), nil
}

// metricFuzzyMatch is rapidfuzz's fuzz.ratio(result, expected)/100: the
// normalised Indel similarity 2·LCS/(|a|+|b|).
func metricFuzzyMatch(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	a, _ := result.(string)
	b, _ := r["expected"].(string)
	if result == nil {
		return 0, nil
	}
	return IndelRatio(a, b), nil
}

// maxRatioRunes bounds the quadratic LCS.
const maxRatioRunes = 5000

// IndelRatio is 2·LCS(a,b)/(|a|+|b|) over runes (1 for two empty strings).
func IndelRatio(a, b string) float64 {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > maxRatioRunes {
		ra = ra[:maxRatioRunes]
	}
	if len(rb) > maxRatioRunes {
		rb = rb[:maxRatioRunes]
	}
	if len(ra)+len(rb) == 0 {
		return 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			if ra[i-1] == rb[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return 2 * float64(prev[len(rb)]) / float64(len(ra)+len(rb))
}

// metricDirectJSON compares a JSON object result key by key with
// rules["expected"] (or, with expect_in_result, checks containment).
func metricDirectJSON(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	if s, ok := result.(string); ok {
		var v any
		if json.Unmarshal([]byte(strings.ReplaceAll(strings.TrimSpace(s), "'", `"`)), &v) != nil {
			return 0, nil
		}
		result = v
	}
	res, ok := result.(map[string]any)
	if !ok {
		return 0, nil
	}
	exp, _ := r["expected"].(map[string]any)
	inResult, _ := r["expect_in_result"].(bool)
	for k, ev := range exp {
		rv := res[k]
		if !inResult {
			if !reflect.DeepEqual(ev, rv) {
				return 0, nil
			}
			continue
		}
		switch e := ev.(type) {
		case []any:
			rl, _ := rv.([]any)
			if !slices.ContainsFunc(e, func(x any) bool {
				return slices.ContainsFunc(rl, func(y any) bool { return reflect.DeepEqual(x, y) })
			}) {
				return 0, nil
			}
		case string:
			rs, _ := rv.(string)
			if !strings.Contains(rs, e) {
				return 0, nil
			}
		default:
			if !reflect.DeepEqual(ev, rv) {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// MaxFile bounds a file read by a metric.
const MaxFile = 64 << 20

// ReadText reads a local file named by a getter result (a path string):
// ok is false when v is not a path or the file does not exist (Python's
// None, which metrics score 0); the read is capped at MaxFile.
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
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

var (
	tabsNewlines = regexp.MustCompile(`[\t\n]`)
	spaces       = regexp.MustCompile(`\s+`)
)

// metricCompareTextFile compares two text files (options ignore_blanks,
// ignore_case).
func metricCompareTextFile(result, expected any, _ bool, opts map[string]any) (float64, error) {
	a, ok, err := ReadText(result)
	if err != nil || !ok {
		return 0, err
	}
	b, ok, err := ReadText(expected)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("expected file %v missing", expected)
	}
	if ib, _ := opts["ignore_blanks"].(bool); ib {
		a = spaces.ReplaceAllString(strings.TrimSpace(tabsNewlines.ReplaceAllString(a, " ")), " ")
		b = spaces.ReplaceAllString(strings.TrimSpace(tabsNewlines.ReplaceAllString(b, " ")), " ")
	}
	if ic, _ := opts["ignore_case"].(bool); ic {
		a, b = strings.ToLower(a), strings.ToLower(b)
	}
	return Bool(a == b), nil
}

// SplitLines splits text into lines as Python's str.splitlines on "\n"
// and "\r\n" does, without a trailing empty line.
func SplitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	l := strings.Split(s, "\n")
	if len(l) > 0 && l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// metricCheckList checks a file's lines against rules["expect"] patterns
// (each must match some line) and rules["unexpect"] (none may match).
func metricCheckList(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := ReadText(result)
	if err != nil || !ok {
		return 0, err
	}
	compile := func(l []string) ([]*regexp.Regexp, error) {
		var out []*regexp.Regexp
		for _, p := range l {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("pattern %q: %v", p, err)
			}
			out = append(out, re)
		}
		return out, nil
	}
	exp, err := compile(Strings(r["expect"]))
	if err != nil {
		return 0, err
	}
	unexp, err := compile(Strings(r["unexpect"]))
	if err != nil {
		return 0, err
	}
	seen := make([]bool, len(exp))
	for _, line := range SplitLines(text) {
		for i, re := range exp {
			seen[i] = seen[i] || re.MatchString(line)
		}
		for _, re := range unexp {
			if re.MatchString(line) {
				return 0, nil
			}
		}
	}
	return Bool(!slices.Contains(seen, false)), nil
}

// metricIsUTC0 checks `timedatectl status` output: its 4th line ends with
// "+0000)".
func metricIsUTC0(result, _ any, _ bool, _ map[string]any) (float64, error) {
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) < 4 {
		return 0, nil
	}
	return Bool(strings.HasSuffix(strings.TrimSpace(lines[3]), "+0000)")), nil
}

// metricCheckCommandOutput is a generic command-output check: the
// trimmed output equals rules["expected"], or matches rules["pattern"].
func metricCheckCommandOutput(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	s = strings.TrimSpace(s)
	if e, ok := r["expected"].(string); ok && s != strings.TrimSpace(e) {
		return 0, nil
	}
	if p, ok := r["pattern"].(string); ok {
		re, err := regexp.Compile(p)
		if err != nil {
			return 0, fmt.Errorf("pattern %q: %v", p, err)
		}
		if !re.MatchString(s) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricFileContentEquals compares a fetched file's content with
// rules["expected"] (trailing newlines ignored).
func metricFileContentEquals(result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := ReadText(result)
	if err != nil || !ok {
		return 0, err
	}
	e, _ := r["expected"].(string)
	return Bool(strings.TrimRight(text, "\n") == strings.TrimRight(e, "\n")), nil
}
