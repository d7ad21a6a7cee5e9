package docx

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestValuesAsPythonDocx pins how python-docx 1.2 reads attribute values
// (with Python's int() and float()) and where it raises, one property at
// a time. Each case was checked against python-docx 1.2.0 itself.
func TestValuesAsPythonDocx(t *testing.T) {
	run := func(rpr string) string {
		return `<w:p><w:r><w:rPr>` + rpr + `</w:rPr><w:t>x</w:t></w:r></w:p>`
	}
	emu := func(v int64) *int64 { return &v }
	tests := []struct {
		name, body string
		got        func(d *Document) (any, Prop)
		want       any
		raises     Prop
	}{
		// Run properties.
		{"italic with no value", run(`<w:i/>`), italic, ptr(true), 0},
		{"italic off", run(`<w:i w:val="off"/>`), italic, ptr(false), 0},
		{"italic yes raises", run(`<w:i w:val="yes"/>`), italic, (*bool)(nil), PropItalic},
		{"strike True raises", run(`<w:strike w:val="True"/>`), strike, (*bool)(nil), PropStrike},
		{"vertAlign without value raises", run(`<w:vertAlign/>`), subscript, (*bool)(nil), PropSubscript},
		{"vertAlign bogus is False", run(`<w:vertAlign w:val="bogus"/>`), subscript, ptr(false), 0},
		{"size with spaces", run(`<w:sz w:val=" 28 "/>`), size, emu(14 * 12700), 0},
		{"size in Arabic-Indic digits", run(`<w:sz w:val="٢٨"/>`), size, emu(14 * 12700), 0},
		{"size with an underscore", run(`<w:sz w:val="2_8"/>`), size, emu(14 * 12700), 0},
		{"negative size", run(`<w:sz w:val="-3"/>`), size, emu(-19050), 0},
		{"size in points", run(`<w:sz w:val="12 pt"/>`), size, emu(12 * 12700), 0},
		{"size in inches", run(`<w:sz w:val="1in"/>`), size, emu(914400), 0},
		{"fractional size raises", run(`<w:sz w:val="24.5"/>`), size, (*int64)(nil), PropSize},
		{"size without value raises", run(`<w:sz/>`), size, (*int64)(nil), PropSize},
		{"size in pixels raises", run(`<w:sz w:val="12px"/>`), size, (*int64)(nil), PropSize},
		{"colour", run(`<w:color w:val="1f2E3d"/>`), color, &RGB{0x1f, 0x2e, 0x3d}, 0},
		{"colour auto", run(`<w:color w:val="auto"/>`), color, (*RGB)(nil), 0},
		{"colour AUTO raises", run(`<w:color w:val="AUTO"/>`), color, (*RGB)(nil), PropColor},
		{"seven digits read as 2+2+3", run(`<w:color w:val="0000001"/>`), color, &RGB{0, 0, 1}, 0},
		{"leading space read by int()", run(`<w:color w:val=" FF0000"/>`), color, &RGB{0x0f, 0xf0, 0}, 0},
		{"three digits raise", run(`<w:color w:val="F00"/>`), color, (*RGB)(nil), PropColor},
		{"a part over 255 raises", run(`<w:color w:val="FFFF100"/>`), color, (*RGB)(nil), PropColor},
		{"colour without value raises", run(`<w:color/>`), color, (*RGB)(nil), PropColor},
		// Paragraph properties.
		{"alignment both", `<w:p><w:pPr><w:jc w:val="both"/></w:pPr></w:p>`, alignment, "both", 0},
		{"alignment start raises", `<w:p><w:pPr><w:jc w:val="start"/></w:pPr></w:p>`, alignment, "", PropAlignment},
		{"alignment without value raises", `<w:p><w:pPr><w:jc/></w:pPr></w:p>`, alignment, "", PropAlignment},
		{"line rounded half to even", `<w:p><w:pPr><w:spacing w:line="240.5"/></w:pPr></w:p>`, lineSpacing, ptr(1.0), 0},
		{"line in points", `<w:p><w:pPr><w:spacing w:line="18pt" w:lineRule="exact"/></w:pPr></w:p>`, lineSpacing, ptr(18.0 * 12700), 0},
		{"line as a float with an exponent", `<w:p><w:pPr><w:spacing w:line="4.8e2"/></w:pPr></w:p>`, lineSpacing, ptr(2.0), 0},
		{"UNMAPPED rule is not multiple", `<w:p><w:pPr><w:spacing w:line="240" w:lineRule="UNMAPPED"/></w:pPr></w:p>`, lineSpacing, ptr(240.0 * 635), 0},
		{"bogus rule raises without a line", `<w:p><w:pPr><w:spacing w:lineRule="bogus"/></w:pPr></w:p>`, lineSpacing, (*float64)(nil), PropLineSpacing},
		{"nan line raises", `<w:p><w:pPr><w:spacing w:line="nan"/></w:pPr></w:p>`, lineSpacing, (*float64)(nil), PropLineSpacing},
		{"tab in inches", `<w:p><w:pPr><w:tabs><w:tab w:val="end" w:pos="1in"/></w:tabs></w:pPr></w:p>`, tab, TabStop{Alignment: "end", Position: 914400}, 0},
		{"tab alignment bogus raises", `<w:p><w:pPr><w:tabs><w:tab w:val="bogus" w:pos="720"/></w:tabs></w:pPr></w:p>`, tab, TabStop{Position: 720 * 635, Raises: PropTabAlignment}, PropTabAlignment},
		{"tab without position raises", `<w:p><w:pPr><w:tabs><w:tab w:val="left"/></w:tabs></w:pPr></w:p>`, tab, TabStop{Alignment: "left", Raises: PropTabPosition}, PropTabPosition},
		// Section properties: page width and margins are ST_TwipsMeasure,
		// read with int(), not float().
		{"page width in inches", `<w:sectPr><w:pgSz w:w="8.5in"/></w:sectPr>`, pageWidth, emu(7772400), 0},
		{"fractional page width raises", `<w:sectPr><w:pgSz w:w="12240.5"/></w:sectPr>`, pageWidth, (*int64)(nil), PropPageWidth},
		{"fractional left margin raises", `<w:sectPr><w:pgMar w:left="1440.5" w:right="1440"/></w:sectPr>`, leftMargin, (*int64)(nil), PropLeftMargin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Read(pkgBytes(t, wordParts(tt.body, "")))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			got, raises := tt.got(d)
			if !reflect.DeepEqual(got, tt.want) || raises != tt.raises {
				t.Errorf("got %v (raises %b), want %v (raises %b)", show(got), raises, show(tt.want), tt.raises)
			}
		})
	}
}

// Readers of one property of the first run, paragraph, tab stop or
// section, with its raise bit.
var (
	italic      = runProp(func(r Run) any { return r.Italic }, PropItalic)
	strike      = runProp(func(r Run) any { return r.Strike }, PropStrike)
	subscript   = runProp(func(r Run) any { return r.Subscript }, PropSubscript)
	size        = runProp(func(r Run) any { return r.Size }, PropSize)
	color       = runProp(func(r Run) any { return r.Color }, PropColor)
	alignment   = paraProp(func(p Paragraph) any { return p.Alignment }, PropAlignment)
	lineSpacing = paraProp(func(p Paragraph) any { return p.LineSpacing }, PropLineSpacing)
	pageWidth   = sectionProp(func(s Section) any { return s.PageWidth }, PropPageWidth)
	leftMargin  = sectionProp(func(s Section) any { return s.LeftMargin }, PropLeftMargin)
)

func runProp(get func(Run) any, p Prop) func(*Document) (any, Prop) {
	return func(d *Document) (any, Prop) {
		r := d.Paragraphs[0].Runs[0]
		return get(r), r.Raises & p
	}
}

func paraProp(get func(Paragraph) any, p Prop) func(*Document) (any, Prop) {
	return func(d *Document) (any, Prop) {
		para := d.Paragraphs[0]
		return get(para), para.Raises & p
	}
}

func sectionProp(get func(Section) any, p Prop) func(*Document) (any, Prop) {
	return func(d *Document) (any, Prop) {
		s := d.Sections[0]
		return get(s), s.Raises & p
	}
}

func tab(d *Document) (any, Prop) {
	ts := d.Paragraphs[0].TabStops[0]
	return ts, ts.Raises
}

// show dereferences a pointer for a readable failure.
func show(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

// TestTextStopsAtComment: lxml's .text of a w:t is the text before its
// first child, and lxml counts comments and processing instructions as
// children; CDATA is text.
func TestTextStopsAtComment(t *testing.T) {
	body := `<w:p><w:r><w:t>a<!-- c -->b</w:t><w:t>c<?pi x?>d</w:t><w:t>e<![CDATA[f]]>g</w:t></w:r></w:p>`
	d, err := Read(pkgBytes(t, wordParts(body, "")))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got := d.Paragraphs[0].Text; got != "acefg" {
		t.Errorf("text = %q, want %q", got, "acefg")
	}
}

// TestRowCells pins python-docx's row.cells and table._cells on spans and
// vertical merges, including those it raises on.
func TestRowCells(t *testing.T) {
	cell := tcXML
	grid := `<w:tblGrid><w:gridCol/><w:gridCol/><w:gridCol/></w:tblGrid>`
	tests := []struct {
		name, table string
		row         int
		want        []string
		wantErr     error
		wantGrid    []string
		wantGridErr error
	}{
		{"continuation takes the cell above", grid + `<w:tr>` + cell("", "a") + cell(`<w:gridSpan w:val="2"/>`, "b") + `</w:tr>` +
			`<w:tr>` + cell("", "c") + cell(`<w:gridSpan w:val="2"/><w:vMerge/>`, "hidden") + `</w:tr>`,
			1, []string{"c", "b", "b"}, nil, []string{"a", "b", "b", "c", "b", "b"}, nil},
		{"gridBefore shifts the offset", grid + `<w:tr>` + cell("", "a") + cell("", "b") + `</w:tr>` +
			`<w:tr><w:trPr><w:gridBefore w:val="1"/></w:trPr>` + cell(`<w:vMerge/>`, "hidden") + `</w:tr>`,
			1, []string{"b"}, nil, nil, ErrLayout},
		{"no cell at the offset above", grid + `<w:tr>` + cell(`<w:gridSpan w:val="2"/>`, "a") + `</w:tr>` +
			`<w:tr>` + cell("", "c") + cell(`<w:vMerge/>`, "hidden") + `</w:tr>`,
			1, nil, ErrLayout, []string{"a", "a", "c", "a"}, nil},
		{"zero and negative spans cover nothing", grid + `<w:tr>` + cell(`<w:gridSpan w:val="0"/>`, "a") + cell(`<w:gridSpan w:val="-1"/>`, "b") + cell("", "c") + `</w:tr>`,
			0, []string{"c"}, nil, []string{"c"}, nil},
		{"a span int() refuses", grid + `<w:tr>` + cell(`<w:gridSpan w:val="2.0"/>`, "a") + `</w:tr>`,
			0, nil, ErrLayout, nil, ErrLayout},
		{"no grid", `<w:tr>` + cell("", "a") + `</w:tr>`, 0, []string{"a"}, nil, nil, ErrLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Read(pkgBytes(t, wordParts(`<w:tbl>`+tt.table+`</w:tbl>`, "")))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			tb := &d.Tables[0]
			texts := func(cs []*Cell) []string {
				var out []string
				for _, c := range cs {
					out = append(out, c.Text())
				}
				return out
			}
			cells, err := tb.RowCells(tt.row)
			if got := texts(cells); !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RowCells(%d) = %q, %v; want %q, %v", tt.row, got, err, tt.want, tt.wantErr)
			}
			g, err := tb.Grid()
			if got := texts(g); !errors.Is(err, tt.wantGridErr) || !reflect.DeepEqual(got, tt.wantGrid) {
				t.Errorf("Grid() = %q, %v; want %q, %v", got, err, tt.wantGrid, tt.wantGridErr)
			}
		})
	}
}

// TestFooterPartTypes: python-docx reads a footer's paragraphs only from a
// part of the footer content type whose root holds paragraphs; any other
// raises, and so does a later section that inherits that footer.
func TestFooterPartTypes(t *testing.T) {
	rel := `<Relationship Id="rIdF" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footer" Target="footer1.xml"/>`
	body := `<w:p><w:pPr><w:sectPr><w:footerReference w:type="default" r:id="rIdF"/></w:sectPr></w:pPr></w:p><w:sectPr/>`
	tests := []struct {
		name, root string
		typed      bool
		want       []string
		raises     Prop
	}{
		{"footer part", "w:ftr", true, []string{"7"}, 0},
		{"header root in a footer part", "w:hdr", true, []string{"7"}, 0},
		{"no content type", "w:ftr", false, nil, PropFooter},
		{"a root without paragraphs", "w:tbl", true, nil, PropFooter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := wordParts(body, rel)
			parts["word/footer1.xml"] = `<` + tt.root + ` ` + wordDocNS + `><w:p><w:r><w:t>7</w:t></w:r></w:p></` + tt.root + `>`
			if tt.typed {
				parts["[Content_Types].xml"] = strings.Replace(parts["[Content_Types].xml"], "</Types>",
					`<Override PartName="/word/footer1.xml" ContentType="`+ctFooter+`"/></Types>`, 1)
			}
			d, err := Read(pkgBytes(t, parts))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i, s := range d.Sections {
				var got []string
				for _, p := range s.Footer {
					got = append(got, p.Text)
				}
				if !reflect.DeepEqual(got, tt.want) || s.Raises&PropFooter != tt.raises {
					t.Errorf("section %d footer = %q (raises %b), want %q (raises %b)", i, got, s.Raises&PropFooter, tt.want, tt.raises)
				}
			}
		})
	}
}
