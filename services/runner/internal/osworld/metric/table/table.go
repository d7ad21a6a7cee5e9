// Package table implements OSWorld's spreadsheet metrics
// (desktop_env/evaluators/metrics/table.py and the helpers of utils.py
// it uses): compare_table, compare_csv and compare_conference_city_in_order.
//
// Which library does what. OSWorld reads a workbook three ways, and so
// does this package, each with its own reader here:
//   - pandas.read_excel (sheet_data) is a reader of the sheet XML that
//     mimics openpyxl's read-only, data-only cell values and pandas'
//     header, NA, dtype inference, DataFrame.round and DataFrame.equals
//     (frame.go);
//   - openpyxl.load_workbook (check_cell styles, style, freeze, zoom,
//     data_validation, row_props, col_props, filter, chart, pivot_table)
//     is the same XML reader keeping what openpyxl exposes: cell styles
//     from styles.xml, merged cells, sheet views, validations, dimensions,
//     the autofilter, charts from the drawing parts and pivot tables from
//     their definitions (sheet.go, styles.go, cell.go, parts.go,
//     extras.go);
//   - OSWorld's own XML lookups, read_cell_value (sheet_fuzzy, check_cell
//     values) and load_sparklines (sparkline), which take a sheet's part
//     to be xl/worksheets/sheet{sheetId}.xml (cell.go, extras.go).
//
// The reader is this package's own (archive/zip and encoding/xml, with
// every part's size and the total decompressed size bounded) because the
// scores depend on openpyxl's quirks, which a general xlsx library
// smooths over. github.com/xuri/excelize/v2 writes the test workbooks
// that LibreOffice cannot make (pivot tables, charts, panes, validations).
// CSV files (sheet_print, compare_csv) are read as text the way OSWorld's
// _safe_read_file does.
//
// Where OSWorld's Python raises (a font without a colour in a style rule,
// an unknown sheet index), its run has no score: compare_table scores 0.
// A style rule over a sheet with conditional formatting is an error, not
// a score: OSWorld evaluates those formulas with the `formulas` package,
// which this package does not reimplement.
package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Metrics returns the metrics of this package.
func Metrics() metric.Table {
	return metric.Table{
		"compare_table":                    {Fn: compareTable, Options: []string{"rules"}},
		"compare_csv":                      {Fn: compareCSV, Options: []string{"strict", "ignore_case"}},
		"compare_conference_city_in_order": {Fn: compareConferenceCityInOrder},
	}
}

// firstPath takes a getter result: a path, or the first path of a list
// (OSWorld's multi-file getters give the metric only the first file
// unless told otherwise).
func firstPath(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, x != ""
	case []any:
		if len(x) > 0 {
			return firstPath(x[0])
		}
	case []string:
		if len(x) > 0 {
			return x[0], x[0] != ""
		}
	}
	return "", false
}

// tableCtx holds both workbooks of one compare_table call.
type tableCtx struct {
	// ctx ends the comparison: the loops over cells look at it.
	ctx                      context.Context
	result, expected         *workbook
	resultPath, expectedPath string
	resultNames, expNames    []string
	hasExpected              bool
}

// compareTable is compare_table: every rule must hold. A result file that
// is missing or unreadable scores 0; an unreadable expected file is an
// error (Python raises), and so is either file over a size cap.
func compareTable(ctx context.Context, result, expected any, hasExpected bool, opts map[string]any) (float64, error) {
	rp, ok := firstPath(result)
	if !ok {
		return 0, nil
	}
	if _, err := os.Stat(rp); err != nil {
		return 0, nil
	}
	rwb, err := openWorkbook(rp)
	if err == nil {
		err = rwb.loadAll()
	}
	if err != nil {
		// openpyxl raises on a workbook it cannot read; one over a size
		// cap here is not judged.
		return 0, metric.Because(ctx, fmt.Errorf("%s: %w", filepath.Base(rp), err))
	}
	tc := &tableCtx{ctx: ctx, result: rwb, resultPath: rp, resultNames: rwb.sheetNames()}
	if ep, ok := firstPath(expected); hasExpected && expected != nil && ok {
		ewb, err := openWorkbook(ep)
		if err == nil {
			err = ewb.loadAll()
		}
		if err != nil {
			return 0, fmt.Errorf("compare_table: expected workbook %s: %w", ep, err)
		}
		tc.expected, tc.expectedPath, tc.expNames, tc.hasExpected = ewb, ep, ewb.sheetNames(), true
	}
	rules, ok := opts["rules"].([]any)
	if !ok {
		return 0, fmt.Errorf("compare_table: options.rules must be a list")
	}
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("compare_table: rule %d is not an object", i)
		}
		pass, err := tc.check(rule)
		if errors.Is(err, errPython) && !errors.Is(err, metric.ErrOverCap) {
			// OSWorld's metric raises here; its run gets no score.
			return 0, metric.Because(ctx, fmt.Errorf("rule %d (%v): %w", i, rule["type"], err))
		}
		if err != nil {
			return 0, fmt.Errorf("compare_table rule %d (%v): %w", i, rule["type"], err)
		}
		if !pass {
			metric.Notef(ctx, "rule %d (%v) does not hold", i, rule["type"])
			return 0, nil
		}
	}
	return 1, nil
}

// side says which file a sheet index names.
type side struct {
	wb       *workbook
	path     string
	name     string
	expected bool
}

// parseIdx is _parse_sheet_idx: an int is a result sheet index; "RI<n>",
// "RN<name>", "EI<n>", "EN<name>" name a sheet of the result or the
// expected book. An index out of range gives the sheet name "".
func (c *tableCtx) parseIdx(v any) (side, error) {
	pick := func(names []string, s string) string {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return ""
		}
		if n < 0 {
			n += len(names)
		}
		if n < 0 || n >= len(names) {
			return ""
		}
		return names[n]
	}
	res := side{wb: c.result, path: c.resultPath}
	exp := side{wb: c.expected, path: c.expectedPath, expected: true}
	switch x := v.(type) {
	case float64:
		if x != float64(int(x)) {
			return side{}, fmt.Errorf("sheet index %v: %w", x, errPython)
		}
		n := int(x)
		if n >= 0 && n < len(c.resultNames) {
			res.name = c.resultNames[n]
		} else if n < 0 && -n <= len(c.resultNames) {
			res.name = c.resultNames[len(c.resultNames)+n]
		}
		return res, nil
	case string:
		switch {
		case strings.HasPrefix(x, "RI"):
			res.name = pick(c.resultNames, x[2:])
			return res, nil
		case strings.HasPrefix(x, "RN"):
			res.name = x[2:]
			return res, nil
		case strings.HasPrefix(x, "EI"):
			exp.name = pick(c.expNames, x[2:])
			return exp, nil
		case strings.HasPrefix(x, "EN"):
			exp.name = x[2:]
			return exp, nil
		}
	}
	return side{}, fmt.Errorf("unrecognized sheet index %v: %w", v, errPython)
}

// book returns the side's workbook; Python's _load_sheet raises on the
// expected side when there is no expected file.
func (s side) book() (*workbook, error) {
	if s.wb == nil {
		return nil, fmt.Errorf("no expected workbook: %w", errPython)
	}
	return s.wb, nil
}

func (c *tableCtx) check(r map[string]any) (bool, error) {
	typ, _ := r["type"].(string)
	switch typ {
	case "sheet_name":
		if !c.hasExpected {
			// A list never equals None.
			return false, nil
		}
		return slices.Equal(c.resultNames, c.expNames), nil
	case "sheet_data":
		return c.sheetData(r)
	case "sheet_print":
		return c.sheetPrint(r)
	case "sheet_fuzzy":
		return c.sheetFuzzy(r)
	case "check_cell":
		return c.checkCell(r)
	case "freeze":
		return c.freeze(r)
	case "zoom":
		return c.zoom(r)
	case "data_validation":
		return c.dataValidation(r)
	case "row_props":
		return c.rowProps(r)
	case "style":
		return c.style(r)
	case "chart":
		return c.chart(r)
	case "pivot_table":
		return c.pivot(r)
	case "col_props":
		return c.colProps(r)
	case "filter":
		return c.filter(r)
	case "sparkline":
		return c.sparkline(r)
	}
	return false, fmt.Errorf("sheet check %q is not implemented", typ)
}

// sheetData compares pandas frames after rounding to precision (4).
func (c *tableCtx) sheetData(r map[string]any) (bool, error) {
	prec := 4
	if p, ok := r["precision"].(float64); ok {
		prec = int(p)
	}
	s1, err := c.parseIdx(r["sheet_idx0"])
	if err != nil {
		return false, err
	}
	f1, err := loadFrame(c.ctx, s1)
	if err != nil || f1 == nil {
		return false, err
	}
	s2, err := c.parseIdx(r["sheet_idx1"])
	if err != nil {
		return false, err
	}
	f2, err := loadFrame(c.ctx, s2)
	if err != nil {
		return false, err
	}
	if f2 == nil {
		// Python calls .round on None.
		return false, fmt.Errorf("sheet %q: %w", s2.name, errPython)
	}
	f1.round(prec)
	f2.round(prec)
	return f1.equals(f2), nil
}

// loadFrame is _load_sheet over pd.ExcelFile: nil where pandas fails,
// an error for a sheet over a size cap.
func loadFrame(ctx context.Context, s side) (*frame, error) {
	if s.wb == nil {
		return nil, nil
	}
	f, err := s.wb.readFrame(s.name)
	if err != nil {
		return nil, metric.Because(ctx, fmt.Errorf("sheet %q: %w", s.name, err))
	}
	return f, nil
}

// sheetFuzzy compares cells of ranges as strings, per sub-rule.
func (c *tableCtx) sheetFuzzy(r map[string]any) (bool, error) {
	s1, err := c.parseIdx(r["sheet_idx0"])
	if err != nil {
		return false, err
	}
	s2, err := c.parseIdx(r["sheet_idx1"])
	if err != nil {
		return false, err
	}
	subs, _ := r["rules"].([]any)
	total := true
	for _, x := range subs {
		rl, ok := x.(map[string]any)
		if !ok {
			return false, fmt.Errorf("sheet_fuzzy rule: %w", errPython)
		}
		ok, err := fuzzyRule(c.ctx, s1, s2, rl)
		if err != nil {
			return false, err
		}
		total = total && ok
	}
	return total, nil
}

func fuzzyRule(ctx context.Context, s1, s2 side, rl map[string]any) (bool, error) {
	var ranges []cellRange
	switch x := rl["range"].(type) {
	case string:
		rs, err := parseMultiRange(x)
		if err != nil {
			return false, fmt.Errorf("range %q: %w", x, errPython)
		}
		ranges = rs
	case []any:
		for _, e := range x {
			s, _ := e.(string)
			rs, err := parseMultiRange(s)
			if err != nil {
				return false, fmt.Errorf("range %q: %w", s, errPython)
			}
			ranges = append(ranges, rs...)
		}
	}
	typ, _ := rl["type"].(string)
	threshold := 85.0
	if t, ok := rl["threshold"].(float64); ok {
		threshold = t
	}
	total, cells := true, 0
	for _, rg := range ranges {
		cells += (rg.maxRow - rg.minRow + 1) * (rg.maxCol - rg.minCol + 1)
		if cells > maxStyleCells {
			return false, fmt.Errorf("sheet_fuzzy ranges over %d cells: %w", maxStyleCells, metric.ErrOverCap)
		}
		for row := rg.minRow; row <= rg.maxRow; row++ {
			for col := rg.minCol; col <= rg.maxCol; col++ {
				// A fuzzy match of two cells can cost 25 million steps
				// (two 5000-character values), and a range holds millions
				// of cells.
				if err := ctx.Err(); err != nil {
					return false, err
				}
				coord := colLetter(col) + strconv.Itoa(row)
				v1, err := cellString(s1, coord)
				if err != nil {
					return false, err
				}
				v2, err := cellString(s2, coord)
				if err != nil {
					return false, err
				}
				v1, v2, err = normaliseFuzzy(v1, v2, rl)
				if err != nil {
					return false, err
				}
				var m bool
				switch typ {
				case "includes":
					m = strings.Contains(v1, v2)
				case "included_by":
					m = strings.Contains(v2, v1)
				case "fuzzy_match":
					r, err := metric.IndelRatio(ctx, v1, v2)
					if err != nil {
						return false, err
					}
					m = r*100 >= threshold
				case "exact_match":
					m = v1 == v2
				default:
					return false, fmt.Errorf("sheet_fuzzy type %q: %w", typ, errPython)
				}
				total = total && m
			}
		}
	}
	return total, nil
}

// cellString is str(read_cell_value(book, sheet, coord)).
func cellString(s side, coord string) (string, error) {
	if s.wb == nil {
		return "None", nil
	}
	v, err := s.wb.readCellValue(s.name, coord)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case nil:
		return "None", nil
	case float64:
		return metric.PyFloatRepr(v), nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("cell %s: %w", coord, errPython)
}

// normaliseFuzzy applies normalization, trim_leadings, trim_trailings,
// ignore_chars and ignore_case, in OSWorld's order.
func normaliseFuzzy(a, b string, rl map[string]any) (string, string, error) {
	if norm, ok := rl["normalization"].([]any); ok {
		for _, p := range norm {
			pair, ok := p.([]any)
			if !ok || len(pair) < 2 {
				return "", "", fmt.Errorf("normalization pair: %w", errPython)
			}
			from, ok1 := pair[0].(string)
			to, ok2 := pair[1].(string)
			if !ok1 || !ok2 {
				return "", "", fmt.Errorf("normalization pair: %w", errPython)
			}
			// strings.ReplaceAll inserts around every rune for an empty
			// pattern, as str.replace does.
			a, b = strings.ReplaceAll(a, from, to), strings.ReplaceAll(b, from, to)
		}
	}
	if t, ok := rl["trim_leadings"].(string); ok {
		a, b = strings.TrimLeft(a, t), strings.TrimLeft(b, t)
	}
	if t, ok := rl["trim_trailings"].(string); ok {
		a, b = strings.TrimRight(a, t), strings.TrimRight(b, t)
	}
	if t, ok := rl["ignore_chars"].(string); ok {
		drop := func(r rune) rune {
			if strings.ContainsRune(t, r) {
				return -1
			}
			return r
		}
		a, b = strings.Map(drop, a), strings.Map(drop, b)
	}
	if ic, _ := rl["ignore_case"].(bool); ic {
		a, b = metric.PyLower(a), metric.PyLower(b)
	}
	return a, b, nil
}

// checkCell checks one cell's value and style properties. Python catches
// every exception of this rule and scores the whole metric 0.
func (c *tableCtx) checkCell(r map[string]any) (bool, error) {
	s, err := c.parseIdx(r["sheet_idx"])
	if err != nil {
		return false, err
	}
	wb, err := s.book()
	if err != nil {
		return false, err
	}
	sh, err := wb.sheet(s.name)
	if oc := metric.OverCap(err); oc != nil {
		return false, oc
	}
	if err != nil || sh == nil {
		return false, errPython
	}
	coord, _ := r["coordinate"].(string)
	row, col, err := parseCoord(coord)
	if err != nil {
		return false, errPython
	}
	props, ok := r["props"].(map[string]any)
	if !ok {
		return false, errPython
	}
	cv := wb.cellView(sh, row, col)
	// Python goes through props in the task file's order and stops at the
	// first failure; a failure and an exception both score the metric 0,
	// so any order gives the same score.
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pass := true
	for _, k := range keys {
		rule, ok := props[k].(map[string]any)
		if !ok {
			return false, errPython
		}
		var val any
		if k == "value" {
			if val, err = wb.readCellValue(s.name, coord); err != nil {
				return false, err
			}
		} else if v, err := cv.styleOf(k); err == nil {
			val = v
		}
		ok, err := matchRule(val, rule)
		if err != nil {
			return false, errPython
		}
		pass = pass && ok
	}
	return pass, nil
}

// sheetAt resolves a sheet index to its workbook and openpyxl sheet;
// the sheet is nil when the book has no sheet of that name.
func (c *tableCtx) sheetAt(idx any) (*workbook, *sheet, error) {
	s, err := c.parseIdx(idx)
	if err != nil {
		return nil, nil, err
	}
	wb, err := s.book()
	if err != nil {
		return nil, nil, err
	}
	sh, err := wb.sheet(s.name)
	if err != nil {
		return nil, nil, err
	}
	return wb, sh, nil
}

// bothSides loads the two sheets a comparing rule names, sheet_idx0
// first: Python stops at the first side that raises.
func bothSides[T any](r map[string]any, load func(idx any) (T, error)) (a, b T, err error) {
	if a, err = load(r["sheet_idx0"]); err != nil {
		return a, b, err
	}
	b, err = load(r["sheet_idx1"])
	return a, b, err
}

// openpyxlSheet loads the side's worksheet; nil, nil when there is none.
func openpyxlSheet(s side) (*sheet, error) {
	wb, err := s.book()
	if err != nil {
		return nil, err
	}
	return wb.sheet(s.name)
}

// sheetOrNil is the sheet an index names for the rules that score a
// missing or unreadable sheet False: only a bad index is an error.
func (c *tableCtx) sheetOrNil(idx any) (*sheet, error) {
	s, err := c.parseIdx(idx)
	if err != nil {
		return nil, err
	}
	sh, err := openpyxlSheet(s)
	if err != nil {
		return nil, metric.Because(c.ctx, fmt.Errorf("sheet %q: %w", s.name, err))
	}
	return sh, nil
}

// freeze compares _freeze_compare_key of both sheets.
func (c *tableCtx) freeze(r map[string]any) (bool, error) {
	sh1, err := c.sheetOrNil(r["sheet_idx0"])
	if err != nil || sh1 == nil {
		return false, err
	}
	s2, err := c.parseIdx(r["sheet_idx1"])
	if err != nil {
		return false, err
	}
	sh2, err := openpyxlSheet(s2)
	if err != nil {
		return false, err
	}
	if sh2 == nil {
		return false, fmt.Errorf("sheet %q: %w", s2.name, errPython)
	}
	return freezeKey(sh1) == freezeKey(sh2), nil
}

// freezeKey is _freeze_compare_key: the split counts of a frozen pane,
// or the split and top-left cell of any other pane.
func freezeKey(s *sheet) string {
	p := s.pane
	if p == nil {
		return "none"
	}
	state := strings.ToLower(p.state)
	if state == "" {
		// openpyxl's Pane defaults state to "split".
		state = "split"
	}
	xs, ys := int(p.xSplit), int(p.ySplit)
	if state == "frozen" || state == "frozensplit" {
		return fmt.Sprintf("frozen %d %d", xs, ys)
	}
	return fmt.Sprintf("other %d %d %q", xs, ys, p.topLeftCell)
}

// zoom matches the sheet's zoomScale (100 when unset) against a rule.
func (c *tableCtx) zoom(r map[string]any) (bool, error) {
	sh, err := c.sheetOrNil(r["sheet_idx"])
	if err != nil || sh == nil {
		return false, err
	}
	z := 100.0
	if sh.zoom != nil && *sh.zoom != 0 {
		z = *sh.zoom
	}
	return matchRule(z, r)
}

// dataValidation needs at least as many validations as dv_props, each
// matching one of them.
func (c *tableCtx) dataValidation(r map[string]any) (bool, error) {
	sh, err := c.sheetOrNil(r["sheet_idx"])
	if err != nil || sh == nil {
		return false, err
	}
	props, _ := r["dv_props"].([]any)
	total := len(sh.dvs) >= len(props)
	for _, dv := range sh.dvs {
		m := false
		for _, p := range props {
			pm, ok := p.(map[string]any)
			if !ok {
				return false, errPython
			}
			all := true
			for attr, rule := range pm {
				rm, ok := rule.(map[string]any)
				if !ok {
					return false, errPython
				}
				ok, err := matchRule(dv.attr(attr), rm)
				if err != nil {
					return false, err
				}
				if !ok {
					all = false
					break
				}
			}
			if all {
				m = true
				break
			}
		}
		total = total && m
		if !total {
			break
		}
	}
	return total, nil
}

// attr is getattr(DataValidation, name) as openpyxl has it.
func (dv dataValidation) attr(name string) any {
	switch name {
	case "ranges", "sqref":
		return multiRange{dv.sqref}
	case "formula1":
		return dv.formula1
	case "formula2":
		return dv.formula2
	case "allowBlank", "showDropDown", "showInputMessage", "showErrorMessage", "allow_blank", "hide_drop_down":
		key := map[string]string{"allow_blank": "allowBlank", "hide_drop_down": "showDropDown"}[name]
		if key == "" {
			key = name
		}
		if v, ok := dv.attrs[key]; ok {
			return v
		}
		return false
	}
	if v, ok := dv.attrs[name]; ok {
		return v
	}
	return nil
}

// rowProps compares openpyxl's row_dimensions of both sheets.
func (c *tableCtx) rowProps(r map[string]any) (bool, error) {
	props := metric.Strings(r["props"])
	load := func(idx any) (map[int]map[string]any, error) {
		_, sh, err := c.sheetAt(idx)
		if err != nil {
			return nil, err
		}
		out := map[int]map[string]any{}
		if sh == nil {
			return out, nil
		}
		for row, attrs := range sh.rowAttrs {
			info := map[string]any{}
			for _, p := range props {
				v, err := rowProp(attrs, p)
				if err != nil {
					return nil, err
				}
				info[p] = v
			}
			out[row] = info
		}
		return out, nil
	}
	a, b, err := bothSides(r, load)
	if err != nil {
		return false, err
	}
	if len(a) != len(b) {
		return false, nil
	}
	for row, ia := range a {
		ib, ok := b[row]
		if !ok {
			return false, nil
		}
		for k, v := range ia {
			if !metric.PyEqual(v, ib[k]) {
				return false, nil
			}
		}
	}
	return true, nil
}

// rowProp is getattr(RowDimension, name).
func rowProp(attrs map[string]string, name string) (any, error) {
	switch name {
	case "hidden", "collapsed":
		return xmlBool(attrs[name], false), nil
	case "height", "ht":
		v, ok := attrs["ht"]
		if !ok {
			return nil, nil
		}
		return pyFloatAttr(v)
	case "outline_level", "outlineLevel":
		v, ok := attrs["outlineLevel"]
		if !ok {
			return 0.0, nil
		}
		return pyFloatAttr(v)
	}
	return nil, fmt.Errorf("row property %q: %w", name, errPython)
}
