package table

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// xmlCell is one <c> element as written in the sheet.
type xmlCell struct {
	row, col int
	ref      string // the r attribute as written, for read_cell_value
	typ      string // the t attribute
	v        string
	hasV     bool
	inline   string // text of <is>, as openpyxl reads it
	inlineT  bool   // <is> has a direct <t> child, as xmltodict needs
	hasIs    bool
	formula  bool
	fText    string
	style    int
}

// pane is <sheetView><pane>.
type pane struct {
	xSplit, ySplit     float64
	hasX, hasY         bool
	state, topLeftCell string
}

// dataValidation is one <dataValidation> with openpyxl's attribute names.
type dataValidation struct {
	attrs    map[string]any // as openpyxl exposes them (None absent)
	sqref    []cellRange
	formula1 any
	formula2 any
}

// sheet is a worksheet as openpyxl sees it.
type sheet struct {
	part     string
	cells    []xmlCell
	merged   []cellRange
	zoom     *float64
	pane     *pane
	rowAttrs map[int]map[string]string // rows whose <row> has attributes past r and spans
	dvs      []dataValidation
	condFmts int
	cfTypes  []string // type of every <cfRule>
	drawing  string   // relationship id of <drawing>
	links    []link   // <hyperlink> elements

	byPos map[[2]int]int // (row, col) → last index in cells
	byRef map[string]int // r attribute → first index in cells
}

// link is a <hyperlink>: its range and its other attributes.
type link struct {
	rng   cellRange
	attrs string
}

// parseSheet reads a worksheet part in one streaming pass.
func parseSheet(b []byte) (*sheet, error) {
	s := &sheet{rowAttrs: map[int]map[string]string{}}
	d := xml.NewDecoder(bytes.NewReader(b))
	var (
		cur         *xmlCell
		inV, inIs   bool
		inF         bool
		isDepth     int
		inIsT       bool
		text        strings.Builder
		rowN, colN  int
		views       int
		dv          *dataValidation
		inF1, inF2  bool
		inDVFormula bool
		dvText      strings.Builder
		isRunT      bool
		depth       int
		inSheetView bool
		isTDirect   bool
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("xlsx sheet: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch t.Name.Local {
			case "row":
				rowN++
				colN = 0
				attrs := map[string]string{}
				for _, a := range t.Attr {
					if a.Name.Space != "" {
						continue
					}
					attrs[a.Name.Local] = a.Value
				}
				if r, ok := attrs["r"]; ok {
					n, err := atoiBounded(r)
					if err != nil {
						return nil, err
					}
					rowN = n
				}
				if rowN > maxRows {
					return nil, fmt.Errorf("%w: row %d", errBadCoord, rowN)
				}
				extra := false
				for k := range attrs {
					if k != "r" && k != "spans" {
						extra = true
					}
				}
				if extra {
					s.rowAttrs[rowN] = attrs
				}
			case "c":
				colN++
				if colN > maxCols {
					return nil, fmt.Errorf("%w: column %d", errBadCoord, colN)
				}
				c := xmlCell{row: rowN, col: colN}
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "r":
						c.ref = a.Value
						r, col, err := parseCoord(a.Value)
						if err != nil {
							return nil, err
						}
						c.row, c.col = r, col
						colN = col
					case "t":
						c.typ = a.Value
					case "s":
						n, err := atoiBounded(a.Value)
						if err != nil {
							return nil, err
						}
						c.style = n
					}
				}
				if rowN == 0 {
					// A cell outside any <row>, as openpyxl counts it.
					c.row = max(c.row, 1)
				}
				cur = &c
			case "v":
				if cur != nil {
					inV = true
					text.Reset()
				}
			case "f":
				if cur != nil {
					cur.formula = true
					inF = true
					text.Reset()
				}
			case "is":
				if cur != nil {
					cur.hasIs = true
					inIs = true
					isDepth = depth
					text.Reset()
				}
			case "t":
				if inIs {
					inIsT = true
					isTDirect = depth == isDepth+1
					if isTDirect {
						cur.inlineT = true
					}
				}
			case "rPh":
				if inIs {
					isRunT = true
				}
			case "mergeCell":
				for _, a := range t.Attr {
					if a.Name.Local == "ref" {
						r, err := parseRange(a.Value)
						if err != nil {
							return nil, err
						}
						s.merged = append(s.merged, r)
					}
				}
			case "sheetView":
				views++
				inSheetView = views == 1
				if inSheetView {
					for _, a := range t.Attr {
						if a.Name.Local == "zoomScale" {
							f, err := pyFloatAttr(a.Value)
							if err != nil {
								return nil, err
							}
							s.zoom = &f
						}
					}
				}
			case "pane":
				if inSheetView && s.pane == nil {
					p := &pane{}
					for _, a := range t.Attr {
						switch a.Name.Local {
						case "xSplit":
							f, err := pyFloatAttr(a.Value)
							if err != nil {
								return nil, err
							}
							p.xSplit, p.hasX = f, true
						case "ySplit":
							f, err := pyFloatAttr(a.Value)
							if err != nil {
								return nil, err
							}
							p.ySplit, p.hasY = f, true
						case "state":
							p.state = a.Value
						case "topLeftCell":
							p.topLeftCell = a.Value
						}
					}
					s.pane = p
				}
			case "dataValidation":
				v := dataValidation{attrs: map[string]any{}}
				for _, a := range t.Attr {
					if a.Name.Space != "" {
						continue
					}
					if a.Name.Local == "sqref" {
						rs, err := parseMultiRange(a.Value)
						if err != nil {
							return nil, err
						}
						v.sqref = rs
						continue
					}
					v.attrs[a.Name.Local] = dvAttr(a.Name.Local, a.Value)
				}
				dv = &v
			case "formula1", "formula2":
				if dv != nil {
					inDVFormula = true
					inF1 = t.Name.Local == "formula1"
					inF2 = !inF1
					dvText.Reset()
				}
			case "conditionalFormatting":
				s.condFmts++
			case "cfRule":
				for _, a := range t.Attr {
					if a.Name.Local == "type" && a.Name.Space == "" {
						s.cfTypes = append(s.cfTypes, a.Value)
					}
				}
			case "hyperlink":
				var l link
				var attrs []string
				for _, a := range t.Attr {
					if a.Name.Local == "ref" && a.Name.Space == "" {
						r, err := parseRange(a.Value)
						if err != nil {
							return nil, err
						}
						l.rng = r
						continue
					}
					attrs = append(attrs, a.Name.Local+"="+a.Value)
				}
				slices.Sort(attrs)
				l.attrs = strings.Join(attrs, "\x00")
				s.links = append(s.links, l)
			case "drawing":
				for _, a := range t.Attr {
					if a.Name.Local == "id" {
						s.drawing = a.Value
					}
				}
			}
		case xml.EndElement:
			depth--
			switch t.Name.Local {
			case "c":
				if cur != nil {
					s.cells = append(s.cells, *cur)
					if len(s.cells) > maxGridCells {
						return nil, fmt.Errorf("xlsx sheet: more than %d cells: %w", maxGridCells, metric.ErrOverCap)
					}
				}
				cur = nil
			case "f":
				if inF && cur != nil {
					cur.fText = text.String()
				}
				inF = false
			case "v":
				if inV && cur != nil {
					cur.v, cur.hasV = text.String(), true
				}
				inV = false
			case "is":
				if inIs && cur != nil {
					cur.inline = text.String()
				}
				inIs = false
			case "t":
				inIsT = false
			case "rPh":
				isRunT = false
			case "sheetView":
				inSheetView = false
			case "formula1", "formula2":
				if inDVFormula && dv != nil {
					if inF1 {
						dv.formula1 = dvText.String()
					} else if inF2 {
						dv.formula2 = dvText.String()
					}
				}
				inDVFormula, inF1, inF2 = false, false, false
			case "dataValidation":
				if dv != nil {
					s.dvs = append(s.dvs, *dv)
				}
				dv = nil
			}
		case xml.CharData:
			switch {
			case inV, inF:
				text.Write(t)
			case inIs && inIsT && !isRunT:
				text.Write(t)
			case inDVFormula:
				dvText.Write(t)
			}
		}
	}
}

// dvAttr converts a dataValidation attribute to openpyxl's Python type.
func dvAttr(name, v string) any {
	switch name {
	case "allowBlank", "showDropDown", "showInputMessage", "showErrorMessage":
		return xmlBool(v, false)
	}
	return v
}

func atoiBounded(s string) (int, error) {
	n := 0
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: empty number", errBadCoord)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", errBadCoord, s)
		}
		n = n*10 + int(c-'0')
		if n > maxCellCoord {
			return 0, fmt.Errorf("%w: %q", errBadCoord, s)
		}
	}
	return n, nil
}

// maxRowCol is openpyxl's max_row and max_column over the cells it holds
// (the cells written, and the merged cells it creates).
func (s *sheet) maxRowCol() (int, int) {
	mr, mc := 0, 0
	for _, c := range s.cells {
		mr, mc = max(mr, c.row), max(mc, c.col)
	}
	for _, m := range s.merged {
		if m.maxRow > m.minRow || m.maxCol > m.minCol {
			mr, mc = max(mr, m.maxRow), max(mc, m.maxCol)
		}
	}
	return max(mr, 1), max(mc, 1)
}

// cellAt returns the last cell written at row, col (openpyxl keeps the
// last of duplicates).
func (s *sheet) cellAt(row, col int) (xmlCell, bool) {
	s.index()
	i, ok := s.byPos[[2]int{row, col}]
	if !ok {
		return xmlCell{}, false
	}
	return s.cells[i], true
}

func (s *sheet) index() {
	if s.byPos != nil {
		return
	}
	s.byPos = make(map[[2]int]int, len(s.cells))
	s.byRef = make(map[string]int, len(s.cells))
	for i, c := range s.cells {
		s.byPos[[2]int{c.row, c.col}] = i
		if _, ok := s.byRef[c.ref]; !ok && c.ref != "" {
			s.byRef[c.ref] = i
		}
	}
}

// isMergedCell tells whether openpyxl makes row, col a MergedCell: inside
// a merged range but not its top-left cell.
func (s *sheet) isMergedCell(row, col int) bool {
	for _, m := range s.merged {
		if m.contains(row, col) && (row != m.minRow || col != m.minCol) {
			return true
		}
	}
	return false
}
