package table

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// errPython stands for a Python exception inside OSWorld's metric: the
// Python run has no score, which the caller turns into 0.
var errPython = errors.New("the Python metric raises here")

// readCellValue is OSWorld's read_cell_value: the cell's XML in
// xl/worksheets/sheet{sheetId}.xml (the sheetId, not the relationship,
// names the part), as float, str or None (nil). OSWorld returns None
// where it cannot read the part; a part over a size cap is an error.
func (wb *workbook) readCellValue(sheetName, coord string) (any, error) {
	id := ""
	for _, s := range wb.sheets {
		if s.name == sheetName {
			id = s.sheetID
		}
	}
	if id == "" {
		return nil, nil
	}
	s, err := wb.sheetPart("xl/worksheets/sheet" + id + ".xml")
	if err != nil || s == nil {
		return nil, metric.OverCap(err)
	}
	s.index()
	i, ok := s.byRef[coord]
	if !ok {
		return nil, nil
	}
	c := &s.cells[i]
	switch c.typ {
	case "", "n":
		if !c.hasV {
			return nil, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(c.v), 64)
		if err != nil && !isRangeErr(err) {
			return nil, nil
		}
		return f, nil
	case "s":
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if !c.hasV || err != nil || n < 0 || n >= len(wb.sharedAll) {
			return nil, nil
		}
		return wb.sharedAll[n], nil
	case "str", "e":
		if !c.hasV {
			return nil, nil
		}
		return c.v, nil
	case "inlineStr":
		if !c.inlineT {
			return nil, nil
		}
		return c.inline, nil
	}
	return nil, nil
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

// matchRule is OSWorld's _match_value_to_rule: metric.MatchValueToRule
// with openpyxl's spreadsheet_range method added. A raise of the shared
// matcher is errPython; a pattern the regex engine cannot run stays an
// error.
func matchRule(value any, rule map[string]any) (bool, error) {
	if m, _ := rule["method"].(string); m == "spreadsheet_range" {
		got, ok := value.(multiRange)
		lims, ok2 := rule["ref"].([]any)
		if !ok || !ok2 || len(lims) < 2 {
			return false, fmt.Errorf("spreadsheet_range on %T: %w", value, errPython)
		}
		sub, err1 := parseMultiRange(fmt.Sprint(lims[0]))
		super, err2 := parseMultiRange(fmt.Sprint(lims[1]))
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("spreadsheet_range ref: %w", errPython)
		}
		return rangesWithin(sub, got.ranges) && rangesWithin(got.ranges, super), nil
	}
	ok, err := metric.MatchValueToRule(value, rule)
	if errors.Is(err, metric.ErrPyRaises) {
		return false, fmt.Errorf("%w: %w", errPython, err)
	}
	return ok, err
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
