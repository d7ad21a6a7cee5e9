package docs

import (
	"archive/zip"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docxParts is a .docx made of a body, footer parts the body's section
// properties refer to (rIdF1...) and PNG images related to the main part.
type docxParts struct {
	body    string
	footers []string
	images  [][]byte
}

// write saves d as dir/name.
func (d docxParts) write(t *testing.T, dir, name string) string {
	t.Helper()
	const ns = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	types := `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
		`<Default Extension="png" ContentType="image/png"/>` +
		`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>`
	var rels strings.Builder
	parts := map[string][]byte{}
	for i, f := range d.footers {
		types += fmt.Sprintf(`<Override PartName="/word/footer%d.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.footer+xml"/>`, i+1)
		fmt.Fprintf(&rels, `<Relationship Id="rIdF%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footer" Target="footer%d.xml"/>`, i+1, i+1)
		parts[fmt.Sprintf("word/footer%d.xml", i+1)] = []byte(`<?xml version="1.0" encoding="UTF-8"?><w:ftr ` + ns + `>` + f + `</w:ftr>`)
	}
	for i, img := range d.images {
		fmt.Fprintf(&rels, `<Relationship Id="rIdI%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/image%d.png"/>`, i+1, i+1)
		parts[fmt.Sprintf("word/media/image%d.png", i+1)] = img
	}
	parts["[Content_Types].xml"] = []byte(types + `</Types>`)
	parts["_rels/.rels"] = []byte(`<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`)
	parts["word/_rels/document.xml.rels"] = []byte(`<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
		rels.String() + `</Relationships>`)
	parts["word/document.xml"] = []byte(`<?xml version="1.0" encoding="UTF-8"?><w:document ` + ns + `><w:body>` + d.body + `</w:body></w:document>`)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, b := range parts {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Colours evaluate_colored_words_in_tables tells apart: red and blue,
// near them (within 3.5 CIEDE2000) and not, automatic, none, and values
// python-docx cannot read.
var cellColors = []string{"FF0000", "0000FF", "FE0101", "0101FE", "800000", "000080", "00FF00", "auto", "", "-", "F00", "ff0000", "GGGGGG"}

// Words of table cells: vowels and not, case and Python's lower() (İ is
// no vowel there), blanks strip() removes, digits.
var cellWords = []string{"apple", "Egg", "banana", "Cat", "İx", "umbrella", "  orange ", "x", "ü", "Ice", "1st", "", " ", "\u00a0a"}

// randomCellRun is a run of one word in a colour.
func randomCellRun(rng *rand.Rand) string {
	pr := ""
	switch c := cellColors[rng.IntN(len(cellColors))]; c {
	case "-":
	case "":
		pr = `<w:color/>`
	default:
		pr = `<w:color w:val="` + c + `"/>`
		if rng.IntN(8) == 0 {
			pr = `<w:color w:val="` + c + `" w:themeColor="accent1"/>`
		}
	}
	return `<w:r><w:rPr>` + pr + `</w:rPr><w:t xml:space="preserve">` + xmlEscape(cellWords[rng.IntN(len(cellWords))]) + `</w:t></w:r>`
}

// randomTable is a table with or without a grid, rows of different
// lengths, cells spanning columns and merged down, and coloured words.
func randomTable(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("<w:tbl>")
	cols := 1 + rng.IntN(3)
	if rng.IntN(10) != 0 {
		b.WriteString("<w:tblGrid>" + strings.Repeat("<w:gridCol/>", cols) + "</w:tblGrid>")
	}
	for range rng.IntN(4) {
		b.WriteString("<w:tr>")
		n := cols
		if rng.IntN(5) == 0 {
			n = rng.IntN(cols + 2)
		}
		for range n {
			b.WriteString("<w:tc><w:tcPr>")
			if rng.IntN(6) == 0 {
				b.WriteString(`<w:gridSpan w:val="2"/>`)
			}
			if rng.IntN(5) == 0 {
				b.WriteString([]string{`<w:vMerge w:val="restart"/>`, `<w:vMerge/>`}[rng.IntN(2)])
			}
			b.WriteString("</w:tcPr>")
			for range 1 + rng.IntN(2) {
				b.WriteString("<w:p>")
				for range rng.IntN(3) {
					b.WriteString(randomCellRun(rng))
				}
				b.WriteString("</w:p>")
			}
			b.WriteString("</w:tc>")
		}
		b.WriteString("</w:tr>")
	}
	b.WriteString("</w:tbl>")
	return b.String()
}

// placeWords are words near fuzzy_place_math's answers and not.
var placeWords = []string{"Paris", "Pari", "london", "London", "Tokyo", "Tokio", "Berlin", "x", "Paris,", "東京", "New\u00a0York", "New York"}

// randomFooter is a footer's paragraphs: a page number as text or in a
// field, other text or nothing.
func randomFooter(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(3) {
		switch rng.IntN(5) {
		case 0:
			b.WriteString(`<w:p><w:r><w:t>Page 1</w:t></w:r></w:p>`)
		case 1:
			b.WriteString(`<w:p><w:fldSimple w:instr="PAGE"><w:r><w:t>2</w:t></w:r></w:fldSimple></w:p>`)
		case 2:
			b.WriteString(`<w:p><w:r><w:t>٣</w:t></w:r></w:p>`)
		case 3:
			b.WriteString(`<w:p><w:r><w:t>Confidential</w:t></w:r></w:p>`)
		default:
			b.WriteString(`<w:p/>`)
		}
	}
	return b.String()
}

// randomPNG is a small image: one of few colours, sometimes written with
// another compression (the same pixels), or bytes that are no image.
func randomPNG(rng *rand.Rand) []byte {
	if rng.IntN(25) == 0 {
		return []byte("not a png")
	}
	img := image.NewNRGBA(image.Rect(0, 0, 2, 1+rng.IntN(2)))
	c := []color.NRGBA{{255, 0, 0, 255}, {0, 0, 255, 255}, {0, 0, 255, 128}}[rng.IntN(3)]
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: []png.CompressionLevel{png.DefaultCompression, png.NoCompression}[rng.IntN(2)]}
	if err := enc.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// randomParts is a document of paragraphs of places, tables, sections
// whose footers are given or not, and images.
func randomParts(rng *rand.Rand) docxParts {
	var d docxParts
	for range rng.IntN(3) {
		d.footers = append(d.footers, randomFooter(rng))
	}
	sect := func() string {
		s := "<w:sectPr>"
		if len(d.footers) > 0 && rng.IntN(4) != 0 {
			s += fmt.Sprintf(`<w:footerReference w:type="%s" r:id="rIdF%d"/>`, []string{"default", "default", "first", "even"}[rng.IntN(4)], 1+rng.IntN(len(d.footers)))
		}
		return s + "</w:sectPr>"
	}
	var b strings.Builder
	for range rng.IntN(5) {
		switch rng.IntN(4) {
		case 0:
			b.WriteString(randomTable(rng))
		case 1:
			b.WriteString("<w:p><w:pPr>" + sect() + "</w:pPr></w:p>")
		default:
			// Runs as python-docx reads them or not: in a hyperlink, a
			// field, an insertion or a content control, with tabs, breaks
			// and hyphens between words.
			b.WriteString("<w:p>")
			for range rng.IntN(4) {
				r := fmt.Sprintf(`<w:r><w:t xml:space="preserve">%s</w:t>%s</w:r>`, placeWords[rng.IntN(len(placeWords))],
					[]string{"", "", `<w:t xml:space="preserve"> </w:t>`, "<w:tab/>", "<w:br/>", `<w:br w:type="page"/>`, "<w:cr/>", "<w:noBreakHyphen/>", "<w:ptab/>", "<w:softHyphen/>"}[rng.IntN(10)])
				switch rng.IntN(8) {
				case 0:
					r = "<w:hyperlink>" + r + "</w:hyperlink>"
				case 1:
					r = `<w:fldSimple w:instr="PAGE">` + r + "</w:fldSimple>"
				case 2:
					r = `<w:ins w:id="1">` + r + "</w:ins>"
				case 3:
					r = "<w:sdt><w:sdtContent>" + r + "</w:sdtContent></w:sdt>"
				}
				b.WriteString(r)
			}
			b.WriteString("</w:p>")
		}
	}
	if rng.IntN(6) != 0 {
		b.WriteString(sect())
	}
	d.body = b.String()
	for range rng.IntN(3) {
		d.images = append(d.images, randomPNG(rng))
	}
	return d
}

// mutateParts changes one thing in a copy of d: a cell's word or colour,
// a table, a footer, an image.
func mutateParts(rng *rand.Rand, d docxParts) docxParts {
	m := d
	switch rng.IntN(4) {
	case 0:
		for _, swap := range [][2]string{{"apple", "banana"}, {"FF0000", "800000"}, {"0000FF", "FF0000"}, {"Egg", "Egg "}, {"<w:gridCol/>", ""}} {
			if strings.Contains(m.body, swap[0]) {
				m.body = strings.Replace(m.body, swap[0], swap[1], 1)
				break
			}
		}
	case 1:
		m.body += randomTable(rng)
	case 2:
		m.footers = append([]string(nil), d.footers...)
		if len(m.footers) > 0 {
			m.footers[rng.IntN(len(m.footers))] = randomFooter(rng)
		}
	default:
		m.images = append([][]byte(nil), d.images...)
		if len(m.images) > 0 {
			m.images[rng.IntN(len(m.images))] = randomPNG(rng)
		}
	}
	return m
}

// TestDocxPartsMetricsMatchPy scores random documents with the metrics
// that read a .docx's tables, footers and images here and with OSWorld's
// docs.py and general.py on python-docx 1.x, and wants the same scores:
// compare_docx_tables (4 published tasks), compare_docx_images (2),
// has_page_numbers_in_footers, evaluate_colored_words_in_tables (with
// scikit-image's CIEDE2000 when it is installed) and fuzzy_place_math
// (1 each). It runs as TestMetricsMatchDocsPy does (OSWORLD_REF,
// PYTHON_DOCX).
func TestDocxPartsMetricsMatchPy(t *testing.T) {
	metrics, src := pythonDocx(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(43, 47))
	const pairs = 1500
	var jobs []docsPyJob
	for i := range pairs {
		a := randomParts(rng)
		b := a
		switch rng.IntN(3) {
		case 0:
			b = randomParts(rng)
		case 1:
			b = mutateParts(rng, a)
		}
		pa := a.write(t, dir, fmt.Sprintf("a%04d.docx", i))
		pb := b.write(t, dir, fmt.Sprintf("b%04d.docx", i))
		colors := map[string]any{}
		if rng.IntN(3) == 0 {
			colors["threshold"] = []float64{0, 3.5, 10, 50}[rng.IntN(4)]
		}
		places := map[string]any{"expected": []any{"Paris", "London", "Tokyo"}}
		jobs = append(jobs,
			docsPyJob{"compare_docx_tables", []any{pa, pb}, nil},
			docsPyJob{"compare_docx_images", []any{pa, pb}, nil},
			docsPyJob{"has_page_numbers_in_footers", []any{pa}, nil},
			docsPyJob{"evaluate_colored_words_in_tables", []any{pa, pb}, colors},
			docsPyJob{"fuzzy_place_math", []any{pa, places}, nil},
		)
	}
	want := runDocsPy(t, metrics, src, dir, jobs)
	compareDocsPy(t, jobs, want, func(docsPyJob) string { return "" })
}
