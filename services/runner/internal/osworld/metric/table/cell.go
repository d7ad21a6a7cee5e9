package table

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/pyre"
)

// errPython stands for a Python exception inside OSWorld's metric: the
// Python run has no score, which the caller turns into 0.
var errPython = errors.New("the Python metric raises here")

// readCellValue is OSWorld's read_cell_value: the cell's XML in
// xl/worksheets/sheet{sheetId}.xml (the sheetId, not the relationship,
// names the part), as float, str or None (nil).
func (wb *workbook) readCellValue(sheetName, coord string) any {
	id := ""
	for _, s := range wb.sheets {
		if s.name == sheetName {
			id = s.sheetID
		}
	}
	if id == "" {
		return nil
	}
	s, err := wb.sheetPart("xl/worksheets/sheet" + id + ".xml")
	if err != nil || s == nil {
		return nil
	}
	s.index()
	i, ok := s.byRef[coord]
	if !ok {
		return nil
	}
	c := &s.cells[i]
	switch c.typ {
	case "", "n":
		if !c.hasV {
			return nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(c.v), 64)
		if err != nil && !isRangeErr(err) {
			return nil
		}
		return f
	case "s":
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if !c.hasV || err != nil || n < 0 || n >= len(wb.sharedAll) {
			return nil
		}
		return wb.sharedAll[n]
	case "str", "e":
		if !c.hasV {
			return nil
		}
		return c.v
	case "inlineStr":
		if !c.inlineT {
			return nil
		}
		return c.inline
	}
	return nil
}

// sheetPart parses a worksheet part by path, nil when absent.
func (wb *workbook) sheetPart(part string) (*sheet, error) {
	for _, ref := range wb.sheets {
		if ref.part == part {
			return wb.sheet(ref.name)
		}
	}
	if s, ok := wb.parsed["part:"+part]; ok {
		return s, nil
	}
	b, err := wb.z.read(part)
	if err != nil {
		return nil, err
	}
	s, err := parseSheet(b)
	if err != nil {
		return nil, err
	}
	wb.parsed["part:"+part] = s
	return s, nil
}

// cellView is one openpyxl cell of a fully loaded (not data-only)
// workbook: what _read_cell_style looks at.
type cellView struct {
	wb       *workbook
	s        *sheet
	c        xmlCell
	row, col int
	present  bool
	merged   bool
}

func (wb *workbook) cellView(s *sheet, row, col int) cellView {
	return wb.cellViewMerged(s, row, col, s.isMergedCell(row, col))
}

// cellViewMerged is cellView with the MergedCell test done by the caller.
func (wb *workbook) cellViewMerged(s *sheet, row, col int, merged bool) cellView {
	c, ok := s.cellAt(row, col)
	v := cellView{wb: wb, s: s, c: c, row: row, col: col, present: ok, merged: merged}
	if v.merged {
		// openpyxl replaces the cell by a MergedCell: no value, zero style.
		v.present = false
		v.c = xmlCell{}
	}
	return v
}

// valueIsNone is `cell.value is None` with formulas kept as text.
func (v cellView) valueIsNone() bool {
	if v.linked() {
		// openpyxl's hyperlink setter gives an empty cell the link's
		// target as its value.
		return false
	}
	if !v.present {
		return true
	}
	c := v.c
	if c.formula {
		return false
	}
	if c.typ == "inlineStr" && c.hasIs {
		return false
	}
	return !c.hasV || c.v == ""
}

// linked tells whether a <hyperlink> covers the cell; openpyxl does not
// give MergedCells a link.
func (v cellView) linked() bool {
	if v.merged {
		return false
	}
	for _, l := range v.s.links {
		if l.rng.contains(v.row, v.col) {
			return true
		}
	}
	return false
}

// isNumeric is `cell.data_type == "n"`: a plain number, not a date.
func (v cellView) isNumeric() bool {
	c := v.c
	if !v.present || c.formula || c.typ != "" && c.typ != "n" {
		return false
	}
	return !v.wb.styles.dateXf[c.style]
}

func (v cellView) xf() xmlXf {
	if !v.present {
		return xmlXf{}
	}
	return v.wb.styles.xf(v.c.style)
}

// styleOf is OSWorld's _read_cell_style for a plain cell; an error is the
// exception Python raises (an absent font colour, an unknown property).
func (v cellView) styleOf(name string) (any, error) {
	st := v.wb.styles
	font := st.font(v.xf())
	none := v.valueIsNone()
	switch name {
	case "number_format":
		if none || !v.isNumeric() {
			return nil, nil
		}
		return st.formatCode(v.xf().NumFmtID), nil
	case "font_name", "font_family", "font_color", "font_bold", "font_italic", "font_underline", "font_size":
		if none {
			return nil, nil
		}
		return fontProp(font, name)
	case "fill_type":
		if st.fill(v.xf()).Gradient != nil {
			return "gradientFill", nil
		}
		return "patternFill", nil
	case "bgcolor", "fgcolor":
		f := st.fill(v.xf())
		if f.Gradient != nil {
			return nil, nil
		}
		if f.Pattern == nil || f.Pattern.FgColor == nil {
			return "00000000", nil
		}
		return f.Pattern.FgColor.rgb(), nil
	case "merge":
		return v.merged, nil
	case "hyperlink":
		// `cell.hyperlink or ""`: openpyxl binds each <hyperlink> to the
		// cells of its range.
		if none {
			return nil, nil
		}
		for _, l := range v.s.links {
			if !v.merged && l.rng.contains(v.row, v.col) {
				return hyperlinkObj{coord: colLetter(v.col) + strconv.Itoa(v.row), attrs: l.attrs}, nil
			}
		}
		return "", nil
	}
	return nil, fmt.Errorf("style %q: %w", name, errPython)
}

// fontProp reads one font property as openpyxl's Font exposes it.
func fontProp(f *xmlFont, name string) (any, error) {
	switch name {
	case "font_name":
		if f.Name == nil || f.Name.Val == nil {
			return nil, nil
		}
		return *f.Name.Val, nil
	case "font_family":
		if f.Family == nil || f.Family.Val == nil {
			return nil, nil
		}
		x, err := pyFloatAttr(*f.Family.Val)
		if err != nil {
			return nil, err
		}
		return x, nil
	case "font_color":
		if f.Color == nil {
			return nil, fmt.Errorf("font colour of a font without one: %w", errPython)
		}
		return f.Color.rgb(), nil
	case "font_bold":
		return boolElem(f.B), nil
	case "font_italic":
		return boolElem(f.I), nil
	case "font_underline":
		if f.U == nil {
			return nil, nil
		}
		if f.U.Val == nil {
			return "single", nil
		}
		return *f.U.Val, nil
	case "font_size":
		if f.Sz == nil || f.Sz.Val == nil {
			return nil, nil
		}
		x, err := pyFloatAttr(*f.Sz.Val)
		if err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, fmt.Errorf("style %q: %w", name, errPython)
}

// boolElem is an openpyxl boolean element: absent False, bare True.
func boolElem(v *valAttr) bool {
	if v == nil {
		return false
	}
	if v.Val == nil {
		return true
	}
	return xmlBool(*v.Val, true)
}

// matchRule is OSWorld's _match_value_to_rule; an error is Python raising.
func matchRule(value any, rule map[string]any) (bool, error) {
	method, ok := rule["method"].(string)
	if !ok {
		return false, fmt.Errorf("rule without a method: %w", errPython)
	}
	ref := rule["ref"]
	switch {
	case strings.HasPrefix(method, "re"):
		var flags []pyre.Flag
		for _, f := range strings.Split(method, ".")[1:] {
			fl, ok := reFlags[f]
			if !ok {
				return false, fmt.Errorf("re flag %q: %w", f, errPython)
			}
			flags = append(flags, fl)
		}
		p, ok1 := ref.(string)
		s, ok2 := value.(string)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("re.search on a %T: %w", value, errPython)
		}
		re, err := pyre.Compile(p, flags...)
		if err != nil {
			return false, fmt.Errorf("pattern %q: %w", p, err)
		}
		m, err := re.Search(s)
		return m != nil, err
	case method == "eq":
		return ruleEq(value, ref), nil
	case method == "ne":
		return !ruleEq(value, ref), nil
	case method == "le", method == "lt", method == "ge", method == "gt":
		c, err := ruleCmp(value, ref)
		if err != nil {
			return false, err
		}
		return map[string]bool{"le": c <= 0, "lt": c < 0, "ge": c >= 0, "gt": c > 0}[method], nil
	case strings.HasPrefix(method, "approx"):
		_, th, _ := strings.Cut(method, ":")
		threshold, err := strconv.ParseFloat(strings.TrimSpace(th), 64)
		if err != nil {
			return false, fmt.Errorf("approx threshold %q: %w", th, errPython)
		}
		r, ok := ruleNumber(ref)
		if !ok {
			return false, fmt.Errorf("approx ref %T: %w", ref, errPython)
		}
		var f float64
		switch x := value.(type) {
		case string:
			if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
				return false, nil
			}
		default:
			if f, ok = ruleNumber(x); !ok {
				return false, nil
			}
		}
		return math.Abs(f-r) <= threshold, nil
	case method == "spreadsheet_range":
		got, ok := value.([]cellRange)
		lims, ok2 := ref.([]any)
		if !ok || !ok2 || len(lims) < 2 {
			return false, fmt.Errorf("spreadsheet_range on %T: %w", value, errPython)
		}
		sub, err1 := parseMultiRange(fmt.Sprint(lims[0]))
		super, err2 := parseMultiRange(fmt.Sprint(lims[1]))
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("spreadsheet_range ref: %w", errPython)
		}
		return rangesWithin(sub, got) && rangesWithin(got, super), nil
	case strings.HasPrefix(method, "range.") && len(method) >= 8:
		lims, ok := ref.([]any)
		if !ok || len(lims) < 2 {
			return false, fmt.Errorf("range ref: %w", errPython)
		}
		lc, err := ruleCmp(lims[0], value)
		if err != nil {
			return false, err
		}
		rc, err := ruleCmp(value, lims[1])
		if err != nil {
			return false, err
		}
		cmp := func(op byte, c int) (bool, error) {
			switch op {
			case 'e':
				return c <= 0, nil
			case 't':
				return c < 0, nil
			}
			return false, fmt.Errorf("range method %q: %w", method, errPython)
		}
		l, err := cmp(method[6], lc)
		if err != nil {
			return false, err
		}
		r, err := cmp(method[7], rc)
		return l && r, err
	case method == "str_list_eq", method == "str_set_eq":
		s, ok := value.(string)
		if !ok {
			return false, fmt.Errorf("%s on %T: %w", method, value, errPython)
		}
		got := strings.Split(strings.Trim(s, `"'`), ",")
		var want []string
		refs, _ := ref.([]any)
		for _, r := range refs {
			rs, ok := r.(string)
			if !ok {
				return false, nil
			}
			want = append(want, rs)
		}
		if method == "str_list_eq" {
			return slices.Equal(got, want), nil
		}
		slices.Sort(got)
		slices.Sort(want)
		return slices.Equal(slices.Compact(got), slices.Compact(want)), nil
	}
	return false, fmt.Errorf("rule method %q: %w", method, errPython)
}

// rangesWithin is OSWorld's _multicellrange_containsby: every range of
// sub lies inside one range of super.
func rangesWithin(sub, super []cellRange) bool {
	for _, r := range sub {
		if !slices.ContainsFunc(super, r.within) {
			return false
		}
	}
	return true
}

var reFlags = map[string]pyre.Flag{
	"I": pyre.IgnoreCase, "IGNORECASE": pyre.IgnoreCase,
	"M": pyre.Multiline, "MULTILINE": pyre.Multiline,
	"S": pyre.DotAll, "DOTALL": pyre.DotAll,
	"X": pyre.Verbose, "VERBOSE": pyre.Verbose,
	"U": 0, "UNICODE": 0,
}

func ruleNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// ruleEq is Python's == between a cell property and a JSON value.
func ruleEq(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if x, ok := ruleNumber(a); ok {
		y, ok := ruleNumber(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case nonRGB:
		_, ok := b.(nonRGB)
		return ok
	case hyperlinkObj:
		y, ok := b.(hyperlinkObj)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !ruleEq(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// ruleCmp orders numbers with numbers and strings with strings; anything
// else is Python's TypeError.
func ruleCmp(a, b any) (int, error) {
	if x, ok := ruleNumber(a); ok {
		if y, ok := ruleNumber(b); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	}
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	if ok1 && ok2 {
		return strings.Compare(x, y), nil
	}
	return 0, fmt.Errorf("ordering %T and %T: %w", a, b, errPython)
}

// pyStr is str(cell.value) for a fully loaded workbook, "" for None (as
// _normalize_city_string has it): formulas as their text, dates as
// Python prints datetimes.
func (v cellView) pyStr() string {
	if v.valueIsNone() {
		return ""
	}
	c := v.c
	if c.formula {
		return "=" + c.fText
	}
	switch c.typ {
	case "s":
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if err != nil || n < 0 || n >= len(v.wb.shared) {
			return ""
		}
		return v.wb.shared[n]
	case "inlineStr":
		return c.inline
	case "b":
		return map[bool]string{true: "True", false: "False"}[c.v != "0"]
	case "", "n":
		n, err := castNumber(c.v)
		if err != nil {
			return ""
		}
		if v.wb.styles.dateXf[c.style] {
			return pyStr(v.wb.fromExcel(n, v.wb.styles.timedeltaXf[c.style]))
		}
		return pyStr(n)
	}
	return c.v
}
