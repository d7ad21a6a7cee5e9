package table

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// nonRGB is what openpyxl's Color.rgb gives for a theme, indexed or auto
// colour: not a string but the descriptor's error text, one object that
// equals itself and no colour string.
type nonRGB struct{}

func (nonRGB) String() string { return "Values must be of type <class 'str'>" }

// PyEqual holds between any two such values, whatever colours they stand
// for: both are the same descriptor object in openpyxl.
func (nonRGB) PyEqual(other any) bool {
	_, ok := other.(nonRGB)
	return ok
}

// hyperlinkObj is openpyxl's Hyperlink object of one cell: equal to no
// string, and to another only with the same attributes.
type hyperlinkObj struct{ coord, attrs string }

func (h hyperlinkObj) PyEqual(other any) bool {
	o, ok := other.(hyperlinkObj)
	return ok && h == o
}

// multiRange is openpyxl's MultiCellRange (a data validation's ranges) as
// a rule value: no Python list, and equal to no value a rule can hold.
type multiRange struct{ ranges []cellRange }

func (multiRange) PyEqual(any) bool { return false }

// xmlColor is a CT_Color element.
type xmlColor struct {
	RGB     *string `xml:"rgb,attr"`
	Indexed *string `xml:"indexed,attr"`
	Theme   *string `xml:"theme,attr"`
	Auto    *string `xml:"auto,attr"`
}

// rgb is openpyxl's Color.rgb: the aRGB string, or nonRGB when the colour
// is indexed, themed or automatic (openpyxl prefers those to rgb).
func (c *xmlColor) rgb() any {
	if c.Indexed != nil || c.Theme != nil || c.Auto != nil || c.RGB == nil {
		return nonRGB{}
	}
	return *c.RGB
}

type valAttr struct {
	Val *string `xml:"val,attr"`
}

type xmlFont struct {
	Name      *valAttr  `xml:"name"`
	Family    *valAttr  `xml:"family"`
	Color     *xmlColor `xml:"color"`
	B         *valAttr  `xml:"b"`
	I         *valAttr  `xml:"i"`
	U         *valAttr  `xml:"u"`
	Sz        *valAttr  `xml:"sz"`
	Strike    *valAttr  `xml:"strike"`
	VertAlign *valAttr  `xml:"vertAlign"`
}

type xmlFill struct {
	Pattern *struct {
		Type    *string   `xml:"patternType,attr"`
		FgColor *xmlColor `xml:"fgColor"`
		BgColor *xmlColor `xml:"bgColor"`
	} `xml:"patternFill"`
	Gradient *struct{} `xml:"gradientFill"`
}

type xmlXf struct {
	NumFmtID int `xml:"numFmtId,attr"`
	FontID   int `xml:"fontId,attr"`
	FillID   int `xml:"fillId,attr"`
}

type xmlDxf struct {
	Font   *xmlFont `xml:"font"`
	NumFmt *struct {
		Code string `xml:"formatCode,attr"`
	} `xml:"numFmt"`
	Fill *xmlFill `xml:"fill"`
}

// styleSheet is xl/styles.xml.
type styleSheet struct {
	NumFmts []struct {
		ID   int    `xml:"numFmtId,attr"`
		Code string `xml:"formatCode,attr"`
	} `xml:"numFmts>numFmt"`
	Fonts   []xmlFont `xml:"fonts>font"`
	Fills   []xmlFill `xml:"fills>fill"`
	CellXfs []xmlXf   `xml:"cellXfs>xf"`
	Dxfs    []xmlDxf  `xml:"dxfs>dxf"`

	dateXf, timedeltaXf map[int]bool
}

func parseStyles(b []byte) (*styleSheet, error) {
	var s styleSheet
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("xlsx styles.xml: %w", err)
	}
	s.dateXf, s.timedeltaXf = map[int]bool{}, map[int]bool{}
	for i, xf := range s.CellXfs {
		code := s.formatCode(xf.NumFmtID)
		s.dateXf[i] = isDateFormat(code)
		s.timedeltaXf[i] = isTimedeltaFormat(code)
	}
	return &s, nil
}

// formatCode is the number format of a numFmtId, as openpyxl names it.
func (s *styleSheet) formatCode(id int) string {
	for _, f := range s.NumFmts {
		if f.ID == id {
			return f.Code
		}
	}
	if c, ok := builtinFormats[id]; ok {
		return c
	}
	return "General"
}

// xf returns the cell format a cell's s attribute names; openpyxl falls
// back to the zero style for an index past the list.
func (s *styleSheet) xf(i int) xmlXf {
	if i >= 0 && i < len(s.CellXfs) {
		return s.CellXfs[i]
	}
	return xmlXf{}
}

func (s *styleSheet) font(xf xmlXf) *xmlFont {
	if xf.FontID >= 0 && xf.FontID < len(s.Fonts) {
		return &s.Fonts[xf.FontID]
	}
	return &xmlFont{}
}

func (s *styleSheet) fill(xf xmlXf) *xmlFill {
	if xf.FillID >= 0 && xf.FillID < len(s.Fills) {
		return &s.Fills[xf.FillID]
	}
	return &xmlFill{}
}

// builtinFormats are openpyxl's BUILTIN_FORMATS.
var builtinFormats = map[int]string{
	0: "General", 1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00",
	5: `"$"#,##0_);("$"#,##0)`, 6: `"$"#,##0_);[Red]("$"#,##0)`,
	7: `"$"#,##0.00_);("$"#,##0.00)`, 8: `"$"#,##0.00_);[Red]("$"#,##0.00)`,
	9: "0%", 10: "0.00%", 11: "0.00E+00", 12: "# ?/?", 13: "# ??/??",
	14: "mm-dd-yy", 15: "d-mmm-yy", 16: "d-mmm", 17: "mmm-yy",
	18: "h:mm AM/PM", 19: "h:mm:ss AM/PM", 20: "h:mm", 21: "h:mm:ss", 22: "m/d/yy h:mm",
	37: "#,##0_);(#,##0)", 38: "#,##0_);[Red](#,##0)", 39: "#,##0.00_);(#,##0.00)",
	40: "#,##0.00_);[Red](#,##0.00)",
	41: `_(* #,##0_);_(* \(#,##0\);_(* "-"_);_(@_)`,
	42: `_("$"* #,##0_);_("$"* \(#,##0\);_("$"* "-"_);_(@_)`,
	43: `_(* #,##0.00_);_(* \(#,##0.00\);_(* "-"??_);_(@_)`,
	44: `_("$"* #,##0.00_)_("$"* \(#,##0.00\)_("$"* "-"??_)_(@_)`,
	45: "mm:ss", 46: "[h]:mm:ss", 47: "mmss.0", 48: "##0.0E+0", 49: "@",
}

var (
	dateLetter = regexp.MustCompile(`[^\\][dmhysDMHYS]`)
	timedelta  = regexp.MustCompile(`(?i)\[hh?\](:mm(:ss(\.0*)?)?)?|\[mm?\](:ss(\.0*)?)?|\[ss?\](\.0*)?`)
)

// stripFormat drops what openpyxl's is_date_format ignores: quoted text
// and bracketed groups other than the elapsed-time [h] [hh] [m] [mm] [s]
// [ss].
func stripFormat(code string) string {
	var b strings.Builder
	for i := 0; i < len(code); i++ {
		switch code[i] {
		case '"':
			if j := strings.IndexByte(code[i+1:], '"'); j >= 0 {
				i += j + 1
				continue
			}
		case '[':
			if j := strings.IndexByte(code[i+1:], ']'); j >= 0 {
				switch code[i+1 : i+1+j] {
				case "h", "hh", "m", "mm", "s", "ss":
				default:
					i += j + 1
					continue
				}
			}
		}
		b.WriteByte(code[i])
	}
	return b.String()
}

// isDateFormat is openpyxl's is_date_format: the first section has a date
// or time letter, not escaped, after some other character.
func isDateFormat(code string) bool {
	first, _, _ := strings.Cut(code, ";")
	return dateLetter.MatchString(stripFormat(first))
}

// isTimedeltaFormat is openpyxl's is_timedelta_format ([h]:mm:ss).
func isTimedeltaFormat(code string) bool {
	first, _, _ := strings.Cut(code, ";")
	return timedelta.MatchString(first)
}

// pyFloatAttr is Python's float() of an XML attribute.
func pyFloatAttr(s string) (float64, error) {
	f, err := metric.PyFloat(s)
	if err != nil {
		return 0, fmt.Errorf("xlsx: number %q: %w", s, err)
	}
	return f, nil
}
