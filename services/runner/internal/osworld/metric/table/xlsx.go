package table

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Limits on what one workbook may cost to read. A real OSWorld workbook is
// a few hundred kilobytes; these stop zip bombs and sparse sheets whose
// one far cell would make the pandas grid billions of cells wide. openpyxl
// and pandas read past the first five and maxStyleCells, so the errors
// for those wrap metric.ErrOverCap: such a workbook is not scored.
// maxRows and maxCols are Excel's own bounds.
const (
	maxBookFile  = 64 << 20  // the xlsx file itself
	maxPart      = 128 << 20 // one decompressed part
	maxInflated  = 512 << 20 // all parts of one workbook together
	maxGridCells = 20 << 20  // rows × columns of one pandas frame
	maxCellCoord = 1 << 24   // bounds parsing a number
	maxRows      = 1 << 20   // Excel's last row
	maxCols      = 1 << 14   // Excel's last column, XFD
	// maxStyleCells bounds the cells a style rule walks (every cell from
	// A1 to the last one, as openpyxl's iter_cols does) and the cells of
	// a sheet_fuzzy range.
	maxStyleCells = 4 << 20
)

var (
	errBudget   = fmt.Errorf("xlsx: a part over %d bytes, or all parts over %d: %w", maxPart, maxInflated, metric.ErrOverCap)
	errNoPart   = errors.New("xlsx: part missing")
	errBadCoord = errors.New("xlsx: bad cell reference")
)

// xlsxZip reads the parts of an xlsx package with a decompression budget.
type xlsxZip struct {
	zr     *zip.Reader
	parts  map[string]*zip.File
	budget int64
}

func openZip(p string) (*xlsxZip, error) {
	// Stat before opening: opening a FIFO would block.
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("xlsx: %s is not a regular file", p)
	}
	if st.Size() > maxBookFile {
		return nil, fmt.Errorf("xlsx: %s is over %d bytes: %w", p, maxBookFile, metric.ErrOverCap)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBookFile))
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("xlsx: %w", err)
	}
	z := &xlsxZip{zr: zr, parts: map[string]*zip.File{}, budget: maxInflated}
	for _, zf := range zr.File {
		z.parts[strings.TrimPrefix(zf.Name, "/")] = zf
	}
	return z, nil
}

// read returns one part's bytes; errNoPart when absent. archive/zip checks
// the declared size against what inflates, so the declared size bounds it.
func (z *xlsxZip) read(name string) ([]byte, error) {
	zf, ok := z.parts[strings.TrimPrefix(name, "/")]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNoPart, name)
	}
	if limit := min(int64(maxPart), z.budget); zf.UncompressedSize64 > uint64(max(limit, 0)) {
		// Over the cap if the part holds what its header says; a header
		// that lies is a corrupt workbook.
		if err := metric.ZipEntryOverCap(zf, max(limit, 0)); !errors.Is(err, metric.ErrOverCap) {
			return nil, fmt.Errorf("xlsx part %s: %w", name, err)
		}
		return nil, errBudget
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("xlsx part %s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(zf.UncompressedSize64)+1))
	if err != nil {
		return nil, fmt.Errorf("xlsx part %s: %w", name, err)
	}
	if int64(len(b)) > int64(zf.UncompressedSize64) {
		return nil, fmt.Errorf("xlsx part %s inflates past its declared %d bytes", name, zf.UncompressedSize64)
	}
	z.budget -= int64(len(b))
	return b, nil
}

// rels reads the relationships of a part: id → resolved target path.
func (z *xlsxZip) rels(part string) (map[string]string, error) {
	out := map[string]string{}
	l, err := z.relList(part)
	for _, r := range l {
		out[r.id] = r.target
	}
	return out, err
}

// typedRels lists the targets of a part's relationships of one type, in
// the order of the .rels file.
func (z *xlsxZip) typedRels(part, typ string) ([]string, error) {
	l, err := z.relList(part)
	var out []string
	for _, r := range l {
		if r.typ == typ {
			out = append(out, r.target)
		}
	}
	return out, err
}

type rel struct{ id, typ, target string }

func (z *xlsxZip) relList(part string) ([]rel, error) {
	dir, base := path.Split(part)
	b, err := z.read(dir + "_rels/" + base + ".rels")
	if errors.Is(err, errNoPart) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Rels []struct {
			Type   string `xml:"Type,attr"`
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
			Mode   string `xml:"TargetMode,attr"`
		} `xml:"Relationship"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("xlsx rels of %s: %w", part, err)
	}
	var out []rel
	for _, r := range doc.Rels {
		if r.Mode == "External" {
			continue
		}
		t := r.Target
		if strings.HasPrefix(t, "/") {
			t = strings.TrimPrefix(t, "/")
		} else {
			t = path.Join(dir, t)
		}
		out = append(out, rel{r.ID, r.Type, t})
	}
	return out, nil
}

// sheetRef is one <sheet> of workbook.xml.
type sheetRef struct {
	name    string
	sheetID string
	part    string // from the relationship, as openpyxl resolves it
}

// workbook is an xlsx file read the way openpyxl reads it.
type workbook struct {
	path      string
	z         *xlsxZip
	sheets    []sheetRef // worksheets only, in workbook order
	date1904  bool
	shared    []string // openpyxl's text of each shared string
	sharedAll []string // read_cell_value's text of each shared string
	styles    *styleSheet
	// activeTab indexes all sheets, chartsheets included, as openpyxl's
	// wb.active does.
	activeTab  int
	activeName string
	parsed     map[string]*sheet
}

// openWorkbook reads the workbook, its shared strings and its styles;
// it fails where openpyxl.load_workbook would.
func openWorkbook(p string) (*workbook, error) {
	z, err := openZip(p)
	if err != nil {
		return nil, err
	}
	b, err := z.read("xl/workbook.xml")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Pr struct {
			Date1904 string `xml:"date1904,attr"`
		} `xml:"workbookPr"`
		Views []struct {
			ActiveTab *int `xml:"activeTab,attr"`
		} `xml:"bookViews>workbookView"`
		Sheets []struct {
			Name    string `xml:"name,attr"`
			SheetID string `xml:"sheetId,attr"`
			RID     string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("xlsx workbook.xml: %w", err)
	}
	rels, err := z.rels("xl/workbook.xml")
	if err != nil {
		return nil, err
	}
	wb := &workbook{path: p, z: z, date1904: xmlBool(doc.Pr.Date1904, false), parsed: map[string]*sheet{}}
	if len(doc.Views) > 0 && doc.Views[0].ActiveTab != nil {
		wb.activeTab = *doc.Views[0].ActiveTab
	}
	for i, s := range doc.Sheets {
		if i == wb.activeTab {
			wb.activeName = s.Name
		}
		part, ok := rels[s.RID]
		if !ok {
			return nil, fmt.Errorf("xlsx: sheet %q has no part", s.Name)
		}
		// Chartsheets are not in openpyxl's worksheets, nor in pandas'
		// sheet_names.
		if strings.Contains(part, "chartsheets/") {
			continue
		}
		wb.sheets = append(wb.sheets, sheetRef{name: s.Name, sheetID: s.SheetID, part: part})
	}
	if b, err := z.read("xl/sharedStrings.xml"); err == nil {
		if wb.shared, wb.sharedAll, err = parseSharedStrings(b); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, errNoPart) {
		return nil, err
	}
	b, err = z.read("xl/styles.xml")
	switch {
	case err == nil:
		if wb.styles, err = parseStyles(b); err != nil {
			return nil, err
		}
	case errors.Is(err, errNoPart):
		wb.styles = &styleSheet{}
	default:
		return nil, err
	}
	return wb, nil
}

func (wb *workbook) sheetNames() []string {
	out := make([]string, len(wb.sheets))
	for i, s := range wb.sheets {
		out[i] = s.name
	}
	return out
}

// sheet returns the parsed worksheet named name, or nil when there is none
// (Python's KeyError, which the callers turn into their own defaults).
func (wb *workbook) sheet(name string) (*sheet, error) {
	if s, ok := wb.parsed[name]; ok {
		return s, nil
	}
	for _, ref := range wb.sheets {
		if ref.name != name {
			continue
		}
		b, err := wb.z.read(ref.part)
		if err != nil {
			return nil, err
		}
		s, err := parseSheet(b)
		if err != nil {
			return nil, fmt.Errorf("sheet %q: %w", name, err)
		}
		s.part = ref.part
		wb.parsed[name] = s
		return s, nil
	}
	return nil, nil
}

// parseSharedStrings returns each <si>'s text twice: as openpyxl reads it
// (the <t> of the item or of its runs, phonetic runs left out) and as
// OSWorld's read_cell_value does (every <t> below the item joined).
func parseSharedStrings(b []byte) (openpyxl, all []string, err error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var cur, curAll strings.Builder
	inSI, inT, inPh := false, false, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return openpyxl, all, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("xlsx sharedStrings.xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				inSI = true
				cur.Reset()
				curAll.Reset()
			case "t":
				inT = true
			case "rPh":
				inPh++
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "si":
				inSI = false
				openpyxl = append(openpyxl, cur.String())
				all = append(all, curAll.String())
			case "t":
				inT = false
			case "rPh":
				inPh--
			}
		case xml.CharData:
			if inSI && inT {
				if inPh == 0 {
					cur.Write(t)
				}
				curAll.Write(t)
			}
		}
	}
}

// xmlBool reads an xsd:boolean attribute.
func xmlBool(s string, def bool) bool {
	switch strings.TrimSpace(s) {
	case "1", "true":
		return true
	case "0", "false":
		return false
	}
	return def
}

// parseCoord turns "B12" (with optional $) into row 12, column 2.
func parseCoord(s string) (row, col int, err error) {
	s = strings.ReplaceAll(s, "$", "")
	i := 0
	for i < len(s) && (s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z') {
		c := int(s[i]|0x20) - 'a' + 1
		col = col*26 + c
		if col > maxCellCoord {
			return 0, 0, errBadCoord
		}
		i++
	}
	if i == 0 || i == len(s) || i > 3 {
		return 0, 0, fmt.Errorf("%w: %q", errBadCoord, s)
	}
	row, err = strconv.Atoi(s[i:])
	if err != nil || row < 1 || row > maxRows || col > maxCols || s[i] == '+' || s[i] == '-' {
		return 0, 0, fmt.Errorf("%w: %q", errBadCoord, s)
	}
	return row, col, nil
}

// colLetter is openpyxl's get_column_letter.
func colLetter(col int) string {
	var b []byte
	for col > 0 {
		col--
		b = append([]byte{byte('A' + col%26)}, b...)
		col /= 26
	}
	return string(b)
}

// cellRange is an openpyxl CellRange: inclusive bounds.
type cellRange struct{ minRow, minCol, maxRow, maxCol int }

func parseRange(s string) (cellRange, error) {
	a, b, ok := strings.Cut(s, ":")
	r1, c1, err := parseCoord(a)
	if err != nil {
		return cellRange{}, err
	}
	if !ok {
		return cellRange{r1, c1, r1, c1}, nil
	}
	r2, c2, err := parseCoord(b)
	if err != nil {
		return cellRange{}, err
	}
	return cellRange{min(r1, r2), min(c1, c2), max(r1, r2), max(c1, c2)}, nil
}

// parseMultiRange is openpyxl's MultiCellRange: space-separated ranges.
func parseMultiRange(s string) ([]cellRange, error) {
	var out []cellRange
	for _, f := range strings.Fields(s) {
		r, err := parseRange(f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (r cellRange) within(o cellRange) bool {
	return r.minRow >= o.minRow && r.maxRow <= o.maxRow && r.minCol >= o.minCol && r.maxCol <= o.maxCol
}

func (r cellRange) contains(row, col int) bool {
	return row >= r.minRow && row <= r.maxRow && col >= r.minCol && col <= r.maxCol
}

// activeSheet is openpyxl's wb.active when it is a worksheet.
func (wb *workbook) activeSheet() (*sheet, error) {
	if wb.activeName == "" {
		return nil, nil
	}
	return wb.sheet(wb.activeName)
}

// loadAll parses every worksheet, as openpyxl.load_workbook does before
// any rule runs: a sheet it cannot read fails the whole workbook.
func (wb *workbook) loadAll() error {
	for _, ref := range wb.sheets {
		s, err := wb.sheet(ref.name)
		if err != nil {
			return err
		}
		n := len(wb.styles.CellXfs)
		for _, c := range s.cells {
			if n > 0 && c.style >= n {
				return fmt.Errorf("sheet %q: cell %s uses style %d of %d", ref.name, c.ref, c.style, n)
			}
			// The values openpyxl converts while loading.
			if !c.formula {
				if _, err := wb.readOnlyValue(c); err != nil {
					return fmt.Errorf("sheet %q: cell %s: %w", ref.name, c.ref, err)
				}
			}
		}
	}
	return nil
}
