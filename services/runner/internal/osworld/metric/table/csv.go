package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// errNoFile is a file that does not exist (Python's FileNotFoundError).
var errNoFile = errors.New("file not found")

// safeReadLines is OSWorld's _safe_read_file: the text decoded as UTF-8
// (a BOM dropped) or else as Latin-1, which decodes anything, split
// with str.splitlines.
func safeReadLines(p string) ([]string, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoFile
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		// Opening a FIFO would block.
		return nil, fmt.Errorf("csv: %s is not a regular file", p)
	}
	b, err := boundedread.ReadFile(p, metric.MaxFile)
	if err != nil {
		return nil, err
	}
	var s string
	if utf8.Valid(b) {
		s = string(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
	} else {
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		s = string(r)
	}
	return metric.SplitLines(s), nil
}

// compareCSV is compare_csv: the result's lines equal those of the
// expected file, or of any of a list of expected files (options strict,
// default true, and ignore_case).
func compareCSV(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	rp, ok := result.(string)
	if !ok || rp == "" {
		if l, isList := result.([]any); isList && len(l) > 0 {
			rp, ok = l[0].(string)
		}
		if !ok {
			return 0, nil
		}
	}
	got, err := safeReadLines(rp)
	if err != nil {
		// Missing or unreadable: OSWorld catches both and scores 0. A
		// file over the size cap is not judged.
		return 0, metric.Because(ctx, err)
	}
	var files []string
	switch e := expected.(type) {
	case string:
		files = []string{e}
	case []any:
		for _, x := range e {
			if s, ok := x.(string); ok {
				files = append(files, s)
			}
		}
	}
	strict := true
	if s, ok := opts["strict"].(bool); ok {
		strict = s
	}
	ignoreCase, _ := opts["ignore_case"].(bool)
	norm := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			if !strict {
				l = metric.PyStrip(l)
			}
			if ignoreCase {
				l = metric.PyLower(l)
			}
			out[i] = l
		}
		return out
	}
	g := norm(got)
	for _, f := range files {
		want, err := safeReadLines(f)
		if oc := metric.OverCap(err); oc != nil {
			return 0, oc
		}
		if err != nil {
			continue
		}
		w := norm(want)
		if len(g) == len(w) && strings.Join(g, "\n") == strings.Join(w, "\n") {
			return 1, nil
		}
	}
	return 0, nil
}

// printLines is _load_sheet for a path: "<book without extension>-<sheet>.csv"
// read backwards, each line stripped, trailing blank lines dropped; nil
// when the file cannot be read, and an error when it is over the size
// cap.
func printLines(book, sheetName string) ([]string, error) {
	csv := strings.TrimSuffix(book, filepath.Ext(book)) + "-" + sheetName + ".csv"
	if strings.HasPrefix(filepath.Ext(book), ".") && filepath.Base(book) == filepath.Ext(book) {
		// os.path.splitext keeps a leading dot as part of the name.
		csv = book + "-" + sheetName + ".csv"
	}
	lines, err := safeReadLines(csv)
	if err != nil {
		return nil, metric.OverCap(err)
	}
	out := []string{}
	dropping := true
	for i := len(lines) - 1; i >= 0; i-- {
		l := metric.PyStrip(lines[i])
		if dropping && l == "" {
			continue
		}
		dropping = false
		out = append(out, l)
	}
	return out, nil
}

// sheetPrint compares the CSV exports of two sheets line by line.
func (c *tableCtx) sheetPrint(r map[string]any) (bool, error) {
	s1, err := c.parseIdx(r["sheet_idx0"])
	if err != nil {
		return false, err
	}
	if s1.expected && !c.hasExpected {
		return false, fmt.Errorf("no expected file: %w", errPython)
	}
	a, err := printLines(s1.path, s1.name)
	if err != nil || a == nil {
		return false, err
	}
	s2, err := c.parseIdx(r["sheet_idx1"])
	if err != nil {
		return false, err
	}
	if s2.expected && !c.hasExpected {
		return false, fmt.Errorf("no expected file: %w", errPython)
	}
	b, err := printLines(s2.path, s2.name)
	if err != nil {
		return false, err
	}
	if ic, _ := r["ignore_case"].(bool); ic {
		if b == nil {
			return false, fmt.Errorf("lower() of a missing sheet: %w", errPython)
		}
		for i := range a {
			a[i] = metric.PyLower(a[i])
		}
		for i := range b {
			b[i] = metric.PyLower(b[i])
		}
	}
	if b == nil || len(a) != len(b) {
		return false, nil
	}
	for i := range a {
		if a[i] != b[i] {
			return false, nil
		}
	}
	return true, nil
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// normaliseCity is _normalize_city_string: NFKD without combining marks,
// lower case, runs of anything but a-z0-9 as one space, trimmed.
func normaliseCity(s string) string {
	var b strings.Builder
	for _, r := range norm.NFKD.String(s) {
		if norm.NFKD.PropertiesString(string(r)).CCC() != 0 {
			continue
		}
		b.WriteRune(r)
	}
	return metric.PyStrip(nonAlnum.ReplaceAllString(metric.PyLower(b.String()), " "))
}

// compareConferenceCityInOrder checks C2:C22 of the active sheet against
// rules["expected"] in order: each expected name (or one of a list of
// names) must be contained in the normalised cell text.
func compareConferenceCityInOrder(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	raw, ok := r["expected"]
	if !ok {
		// A KeyError before the workbook is read and outside the metric's
		// try: the evaluation fails.
		return 0, errors.New(`compare_conference_city_in_order: the rules have no "expected"`)
	}
	p, ok := firstPath(result)
	if !ok {
		return 0, nil
	}
	wb, err := openWorkbook(p)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	sh, err := wb.activeSheet()
	if err != nil || sh == nil {
		return 0, metric.Because(ctx, err)
	}
	want, _ := raw.([]any)
	if s, ok := raw.(string); ok {
		// Python indexes a string by character.
		for _, c := range s {
			want = append(want, string(c))
		}
	}
	for i := 0; i < 21; i++ {
		if i >= len(want) {
			// IndexError, caught by the metric.
			return 0, nil
		}
		actual := normaliseCity(wb.cellView(sh, 2+i, 3).pyStr())
		var cands []any
		switch e := want[i].(type) {
		case string:
			cands = []any{e}
		case []any:
			cands = e
		default:
			return 0, nil
		}
		matched := false
		for _, c := range cands {
			// A name that is not a string is str()'d, None is "".
			n := ""
			if c != nil {
				n = normaliseCity(metric.PyStr(c))
			}
			if n != "" && strings.Contains(actual, n) {
				matched = true
				break
			}
		}
		if !matched {
			return 0, nil
		}
	}
	return 1, nil
}
