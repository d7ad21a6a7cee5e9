// Package docx reads word-processing documents as OSWorld's document
// metrics see them: .docx through python-docx (1.x) and .odt through odfpy.
//
// The model keeps python-docx's view rather than the rendered document:
// paragraphs and tables are the body's direct children only, run
// properties are the run's direct formatting (python-docx's run.font.* and
// paragraph_format.* never consult styles, so neither does this reader),
// and text follows python-docx's rules (hyperlink runs count, w:fldSimple
// and content controls do not, page breaks add no character). Every zip
// entry read is bounded, and a package that python-docx would refuse
// (no main document part, a wrong content type) is an error here too.
package docx

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Namespaces of the parts read here.
const (
	nsW      = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR      = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsPR     = "http://schemas.openxmlformats.org/package/2006/relationships"
	nsCT     = "http://schemas.openxmlformats.org/package/2006/content-types"
	relOD    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	ctDoc    = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
	ctFooter = "application/vnd.openxmlformats-officedocument.wordprocessingml.footer+xml"
)

// EMU per unit, as python-docx's Length converts them.
const (
	emuPerTwip = 635
	emuPerPt   = 12700
)

// Document is a .docx file as python-docx's Document object reports it.
type Document struct {
	// Paragraphs are w:body's direct w:p children (document.paragraphs).
	Paragraphs []Paragraph
	// Tables are w:body's direct w:tbl children (document.tables).
	Tables []Table
	// Sections are the w:sectPr elements in document order.
	Sections []Section
	// Images are the blobs of the main part's image relationships, in the
	// order of its .rels file (document.part.rels.values()).
	Images [][]byte
}

// Prop names a property that python-docx raises on when it reads it: a
// value its simple type refuses, or a required attribute that is absent.
// The model's field for such a property is nil (or zero), and the
// element's Raises has the bit, so that a metric reading it fails as
// OSWorld's does.
type Prop uint16

// The properties that can raise.
const (
	PropItalic Prop = 1 << iota
	PropStrike
	PropSubscript
	PropSize
	PropColor
	PropAlignment
	PropLineSpacing
	PropTabAlignment
	PropTabPosition
	PropPageWidth
	PropLeftMargin
	PropRightMargin
	PropFooter
	PropGridSpan
	PropGridBefore
	PropColumns
)

// Has reports whether q is among p.
func (p Prop) Has(q Prop) bool { return p&q != 0 }

// Paragraph is one w:p.
type Paragraph struct {
	// Text is python-docx's paragraph.text.
	Text string
	// Runs are the direct w:r children (paragraph.runs): runs inside
	// hyperlinks are in Text but not here, as in python-docx.
	Runs []Run
	// Alignment is w:pPr/w:jc/@w:val, "" when absent.
	Alignment string
	// LineSpacing is paragraph_format.line_spacing: a number of lines for
	// the "auto" rule, else a height in EMU; nil when absent.
	LineSpacing *float64
	// TabStops are w:pPr/w:tabs/w:tab in order.
	TabStops []TabStop
	// Raises has PropAlignment and PropLineSpacing.
	Raises Prop
}

// Run is one w:r with its direct formatting. Tri-state properties are nil
// when the property element is absent (python-docx's None).
type Run struct {
	Text      string
	Italic    *bool
	Strike    *bool
	Subscript *bool
	// Size is run.font.size in EMU.
	Size *int64
	// FontName is w:rFonts/@w:ascii (run.font.name).
	FontName *string
	// Color is run.font.color.rgb; nil when absent or "auto".
	Color *RGB
	// PageBreaks counts descendant w:br elements of type page.
	PageBreaks int
	// Raises has PropItalic, PropStrike, PropSubscript, PropSize and
	// PropColor.
	Raises Prop
}

// RGB is a colour's red, green and blue.
type RGB [3]uint8

// TabStop is one w:tab of a paragraph's tab stops.
type TabStop struct {
	// Alignment is w:val (left, center, right, decimal, bar, clear, ...).
	Alignment string
	// Position is w:pos in EMU.
	Position int64
	// Raises has PropTabAlignment (w:val absent or not a
	// WD_TAB_ALIGNMENT) and PropTabPosition.
	Raises Prop
}

// Table is one w:tbl.
type Table struct {
	// Columns is the w:tblGrid/w:gridCol count (len(table.columns)).
	Columns int
	Rows    []Row
	// Raises has PropColumns: the table has no w:tblGrid.
	Raises Prop
}

// Row is one w:tr.
type Row struct {
	Cells []Cell
	// GridBefore is w:trPr/w:gridBefore/@w:val, the grid columns left
	// empty before the first cell.
	GridBefore int
	// Raises has PropGridBefore.
	Raises Prop
}

// Cell is one w:tc.
type Cell struct {
	// GridSpan is tc.grid_span: 1 without w:gridSpan; zero or negative
	// spans cover no grid position, as range() makes them in Python.
	GridSpan int
	// VMerge is w:tcPr/w:vMerge/@w:val ("continue" when the element has no
	// value), "" when absent.
	VMerge     string
	Paragraphs []Paragraph
	// Raises has PropGridSpan.
	Raises Prop
}

// Text is python-docx's cell.text: its direct paragraphs joined by "\n".
func (c *Cell) Text() string {
	parts := make([]string, len(c.Paragraphs))
	for i, p := range c.Paragraphs {
		parts[i] = p.Text
	}
	return strings.Join(parts, "\n")
}

// ErrLayout marks a table whose cells python-docx cannot lay out on its
// grid (it raises there: IndexError, or a grid or span it cannot read).
var ErrLayout = errors.New("table cells do not fit the grid")

// Grid returns python-docx's table._cells: one entry per grid position,
// row by row, a spanned or vertically merged position repeating the cell
// that holds its content.
func (t *Table) Grid() ([]*Cell, error) {
	if t.Raises.Has(PropColumns) {
		return nil, ErrLayout
	}
	var cells []*Cell
	for r := range t.Rows {
		for c := range t.Rows[r].Cells {
			tc := &t.Rows[r].Cells[c]
			if tc.Raises.Has(PropGridSpan) {
				return nil, ErrLayout
			}
			for i := range tc.GridSpan {
				switch {
				case tc.VMerge == "continue":
					// Python's cells[-col_count].
					k := len(cells) - t.Columns
					if t.Columns <= 0 {
						k = 0
					}
					if k < 0 || k >= len(cells) {
						return nil, ErrLayout
					}
					cells = append(cells, cells[k])
				case i > 0:
					cells = append(cells, cells[len(cells)-1])
				default:
					cells = append(cells, tc)
				}
			}
		}
	}
	return cells, nil
}

// RowCells is python-docx's row.cells for row r: each cell once for every
// grid column it spans, and a vertical-merge continuation replaced by the
// cells of the one above it at the same grid offset (recursively). It
// fails with ErrLayout where python-docx raises: a continuation in the
// first row or with no cell starting at its offset above, or a span or
// gridBefore it cannot read on the way.
func (t *Table) RowCells(r int) ([]*Cell, error) {
	var out []*Cell
	for c := range t.Rows[r].Cells {
		tc, err := t.rootCell(r, c)
		if err != nil {
			return nil, err
		}
		if tc.Raises.Has(PropGridSpan) {
			return nil, ErrLayout
		}
		for range tc.GridSpan {
			out = append(out, tc)
		}
	}
	return out, nil
}

// rootCell follows row r's cell c up through vertical-merge
// continuations, as iter_tc_cells does with tc._tc_above.
func (t *Table) rootCell(r, c int) (*Cell, error) {
	for t.Rows[r].Cells[c].VMerge == "continue" {
		if r == 0 {
			return nil, ErrLayout
		}
		// tc.grid_offset, then tc_at_grid_offset in the row above.
		row := &t.Rows[r]
		if row.Raises.Has(PropGridBefore) {
			return nil, ErrLayout
		}
		off := row.GridBefore
		for _, prev := range row.Cells[:c] {
			if prev.Raises.Has(PropGridSpan) {
				return nil, ErrLayout
			}
			off += prev.GridSpan
		}
		above := &t.Rows[r-1]
		if above.Raises.Has(PropGridBefore) {
			return nil, ErrLayout
		}
		rem, found := off-above.GridBefore, -1
		for k := range above.Cells {
			if rem < 0 {
				break
			}
			if rem == 0 {
				found = k
				break
			}
			if above.Cells[k].Raises.Has(PropGridSpan) {
				return nil, ErrLayout
			}
			rem -= above.Cells[k].GridSpan
		}
		if found < 0 {
			return nil, ErrLayout
		}
		r, c = r-1, found
	}
	return &t.Rows[r].Cells[c], nil
}

// Section is one w:sectPr.
type Section struct {
	// PageWidth, LeftMargin and RightMargin are in EMU; nil when absent.
	PageWidth, LeftMargin, RightMargin *int64
	// Raises has PropPageWidth, PropLeftMargin, PropRightMargin and
	// PropFooter (footer.paragraphs raises: the footer part is not of the
	// footer content type, so python-docx loads it as a plain Part, or its
	// root element holds no paragraphs).
	Raises Prop
	// Footer is the paragraphs of the section's primary footer, inherited
	// from an earlier section when it has none, as python-docx resolves
	// section.footer. A document with no footer at all reads as one empty
	// paragraph, the footer python-docx adds on access.
	Footer []Paragraph
}

// Open reads the .docx file at path.
func Open(path string) (*Document, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Read(b)
}

// Read reads a .docx package held in memory.
func Read(data []byte) (*Document, error) {
	p, err := openPkg(data)
	if err != nil {
		return nil, err
	}
	p.lxml = true
	ct, err := p.xmlPart("[Content_Types].xml")
	if err != nil {
		return nil, err
	}
	rootRels, err := p.rels("")
	if err != nil {
		return nil, err
	}
	main := ""
	for _, r := range rootRels {
		if r.Type == relOD && !r.External {
			main = r.Target
			break
		}
	}
	if main == "" {
		return nil, fmt.Errorf("docx: no main document part")
	}
	if got := contentType(ct, main); got != ctDoc {
		return nil, fmt.Errorf("docx: main part %s has content type %q, not a Word document", main, got)
	}
	body, err := p.xmlPart(main)
	if err != nil {
		return nil, err
	}
	if !body.is(nsW, "document") {
		return nil, fmt.Errorf("docx: %s is not a w:document", main)
	}
	rels, err := p.rels(main)
	if err != nil {
		return nil, err
	}
	byID := map[string]rel{}
	for _, r := range rels {
		if _, dup := byID[r.ID]; !dup {
			byID[r.ID] = r
		}
		if !r.External && !p.has(r.Target) {
			// python-docx loads every related part and fails on a
			// dangling relationship.
			return nil, fmt.Errorf("docx: %s: relationship %s: %w", main, r.ID, errMissing)
		}
	}
	d := &Document{}
	b := body.child(nsW, "body")
	for _, k := range b.Kids {
		switch {
		case k.is(nsW, "p"):
			d.Paragraphs = append(d.Paragraphs, readParagraph(k))
		case k.is(nsW, "tbl"):
			d.Tables = append(d.Tables, readTable(k))
		}
	}
	if err := d.readSections(p, ct, b, byID); err != nil {
		return nil, err
	}
	for _, r := range rels {
		if !strings.Contains(r.Type, "image") {
			continue
		}
		if r.External {
			// python-docx raises on target_part of an external image.
			return nil, fmt.Errorf("docx: image relationship %s is external", r.ID)
		}
		blob, err := p.part(r.Target)
		if err != nil {
			return nil, err
		}
		d.Images = append(d.Images, blob)
	}
	return d, nil
}

// readSections fills Sections, resolving each section's footer.
func (d *Document) readSections(p *pkg, ct, body *node, byID map[string]rel) error {
	var sects []*node
	for _, k := range body.Kids {
		if k.is(nsW, "p") {
			if s := k.child(nsW, "pPr").child(nsW, "sectPr"); s != nil {
				sects = append(sects, s)
			}
		}
		if k.is(nsW, "sectPr") {
			sects = append(sects, k)
		}
	}
	var prior []Paragraph
	var priorRaises bool
	for i, s := range sects {
		sec := Section{}
		if sz := s.child(nsW, "pgSz"); sz != nil {
			var raises bool
			sec.PageWidth, raises = twips(sz, "w")
			sec.Raises |= flag(raises, PropPageWidth)
		}
		if mar := s.child(nsW, "pgMar"); mar != nil {
			var left, right bool
			sec.LeftMargin, left = twips(mar, "left")
			sec.RightMargin, right = twips(mar, "right")
			sec.Raises |= flag(left, PropLeftMargin) | flag(right, PropRightMargin)
		}
		var ref *node
		for _, fr := range s.children(nsW, "footerReference") {
			if t, _ := fr.attr(nsW, "type"); t == "default" {
				ref = fr
				break
			}
		}
		switch {
		case ref != nil:
			id, _ := ref.attr(nsR, "id")
			r, ok := byID[id]
			if !ok || r.External {
				return fmt.Errorf("docx: footer relationship %q missing", id)
			}
			ftr, err := p.xmlPart(r.Target)
			if err != nil {
				return err
			}
			if contentType(ct, r.Target) != ctFooter || !paragraphContainers[ftr.Local] || ftr.Space != nsW {
				sec.Raises |= PropFooter
				break
			}
			sec.Footer = []Paragraph{}
			for _, fp := range ftr.children(nsW, "p") {
				sec.Footer = append(sec.Footer, readParagraph(fp))
			}
		case i > 0:
			sec.Footer = prior
			sec.Raises |= flag(priorRaises, PropFooter)
		default:
			sec.Footer = []Paragraph{{}}
		}
		prior, priorRaises = sec.Footer, sec.Raises.Has(PropFooter)
		d.Sections = append(d.Sections, sec)
	}
	return nil
}

// rel is one package relationship with its target resolved to a zip name.
type rel struct {
	ID, Type, Target string
	External         bool
}

// rels reads the relationships of the part source ("" for the package).
func (p *pkg) rels(source string) ([]rel, error) {
	dir, file := path.Split(source)
	name := path.Join(dir, "_rels", file+".rels")
	n, err := p.xmlPart(name)
	if errors.Is(err, errMissing) && source != "" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []rel
	for _, r := range n.children(nsPR, "Relationship") {
		id, _ := r.attr("", "Id")
		typ, _ := r.attr("", "Type")
		target, _ := r.attr("", "Target")
		mode, _ := r.attr("", "TargetMode")
		e := rel{ID: id, Type: typ, External: mode == "External"}
		if e.External {
			e.Target = target
		} else if strings.HasPrefix(target, "/") {
			e.Target = strings.TrimPrefix(path.Clean(target), "/")
		} else {
			e.Target = strings.TrimPrefix(path.Join("/", dir, target), "/")
		}
		out = append(out, e)
	}
	return out, nil
}

// contentType looks a part up in [Content_Types].xml as python-docx does:
// an override by part name (case-insensitive), else a default by extension.
func contentType(ct *node, part string) string {
	for _, o := range ct.children(nsCT, "Override") {
		if pn, _ := o.attr("", "PartName"); strings.EqualFold(pn, "/"+part) {
			t, _ := o.attr("", "ContentType")
			return t
		}
	}
	ext := strings.TrimPrefix(path.Ext(part), ".")
	for _, o := range ct.children(nsCT, "Default") {
		if e, _ := o.attr("", "Extension"); strings.EqualFold(e, ext) {
			t, _ := o.attr("", "ContentType")
			return t
		}
	}
	return ""
}

// readParagraph reads a w:p.
func readParagraph(n *node) Paragraph {
	var p Paragraph
	var text strings.Builder
	for _, k := range n.Kids {
		switch {
		case k.is(nsW, "r"):
			r := readRun(k)
			text.WriteString(r.Text)
			p.Runs = append(p.Runs, r)
		case k.is(nsW, "hyperlink"):
			for _, hr := range k.children(nsW, "r") {
				text.WriteString(runText(hr))
			}
		}
	}
	p.Text = text.String()
	ppr := n.child(nsW, "pPr")
	if ppr == nil {
		return p
	}
	if jc := ppr.child(nsW, "jc"); jc != nil {
		var ok bool
		p.Alignment, ok = jc.attr(nsW, "val")
		if !ok || !paragraphAlignments[p.Alignment] {
			// WD_PARAGRAPH_ALIGNMENT.from_xml raises ValueError.
			p.Alignment = ""
			p.Raises |= PropAlignment
		}
	}
	if sp := ppr.child(nsW, "spacing"); sp != nil {
		// line_spacing reads w:line, then w:lineRule (a WD_LINE_SPACING,
		// read even without w:line), and raises on either.
		line, raises := signedTwips(sp, "line")
		rule, ok := sp.attr(nsW, "lineRule")
		switch {
		case raises || (ok && !lineRules[rule]):
			p.Raises |= PropLineSpacing
		case line == nil:
		case !ok || rule == "auto":
			// python-docx: spacing_line / Pt(12), a float of lines.
			v := float64(*line) / float64(12*emuPerPt)
			p.LineSpacing = &v
		default:
			v := float64(*line)
			p.LineSpacing = &v
		}
	}
	for _, t := range ppr.child(nsW, "tabs").children(nsW, "tab") {
		val, ok := t.attr(nsW, "val")
		ts := TabStop{Alignment: val}
		if !ok || !tabAlignments[val] {
			ts.Alignment = ""
			ts.Raises |= PropTabAlignment
		}
		pos, raises := signedTwips(t, "pos")
		if pos != nil {
			ts.Position = *pos
		}
		// w:pos is required.
		ts.Raises |= flag(raises || pos == nil, PropTabPosition)
		p.TabStops = append(p.TabStops, ts)
	}
	return p
}

// paragraphContainers are the root elements python-docx's parts give a
// p_lst (the paragraphs that footer.paragraphs reads).
var paragraphContainers = setOf("ftr", "hdr", "body", "tc", "comment")

// The XML values of python-docx's WD_PARAGRAPH_ALIGNMENT,
// WD_LINE_SPACING (whose single, 1.5 and double members all read
// "UNMAPPED") and WD_TAB_ALIGNMENT; any other value raises.
var (
	paragraphAlignments = setOf("left", "center", "right", "both", "distribute", "mediumKashida", "highKashida", "lowKashida", "thaiDistribute")
	lineRules           = setOf("UNMAPPED", "atLeast", "exact", "auto")
	tabAlignments       = setOf("left", "center", "right", "decimal", "bar", "list", "clear", "end", "num", "start")
)

func setOf(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// flag is p when raises, else nothing.
func flag(raises bool, p Prop) Prop {
	if raises {
		return p
	}
	return 0
}

// runText is python-docx 1.x's run.text: w:t text, w:tab and w:ptab as
// "\t", w:br of type textWrapping (the default) and w:cr as "\n", other
// breaks as "", w:noBreakHyphen as "-"; other children add nothing.
func runText(r *node) string {
	var b strings.Builder
	for _, k := range r.Kids {
		if k.isText() || k.Space != nsW {
			continue
		}
		switch k.Local {
		case "t":
			b.WriteString(k.leadText())
		case "tab", "ptab":
			b.WriteByte('\t')
		case "cr":
			b.WriteByte('\n')
		case "br":
			if t, ok := k.attr(nsW, "type"); !ok || t == "textWrapping" {
				b.WriteByte('\n')
			}
		case "noBreakHyphen":
			b.WriteByte('-')
		}
	}
	return b.String()
}

// readRun reads a w:r and its direct w:rPr.
func readRun(n *node) Run {
	r := Run{Text: runText(n)}
	n.walk(func(k *node) bool {
		if k.is(nsW, "br") {
			if t, _ := k.attr(nsW, "type"); t == "page" {
				r.PageBreaks++
			}
		}
		return true
	})
	rpr := n.child(nsW, "rPr")
	if rpr == nil {
		return r
	}
	var italic, strike bool
	r.Italic, italic = onOff(rpr.child(nsW, "i"))
	r.Strike, strike = onOff(rpr.child(nsW, "strike"))
	r.Raises |= flag(italic, PropItalic) | flag(strike, PropStrike)
	if va := rpr.child(nsW, "vertAlign"); va != nil {
		// w:val is required; any value but "subscript" is False.
		if v, ok := va.attr(nsW, "val"); ok {
			sub := v == "subscript"
			r.Subscript = &sub
		} else {
			r.Raises |= PropSubscript
		}
	}
	if sz := rpr.child(nsW, "sz"); sz != nil {
		v, ok := sz.attr(nsW, "val")
		raises := !ok
		if ok {
			r.Size, raises = halfPoints(v)
		}
		r.Raises |= flag(raises, PropSize)
	}
	if f := rpr.child(nsW, "rFonts"); f != nil {
		if v, ok := f.attr(nsW, "ascii"); ok {
			r.FontName = &v
		}
	}
	if c := rpr.child(nsW, "color"); c != nil {
		// w:val is required; "auto" reads as None.
		v, ok := c.attr(nsW, "val")
		raises := !ok
		if ok && v != "auto" {
			r.Color, raises = parseRGB(v)
		}
		r.Raises |= flag(raises, PropColor)
	}
	return r
}

// readTable reads a w:tbl.
func readTable(n *node) Table {
	grid := n.child(nsW, "tblGrid")
	t := Table{Columns: len(grid.children(nsW, "gridCol"))}
	if grid == nil {
		t.Raises |= PropColumns
	}
	for _, tr := range n.children(nsW, "tr") {
		var row Row
		if gb := tr.child(nsW, "trPr").child(nsW, "gridBefore"); gb != nil {
			var raises bool
			row.GridBefore, raises = decimalNumber(gb)
			row.Raises |= flag(raises, PropGridBefore)
		}
		for _, tc := range tr.children(nsW, "tc") {
			c := Cell{GridSpan: 1}
			if pr := tc.child(nsW, "tcPr"); pr != nil {
				if gs := pr.child(nsW, "gridSpan"); gs != nil {
					var raises bool
					c.GridSpan, raises = decimalNumber(gs)
					c.Raises |= flag(raises, PropGridSpan)
				}
				if vm := pr.child(nsW, "vMerge"); vm != nil {
					c.VMerge = "continue"
					if v, ok := vm.attr(nsW, "val"); ok {
						c.VMerge = v
					}
				}
			}
			for _, p := range tc.children(nsW, "p") {
				c.Paragraphs = append(c.Paragraphs, readParagraph(p))
			}
			row.Cells = append(row.Cells, c)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
