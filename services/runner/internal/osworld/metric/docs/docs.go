// Package docs implements OSWorld's document metrics
// (desktop_env/evaluators/metrics/docs.py) over docx, odt and text files.
//
// OSWorld reads .docx with python-docx and .odt with odfpy; the docx
// subpackage reproduces what those libraries report, and the metrics here
// follow docs.py line by line: where docs.py catches an exception and
// returns 0, or would raise on a malformed document (a Python exception
// fails the task), the metric scores 0. An error is returned only when
// the task itself cannot be judged (a rules object without its keys, a
// missing OCR program) or an input is over a size cap of the readers
// here, which python-docx would read (metric.ErrOverCap).
package docs

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/docs/docx"
)

// Metrics returns the metrics of this package.
func Metrics() metric.Table {
	return metric.Table{
		"compare_docx_files": {Fn: metricCompareDocxFiles, Options: []string{
			"ignore_blanks", "ignore_case", "ignore_order", "content_only", "fuzzy_match", "delete_empty_lines"}},
		"compare_docx_tables":                     {Fn: metricCompareDocxTables},
		"compare_line_spacing":                    {Fn: metricCompareLineSpacing},
		"compare_docx_images":                     {Fn: metricCompareDocxImages},
		"compare_docx_files_and_ignore_new_lines": {Fn: metricCompareIgnoreNewLines, Options: []string{"ignore_blanks"}},
		"compare_font_names":                      {Fn: metricCompareFontNames},
		"compare_subscript_contains":              {Fn: metricCompareSubscriptContains},
		// content_only is passed by the published task but docs.py never
		// reads it; listing it keeps `rollout tasks check` quiet about an
		// option that OSWorld ignores too.
		"compare_references":                     {Fn: metricCompareReferences, Options: []string{"reference_indicator", "reference_base_result", "content_only"}},
		"compare_unique_train_records":           {Fn: metricCompareUniqueTrainRecords},
		"has_page_numbers_in_footers":            {Fn: metricHasPageNumbersInFooters},
		"check_italic_font_size_14":              {Fn: metricCheckItalicFontSize14},
		"evaluate_strike_through_last_paragraph": {Fn: metricStrikeThroughLastParagraph},
		"evaluate_colored_words_in_tables":       {Fn: metricColoredWordsInTables, Options: []string{"threshold"}},
		"is_first_line_centered":                 {Fn: metricIsFirstLineCentered},
		"find_default_font":                      {Fn: metricFindDefaultFont},
		"contains_page_break":                    {Fn: metricContainsPageBreak},
		"check_tabstops":                         {Fn: metricCheckTabstops, Options: []string{"word_number_split_by_tabstop", "index"}},
		"check_highlighted_words":                {Fn: metricCheckHighlightedWords},
		"compare_image_text":                     {Fn: metricCompareImageText},
	}
}

// path returns a getter result as a file path; ok is false for Python's
// falsy values (None, ""), which docs.py scores 0 before opening anything.
func path(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && s != ""
}

// openDocx opens a .docx as python-docx's Document(); nil when it cannot
// (docs.py logs the exception and returns 0; noted), with an error only
// for a document over a size cap, which is not scored.
func openDocx(ctx context.Context, v any) (*docx.Document, error) {
	p, ok := path(v)
	if !ok {
		return nil, nil
	}
	d, err := docx.Open(p)
	if err != nil {
		return nil, metric.Because(ctx, fmt.Errorf("%s does not open as a .docx: %w", filepath.Base(p), err))
	}
	return d, nil
}

// openDocxPair opens the two documents of a metric that compares them;
// either is nil when it does not open, and the second is not opened when
// the first does not (docs.py raises there first).
func openDocxPair(ctx context.Context, a, b any) (*docx.Document, *docx.Document, error) {
	d1, err := openDocx(ctx, a)
	if err != nil || d1 == nil {
		return nil, nil, err
	}
	d2, err := openDocx(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	return d1, d2, nil
}

// raises scores 0 where python-docx raises reading a property (the Raises
// of the model), as docs.py fails there, and notes which property.
func raises(ctx context.Context, format string, args ...any) (float64, error) {
	metric.Notef(ctx, "python-docx raises reading "+format, args...)
	return 0, nil
}

// option is options.get(key, def) read for its truth value.
func option(opts map[string]any, key string, def bool) bool {
	v, ok := opts[key]
	if !ok {
		return def
	}
	return metric.Truthy(v)
}

// collapseBlanks is re.sub(r'\s+', ' ', s).strip().
func collapseBlanks(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if metric.PyIsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// pyIsDigit approximates Python's str.isdigit: decimal digits plus the
// superscript and subscript digits that also count there.
func pyIsDigit(r rune) bool {
	return unicode.IsDigit(r) || r == '¹' || r == '²' || r == '³' ||
		(r >= 0x2070 && r <= 0x2079 && r != 0x2071 && r != 0x2072 && r != 0x2073) ||
		(r >= 0x2080 && r <= 0x2089)
}

// paragraphTexts loads a pair of documents' paragraph texts as
// compare_docx_files does: both .docx (python-docx's paragraphs) or both
// .odt (get_paragraph_texts_odt); ok is false for other pairs or an
// unreadable file (noted), and err is set for a file over a size cap.
func paragraphTexts(ctx context.Context, f1, f2 string) (p1, p2 []string, ok bool, err error) {
	switch {
	case strings.HasSuffix(f1, ".docx") && strings.HasSuffix(f2, ".docx"):
		d1, err := docx.Open(f1)
		if err != nil {
			return nil, nil, false, metric.Because(ctx, fmt.Errorf("%s does not open as a .docx: %w", filepath.Base(f1), err))
		}
		d2, err := docx.Open(f2)
		if err != nil {
			return nil, nil, false, metric.Because(ctx, fmt.Errorf("%s does not open as a .docx: %w", filepath.Base(f2), err))
		}
		return texts(d1.Paragraphs), texts(d2.Paragraphs), true, nil
	case strings.HasSuffix(f1, ".odt") && strings.HasSuffix(f2, ".odt"):
		d1, err := docx.OpenODT(f1)
		if err != nil {
			return nil, nil, false, metric.Because(ctx, fmt.Errorf("%s does not open as an .odt: %w", filepath.Base(f1), err))
		}
		d2, err := docx.OpenODT(f2)
		if err != nil {
			return nil, nil, false, metric.Because(ctx, fmt.Errorf("%s does not open as an .odt: %w", filepath.Base(f2), err))
		}
		return d1.Paragraphs, d2.Paragraphs, true, nil
	}
	metric.Notef(ctx, "%s and %s are not both .docx or both .odt", filepath.Base(f1), filepath.Base(f2))
	return nil, nil, false, nil
}

func texts(ps []docx.Paragraph) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Text
	}
	return out
}

// compareOptions are compare_docx_files' keyword options.
type compareOptions struct {
	ignoreBlanks, ignoreCase, ignoreOrder, contentOnly, fuzzyMatch, deleteEmptyLines bool
}

func readCompareOptions(opts map[string]any) compareOptions {
	return compareOptions{
		ignoreBlanks:     option(opts, "ignore_blanks", true),
		ignoreCase:       option(opts, "ignore_case", false),
		ignoreOrder:      option(opts, "ignore_order", false),
		contentOnly:      option(opts, "content_only", false),
		fuzzyMatch:       option(opts, "fuzzy_match", false),
		deleteEmptyLines: option(opts, "delete_empty_lines", false),
	}
}

// compareDocxFiles is docs.py's compare_docx_files. Other metrics call it
// with the default options and test its truth value, as docs.py does.
func compareDocxFiles(ctx context.Context, file1, file2 any, o compareOptions) (float64, error) {
	f1, ok1 := path(file1)
	f2, ok2 := path(file2)
	if !ok1 || !ok2 {
		return 0, nil
	}
	p1, p2, ok, err := paragraphTexts(ctx, f1, f2)
	if err != nil || !ok {
		return 0, err
	}
	if o.ignoreOrder {
		slices.Sort(p1)
		slices.Sort(p2)
	}
	if o.deleteEmptyLines {
		p1 = slices.DeleteFunc(p1, func(s string) bool { return metric.PyStrip(s) == "" })
		p2 = slices.DeleteFunc(p2, func(s string) bool { return metric.PyStrip(s) == "" })
	}
	joined := func() (string, string) {
		t1 := collapseBlanks(strings.Join(p1, "\n"))
		t2 := collapseBlanks(strings.Join(p2, "\n"))
		if o.ignoreCase {
			t1, t2 = metric.PyLower(t1), metric.PyLower(t2)
		}
		return t1, t2
	}
	if o.contentOnly {
		t1, t2 := joined()
		return fuzzRatio(ctx, t1, t2)
	}
	if o.ignoreBlanks {
		t1, t2 := joined()
		if o.fuzzyMatch {
			return fuzzRatio(ctx, t1, t2)
		}
		return metric.Bool(t1 == t2), nil
	}
	if len(p1) != len(p2) {
		return 0, nil
	}
	if o.fuzzyMatch {
		if len(p1) == 0 {
			return 1, nil
		}
		total := 0.0
		for i := range p1 {
			a, b := p1[i], p2[i]
			if o.ignoreCase {
				a, b = metric.PyLower(a), metric.PyLower(b)
			}
			r, err := fuzzRatio(ctx, a, b)
			if err != nil {
				return 0, err
			}
			total += r
		}
		return total / float64(len(p1)), nil
	}
	for i := range p1 {
		a, b := p1[i], p2[i]
		if o.ignoreCase {
			a, b = metric.PyLower(a), metric.PyLower(b)
		}
		if a != b {
			return 0, nil
		}
	}
	return 1, nil
}

// sameText is `compare_docx_files(f1, f2)` with its default options, the
// guard several docs.py metrics start with.
func sameText(ctx context.Context, file1, file2 any) (bool, error) {
	s, err := compareDocxFiles(ctx, file1, file2, readCompareOptions(nil))
	return s != 0, err
}

// sameTextDocx opens the result for the checks that first require
// compare_docx_files to pass: nil (a score of 0) when the texts differ or
// the result does not open.
func sameTextDocx(ctx context.Context, result, expected any) (*docx.Document, error) {
	if ok, err := sameText(ctx, result, expected); !ok || err != nil {
		return nil, err
	}
	return openDocx(ctx, result)
}

func metricCompareDocxFiles(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	return compareDocxFiles(ctx, result, expected, readCompareOptions(opts))
}

// metricCompareDocxTables compares the body tables' shapes and their
// cells' stripped text on python-docx's grid.
func metricCompareDocxTables(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d1, d2, err := openDocxPair(ctx, result, expected)
	if err != nil || d1 == nil || d2 == nil {
		return 0, err
	}
	if len(d1.Tables) != len(d2.Tables) {
		return 0, nil
	}
	for i := range d1.Tables {
		t1, t2 := &d1.Tables[i], &d2.Tables[i]
		if len(t1.Rows) != len(t2.Rows) {
			return 0, nil
		}
		// len(table.columns) raises on a table without w:tblGrid.
		if t1.Raises.Has(docx.PropColumns) || t2.Raises.Has(docx.PropColumns) {
			return raises(ctx, "table %d's columns (a table without w:tblGrid)", i+1)
		}
		if t1.Columns != t2.Columns {
			return 0, nil
		}
		if len(t1.Rows) == 0 || t1.Columns == 0 {
			// No table.cell call, so python-docx never lays the cells out.
			continue
		}
		g1, err1 := t1.Grid()
		g2, err2 := t2.Grid()
		if err := cmp.Or(err1, err2); err != nil {
			return raises(ctx, "table %d's cells: %v", i+1, err)
		}
		for r := range t1.Rows {
			for c := 0; c < t1.Columns; c++ {
				k := r*t1.Columns + c
				// table.cell(i, j) raises IndexError past the cells
				// python-docx found: the task fails.
				if k >= len(g1) || k >= len(g2) {
					return 0, nil
				}
				if metric.PyStrip(g1[k].Text()) != metric.PyStrip(g2[k].Text()) {
					return 0, nil
				}
			}
		}
	}
	return 1, nil
}

// metricCompareLineSpacing needs equal text and, paragraph by paragraph,
// equal line spacing.
func metricCompareLineSpacing(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if ok, err := sameText(ctx, result, expected); !ok || err != nil {
		return 0, err
	}
	d1, d2, err := openDocxPair(ctx, result, expected)
	if err != nil || d1 == nil || d2 == nil || len(d1.Paragraphs) != len(d2.Paragraphs) {
		return 0, err
	}
	for i := range d1.Paragraphs {
		p1, p2 := &d1.Paragraphs[i], &d2.Paragraphs[i]
		if p1.Raises.Has(docx.PropLineSpacing) || p2.Raises.Has(docx.PropLineSpacing) {
			return raises(ctx, "paragraph %d's line spacing", i+1)
		}
		s1, s2 := p1.LineSpacing, p2.LineSpacing
		if (s1 == nil) != (s2 == nil) || (s1 != nil && *s1 != *s2) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricCompareDocxImages compares the decoded pixels of the main part's
// images, in relationship order.
func metricCompareDocxImages(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d1, d2, err := openDocxPair(ctx, result, expected)
	if err != nil || d1 == nil || d2 == nil || len(d1.Images) != len(d2.Images) {
		return 0, err
	}
	for i := range d1.Images {
		b1, err := imageBytes(d1.Images[i])
		if err != nil {
			// PIL raising on an image it cannot decode fails the task.
			return 0, metric.Because(ctx, err)
		}
		b2, err := imageBytes(d2.Images[i])
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		if string(b1) != string(b2) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricCompareIgnoreNewLines is compare_docx_files_and_ignore_new_lines:
// empty paragraphs dropped, then the joined text (ignore_blanks, the
// default) or each paragraph compared.
func metricCompareIgnoreNewLines(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	f1, ok1 := path(result)
	f2, ok2 := path(expected)
	if !ok1 || !ok2 || !strings.HasSuffix(f1, ".docx") || !strings.HasSuffix(f2, ".docx") {
		return 0, nil
	}
	d1, d2, err := openDocxPair(ctx, f1, f2)
	if err != nil || d1 == nil || d2 == nil {
		return 0, err
	}
	nonEmpty := func(ps []docx.Paragraph) []string {
		var out []string
		for _, p := range ps {
			if p.Text != "" {
				out = append(out, p.Text)
			}
		}
		return out
	}
	p1, p2 := nonEmpty(d1.Paragraphs), nonEmpty(d2.Paragraphs)
	if option(opts, "ignore_blanks", true) {
		return metric.Bool(collapseBlanks(strings.Join(p1, "\n")) == collapseBlanks(strings.Join(p2, "\n"))), nil
	}
	return metric.Bool(slices.Equal(p1, p2)), nil
}

// metricCompareFontNames needs every body run's direct ASCII font to be
// rules["font_name"]: a run without one (inheriting a style's font) fails,
// as run.font.name is None there.
func metricCompareFontNames(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if _, ok := path(result); !ok {
		return 0, nil
	}
	d, err := openDocx(ctx, result)
	if err != nil || d == nil {
		return 0, err
	}
	want, err := ruleString(expected, "font_name")
	if err != nil {
		return 0, err
	}
	for _, p := range d.Paragraphs {
		for _, r := range p.Runs {
			// run.font.name != expected_font, with None equal only to None.
			if (r.FontName == nil) != (want == nil) || (want != nil && *r.FontName != *want) {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// ruleString reads rules[key], which must be present (docs.py raises
// KeyError otherwise); nil for a JSON null or a non-string.
func ruleString(expected any, key string) (*string, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return nil, err
	}
	v, ok := r[key]
	if !ok {
		return nil, fmt.Errorf("rules has no %q", key)
	}
	s, ok := v.(string)
	if !ok {
		return nil, nil
	}
	return &s, nil
}

// metricCompareSubscriptContains is 1 when some paragraph pair's run pair,
// zipped in order, are both subscript.
func metricCompareSubscriptContains(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d1, d2, err := openDocxPair(ctx, result, expected)
	if err != nil || d1 == nil || d2 == nil {
		return 0, err
	}
	for i := range min(len(d1.Paragraphs), len(d2.Paragraphs)) {
		r1, r2 := d1.Paragraphs[i].Runs, d2.Paragraphs[i].Runs
		for j := range min(len(r1), len(r2)) {
			// run1.font.subscript and run2.font.subscript: the second is
			// read only when the first is true, and a read that raises
			// fails the task.
			if r1[j].Raises.Has(docx.PropSubscript) {
				return raises(ctx, "the result's paragraph %d, run %d: subscript", i+1, j+1)
			}
			if !isTrue(r1[j].Subscript) {
				continue
			}
			if r2[j].Raises.Has(docx.PropSubscript) {
				return raises(ctx, "the expected paragraph %d, run %d: subscript", i+1, j+1)
			}
			if isTrue(r2[j].Subscript) {
				return 1, nil
			}
		}
	}
	return 0, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// metricCompareReferences compares the paragraphs after the first
// reference_indicator paragraph, scaled above reference_base_result.
func metricCompareReferences(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	f1, ok1 := path(result)
	f2, ok2 := path(expected)
	if !ok1 || !ok2 {
		return 0, nil
	}
	indicator := "References"
	if v, ok := opts["reference_indicator"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return 0, fmt.Errorf("reference_indicator must be a string")
		}
		indicator = s
	}
	base := 0.5
	if v, ok := opts["reference_base_result"]; ok {
		f, isNum := v.(float64)
		if !isNum {
			return 0, fmt.Errorf("reference_base_result must be a number")
		}
		base = f
	}
	if !strings.HasSuffix(f1, ".docx") || !strings.HasSuffix(f2, ".docx") {
		return 0, nil
	}
	d1, d2, err := openDocxPair(ctx, f1, f2)
	if err != nil || d1 == nil || d2 == nil {
		return 0, err
	}
	p1, p2 := texts(d1.Paragraphs), texts(d2.Paragraphs)
	i1, i2 := slices.Index(p1, indicator), slices.Index(p2, indicator)
	if i1 == -1 && i2 == -1 {
		return 1, nil
	}
	if i1 == -1 || i2 == -1 {
		return 0, nil
	}
	refs := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			if metric.PyStrip(p) != "" {
				out = append(out, p)
			}
		}
		return out
	}
	r1, r2 := refs(p1[i1+1:]), refs(p2[i2+1:])
	if len(r1) != len(r2) {
		return 0, nil
	}
	if len(r1) == 0 {
		// docs.py divides by len(ref1) here: ZeroDivisionError fails the
		// task.
		return 0, nil
	}
	total := 0.0
	for i := range r1 {
		s, err := fuzzRatio(ctx, r1[i], r2[i])
		if err != nil {
			return 0, err
		}
		total += s
	}
	res := total / float64(len(r1))
	if res >= base+0.01 {
		return (res - base) / (1 - base), nil
	}
	return 0, nil
}

// metricCompareUniqueTrainRecords checks a de-duplicated train record
// against expected = [gold, initial]: its lines come from the initial
// file, its train ids are unique and those of the gold file, and it has
// the gold file's line count.
func metricCompareUniqueTrainRecords(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	files, ok := expected.([]any)
	if _, okp := path(result); !okp || !ok || len(files) < 2 {
		return 0, nil
	}
	if _, ok := path(files[0]); !ok {
		return 0, nil
	}
	if _, ok := path(files[1]); !ok {
		return 0, nil
	}
	linesAndIDs := func(v any) ([]string, []string, bool, error) {
		d, err := openDocx(ctx, v)
		if err != nil || d == nil {
			return nil, nil, false, err
		}
		var lines, ids []string
		for _, p := range d.Paragraphs {
			if l := metric.PyStrip(p.Text); l != "" {
				lines = append(lines, l)
			}
		}
		for _, l := range lines {
			if parts := strings.Split(l, ","); len(parts) == 4 {
				ids = append(ids, metric.PyStrip(parts[1]))
			}
		}
		return lines, ids, true, nil
	}
	procLines, procIDs, ok, err := linesAndIDs(result)
	if err != nil || !ok {
		return 0, err
	}
	goldLines, goldIDs, ok, err := linesAndIDs(files[0])
	if err != nil || !ok {
		return 0, err
	}
	initLines, _, ok, err := linesAndIDs(files[1])
	if err != nil || !ok {
		return 0, err
	}
	initial := set(initLines)
	for _, l := range procLines {
		if !initial[l] {
			return 0, nil
		}
	}
	procSet := set(procIDs)
	if len(procIDs) != len(procSet) {
		return 0, nil
	}
	goldSet := set(goldIDs)
	if len(procSet) != len(goldSet) {
		return 0, nil
	}
	for id := range procSet {
		if !goldSet[id] {
			return 0, nil
		}
	}
	return metric.Bool(len(procLines) == len(goldLines)), nil
}

func set(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}

// metricHasPageNumbersInFooters needs a digit in the first paragraph of
// every section's primary footer.
func metricHasPageNumbersInFooters(ctx context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	d, err := openDocx(ctx, result)
	if err != nil || d == nil {
		return 0, err
	}
	for i, s := range d.Sections {
		if s.Raises.Has(docx.PropFooter) {
			return raises(ctx, "section %d's footer paragraphs", i+1)
		}
		text := ""
		if len(s.Footer) > 0 {
			text = s.Footer[0].Text
		}
		if !strings.ContainsFunc(text, pyIsDigit) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricCheckItalicFontSize14 needs equal text and a direct 14 pt size on
// every directly italic body run.
func metricCheckItalicFontSize14(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d, err := sameTextDocx(ctx, result, expected)
	if err != nil || d == nil {
		return 0, err
	}
	for _, p := range d.Paragraphs {
		for _, r := range p.Runs {
			if r.Raises.Has(docx.PropItalic) {
				return raises(ctx, "a run's italic")
			}
			if !isTrue(r.Italic) {
				continue
			}
			// A size that raises is nil too.
			if r.Size == nil || float64(*r.Size)/12700.0 != 14 {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// metricStrikeThroughLastParagraph needs equal text and direct
// strike-through on every run of the last body paragraph.
func metricStrikeThroughLastParagraph(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d, err := sameTextDocx(ctx, result, expected)
	if err != nil || d == nil || len(d.Paragraphs) == 0 {
		return 0, err
	}
	for _, r := range d.Paragraphs[len(d.Paragraphs)-1].Runs {
		if !isTrue(r.Strike) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricColoredWordsInTables needs equal text and, in the body tables,
// every run starting with a vowel red and every other run blue, within a
// CIEDE2000 distance of threshold.
func metricColoredWordsInTables(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	d, err := sameTextDocx(ctx, result, expected)
	if err != nil || d == nil {
		return 0, err
	}
	threshold := 3.5
	if v, ok := opts["threshold"]; ok {
		f, isNum := v.(float64)
		if !isNum {
			return 0, fmt.Errorf("threshold must be a number")
		}
		threshold = f
	}
	red, blue := docx.RGB{255, 0, 0}, docx.RGB{0, 0, 255}
	for _, t := range d.Tables {
		for row := range t.Rows {
			// row.cells: a cell once per grid column it spans, a vertical
			// merge's continuation as the cell above it.
			cells, err := t.RowCells(row)
			if err != nil {
				// python-docx raises: docs.py fails.
				return raises(ctx, "row %d's cells: %v", row+1, err)
			}
			for _, c := range cells {
				for _, p := range c.Paragraphs {
					for _, r := range p.Runs {
						if r.Text == "" {
							continue
						}
						if r.Color == nil {
							// run.font.color.rgb is None or raises: docs.py
							// fails either way.
							return 0, nil
						}
						first, _ := utf8.DecodeRuneInString(r.Text)
						want := blue
						// Python lowers U+0130 to two characters, never a
						// vowel; Go's simple mapping would give "i".
						if first != 'İ' && strings.ContainsRune("aeiou", unicode.ToLower(first)) {
							want = red
						}
						if deltaE2000(*r.Color, want) > threshold {
							return 0, nil
						}
					}
				}
			}
		}
	}
	return 1, nil
}

// metricIsFirstLineCentered checks the first body paragraph's direct
// alignment.
func metricIsFirstLineCentered(ctx context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	d, err := openDocx(ctx, result)
	if err != nil || d == nil || len(d.Paragraphs) == 0 {
		return 0, err
	}
	return metric.Bool(d.Paragraphs[0].Alignment == "center"), nil
}

// metricContainsPageBreak counts page breaks in body runs; with
// rules["page_break_count"] the count must match.
func metricContainsPageBreak(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	d, err := openDocx(ctx, result)
	if err != nil || d == nil {
		return 0, err
	}
	var want any
	if r, ok := expected.(map[string]any); ok {
		want = r["page_break_count"]
	}
	n := 0
	for _, p := range d.Paragraphs {
		for _, r := range p.Runs {
			n += r.PageBreaks
		}
	}
	if want != nil {
		f, isNum := want.(float64)
		if !isNum || float64(n) != f {
			return 0, nil
		}
	}
	return metric.Bool(n > 0), nil
}

// metricCheckTabstops compares the tab stops of the non-blank paragraphs,
// scoring 1 minus the mean position difference as a fraction of the
// expected document's text width; alignments must match.
func metricCheckTabstops(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	d1, d2, err := openDocxPair(ctx, result, expected)
	if err != nil || d1 == nil || d2 == nil {
		return 0, err
	}
	nonBlank := func(ps []docx.Paragraph) []docx.Paragraph {
		var out []docx.Paragraph
		for _, p := range ps {
			if metric.PyStrip(p.Text) != "" {
				out = append(out, p)
			}
		}
		return out
	}
	para1, para2 := nonBlank(d1.Paragraphs), nonBlank(d2.Paragraphs)
	if len(para1) != len(para2) {
		return 0, nil
	}
	if v, ok := opts["word_number_split_by_tabstop"]; ok && v != nil {
		number, isNum := v.(float64)
		if !isNum {
			return 0, fmt.Errorf("word_number_split_by_tabstop must be a number")
		}
		index := 0
		if iv, ok := opts["index"]; ok {
			f, isNum := iv.(float64)
			if !isNum || f != math.Trunc(f) {
				return 0, fmt.Errorf("index must be an integer")
			}
			index = int(f)
		}
		for _, p := range para1 {
			splits := strings.Split(p.Text, "\t")
			i := index
			if i < 0 {
				i += len(splits)
			}
			if i < 0 || i >= len(splits) {
				// IndexError in docs.py.
				return 0, nil
			}
			if float64(len(strings.FieldsFunc(splits[i], metric.PyIsSpace))) != number {
				return 0, nil
			}
		}
	}
	if len(d2.Sections) == 0 {
		return 0, nil
	}
	s := d2.Sections[0]
	// None in the subtraction, or a read that raises (nil as well),
	// fails docs.py.
	if s.PageWidth == nil || s.LeftMargin == nil || s.RightMargin == nil {
		return 0, nil
	}
	width := *s.PageWidth - *s.LeftMargin - *s.RightMargin
	// Every tab stop's alignment is read, and the position of every one
	// that is not a clear; a read that raises fails docs.py (the loop
	// below reads all of them unless it returns 0 first).
	for i := range para1 {
		for _, ts := range [][]docx.TabStop{para1[i].TabStops, para2[i].TabStops} {
			for _, t := range ts {
				if t.Raises.Has(docx.PropTabAlignment) || (t.Alignment != "clear" && t.Raises.Has(docx.PropTabPosition)) {
					return raises(ctx, "a tab stop of paragraph %d", i+1)
				}
			}
		}
	}
	ignore := func(t docx.TabStop) bool {
		return t.Alignment == "clear" || (t.Alignment == "left" && t.Position == 0)
	}
	kept := func(ts []docx.TabStop) []docx.TabStop {
		return slices.DeleteFunc(slices.Clone(ts), ignore)
	}
	minus := 0.0
	for i := range para1 {
		t1, t2 := kept(para1[i].TabStops), kept(para2[i].TabStops)
		if len(t1) != len(t2) {
			return 0, nil
		}
		diff := 0.0
		for j := range t1 {
			if t1[j].Alignment != t2[j].Alignment {
				return 0, nil
			}
			d := t1[j].Position - t2[j].Position
			if d < 0 {
				d = -d
			}
			diff += float64(d)
		}
		if width == 0 {
			// ZeroDivisionError in docs.py.
			return 0, nil
		}
		minus += diff / float64(width)
	}
	if len(para1) == 0 {
		return 0, nil
	}
	return 1 - minus/float64(len(para1)), nil
}

// metricCheckHighlightedWords (.odt) needs equal text and no text:span of
// the result whose automatic style has a yellow (#ffff00) background.
func metricCheckHighlightedWords(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if ok, err := sameText(ctx, result, expected); !ok || err != nil {
		return 0, err
	}
	f, _ := path(result)
	d, err := docx.OpenODT(f)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	highlighted, err := d.Highlighted("#ffff00")
	if err != nil {
		// A read odfpy raises on fails docs.py.
		return 0, metric.Because(ctx, err)
	}
	if highlighted {
		return 0, nil
	}
	return 1, nil
}
