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
	"math"
	"path"
	"strconv"
	"strings"
)

// Namespaces of the parts read here.
const (
	nsW   = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR   = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsPR  = "http://schemas.openxmlformats.org/package/2006/relationships"
	nsCT  = "http://schemas.openxmlformats.org/package/2006/content-types"
	relOD = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	ctDoc = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
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
}

// RGB is a colour's red, green and blue.
type RGB [3]uint8

// TabStop is one w:tab of a paragraph's tab stops.
type TabStop struct {
	// Alignment is w:val (left, center, right, decimal, bar, clear, ...).
	Alignment string
	// Position is w:pos in EMU.
	Position int64
}

// Table is one w:tbl.
type Table struct {
	// Columns is the w:tblGrid/w:gridCol count (len(table.columns)).
	Columns int
	Rows    []Row
}

// Row is one w:tr.
type Row struct {
	Cells []Cell
}

// Cell is one w:tc.
type Cell struct {
	GridSpan int
	// VMerge is w:tcPr/w:vMerge/@w:val ("continue" when the element has no
	// value), "" when absent.
	VMerge     string
	Paragraphs []Paragraph
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
// grid (it raises IndexError there).
var ErrLayout = errors.New("table cells do not fit the grid")

// Grid returns python-docx's table._cells: one entry per grid position,
// row by row, a spanned or vertically merged position repeating the cell
// that holds its content.
func (t *Table) Grid() ([]*Cell, error) {
	var cells []*Cell
	for r := range t.Rows {
		for c := range t.Rows[r].Cells {
			tc := &t.Rows[r].Cells[c]
			for i := 0; i < max(tc.GridSpan, 1); i++ {
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

// Section is one w:sectPr.
type Section struct {
	// PageWidth, LeftMargin and RightMargin are in EMU; nil when absent.
	PageWidth, LeftMargin, RightMargin *int64
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
	if err := d.readSections(p, b, byID); err != nil {
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
func (d *Document) readSections(p *pkg, body *node, byID map[string]rel) error {
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
	for i, s := range sects {
		sec := Section{}
		if sz := s.child(nsW, "pgSz"); sz != nil {
			sec.PageWidth = lengthAttr(sz, "w")
		}
		if mar := s.child(nsW, "pgMar"); mar != nil {
			sec.LeftMargin = lengthAttr(mar, "left")
			sec.RightMargin = lengthAttr(mar, "right")
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
			sec.Footer = []Paragraph{}
			for _, fp := range ftr.children(nsW, "p") {
				sec.Footer = append(sec.Footer, readParagraph(fp))
			}
		case i > 0:
			sec.Footer = prior
		default:
			sec.Footer = []Paragraph{{}}
		}
		prior = sec.Footer
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
		p.Alignment, _ = jc.attr(nsW, "val")
	}
	if sp := ppr.child(nsW, "spacing"); sp != nil {
		if line := lengthAttr(sp, "line"); line != nil {
			rule, ok := sp.attr(nsW, "lineRule")
			var v float64
			if !ok || rule == "auto" {
				// python-docx: spacing_line / Pt(12), a float of lines.
				v = float64(*line) / float64(12*emuPerPt)
			} else {
				v = float64(*line)
			}
			p.LineSpacing = &v
		}
	}
	for _, t := range ppr.child(nsW, "tabs").children(nsW, "tab") {
		val, _ := t.attr(nsW, "val")
		ts := TabStop{Alignment: val}
		if pos := lengthAttr(t, "pos"); pos != nil {
			ts.Position = *pos
		}
		p.TabStops = append(p.TabStops, ts)
	}
	return p
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
	r.Italic = onOff(rpr.child(nsW, "i"))
	r.Strike = onOff(rpr.child(nsW, "strike"))
	if va := rpr.child(nsW, "vertAlign"); va != nil {
		v, _ := va.attr(nsW, "val")
		sub := v == "subscript"
		r.Subscript = &sub
	}
	if sz := rpr.child(nsW, "sz"); sz != nil {
		if v, ok := sz.attr(nsW, "val"); ok {
			r.Size = halfPoints(v)
		}
	}
	if f := rpr.child(nsW, "rFonts"); f != nil {
		if v, ok := f.attr(nsW, "ascii"); ok {
			r.FontName = &v
		}
	}
	if c := rpr.child(nsW, "color"); c != nil {
		if v, ok := c.attr(nsW, "val"); ok && v != "auto" {
			r.Color = parseRGB(v)
		}
	}
	return r
}

// readTable reads a w:tbl.
func readTable(n *node) Table {
	t := Table{Columns: len(n.child(nsW, "tblGrid").children(nsW, "gridCol"))}
	for _, tr := range n.children(nsW, "tr") {
		var row Row
		for _, tc := range tr.children(nsW, "tc") {
			c := Cell{GridSpan: 1}
			if pr := tc.child(nsW, "tcPr"); pr != nil {
				if gs := pr.child(nsW, "gridSpan"); gs != nil {
					v, _ := gs.attr(nsW, "val")
					if k, err := strconv.Atoi(v); err == nil && k > 0 {
						c.GridSpan = min(k, 1<<12)
					}
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

// onOff reads an ST_OnOff property element: nil when absent, true when it
// has no value.
func onOff(n *node) *bool {
	if n == nil {
		return nil
	}
	v, ok := n.attr(nsW, "val")
	b := !ok || v == "1" || v == "true" || v == "on"
	return &b
}

// lengthAttr reads a w: twips measure attribute as python-docx's
// ST_SignedTwipsMeasure does (a number of twips, or a universal measure
// such as "2.5cm"), in EMU; nil when absent or unreadable.
func lengthAttr(n *node, name string) *int64 {
	v, ok := n.attr(nsW, name)
	if !ok {
		return nil
	}
	if strings.ContainsAny(v, "imp") {
		return universal(v)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e12 {
		return nil
	}
	e := int64(math.RoundToEven(f)) * emuPerTwip
	return &e
}

// halfPoints reads ST_HpsMeasure (half points, or a universal measure) in
// EMU, as Pt(int(v) / 2.0).
func halfPoints(v string) *int64 {
	if strings.ContainsAny(v, "mnp") {
		return universal(v)
	}
	k, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || k < 0 || k > 1e9 {
		return nil
	}
	e := int64(float64(k) / 2.0 * emuPerPt)
	return &e
}

// universal reads ST_UniversalMeasure ("12pt", "2.5cm") in EMU.
func universal(v string) *int64 {
	if len(v) < 3 {
		return nil
	}
	mult := map[string]float64{"mm": 36000, "cm": 360000, "in": 914400, "pt": 12700, "pc": 152400, "pi": 152400}[v[len(v)-2:]]
	q, err := strconv.ParseFloat(v[:len(v)-2], 64)
	if mult == 0 || err != nil || math.IsNaN(q) || math.Abs(q) > 1e9 {
		return nil
	}
	e := int64(math.RoundToEven(q * mult))
	return &e
}

// parseRGB reads a hex colour "RRGGBB"; nil when malformed (python-docx
// raises there).
func parseRGB(v string) *RGB {
	if len(v) != 6 {
		return nil
	}
	k, err := strconv.ParseUint(v, 16, 32)
	if err != nil {
		return nil
	}
	return &RGB{uint8(k >> 16), uint8(k >> 8), uint8(k)}
}
