package media

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"image"
	"image/png"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The PDFs the PyMuPDF differential test (pymupdf_test.go) reads: office
// documents LibreOffice converts, HTML pages Chromium prints, and PDFs
// written here by hand for the cases those programs do not make.

// richHTML is a page of what documents hold: headings, ligatures, soft
// hyphens, lists, a table, tabs, two columns, Greek, Cyrillic, Hebrew and
// Arabic (right to left), combining marks, a zero-width space, a
// no-break space, characters past the Basic Multilingual Plane, scripts
// no installed font has, a page break and a line running off the page.
const richHTML = `<!doctype html><html><head><meta charset="utf-8"><style>
body{font-family:"DejaVu Serif";font-size:12pt}
.cols{column-count:2}
pre{font-family:"DejaVu Sans Mono";tab-size:8}
td,th{border:1px solid #000;padding:2px}
</style></head><body>
<h1>Quarterly report — office fluff</h1>
<p>The first fine flow of affluent offices: fi fl ffi ffl. Soft&shy;hyphen in extra&shy;ordinarily long words.</p>
<ul><li>First bullet</li><li>Second bullet with <b>bold</b> and <i>italic</i></li></ul>
<ol><li>one</li><li>two</li></ol>
<table><tr><th>Name</th><th>Qty</th><th>Price</th></tr>
<tr><td>Apples</td><td>3</td><td>1.20</td></tr><tr><td>Pears</td><td>10</td><td>0.85</td></tr></table>
<pre>col1	col2	col3
a	b	c</pre>
<div class="cols"><p>Left column text that is long enough to wrap onto the second column of this layout, repeated. Left column text that is long enough to wrap onto the second column of this layout, repeated.</p></div>
<p>Ελληνικά κείμενο. Русский текст. עברית מימין לשמאל. العربية من اليمين إلى اليسار 123.</p>
<p>Combining: e&#x301; a&#x308;; zero&#x200b;width; nbsp:&nbsp;x; emoji: &#x1F600; math &#x1D400;.</p>
<p>中文文本 日本語</p>
<p style="page-break-before:always">Second page after a page break.</p>
<p style="white-space:nowrap;font-size:30pt">A very long line that overflows the right edge of the page by quite a lot of characters indeed</p>
</body></html>
`

// imagesHTML shows a JPEG, a PNG with an alpha channel (a soft mask in
// the PDF), the JPEG again, and an opaque PNG.
const imagesHTML = `<p style="page-break-before:always">Images: <img src="src.jpg"> <img src="alpha.png"> <img src="src.jpg" width="40"> <img src="src.png"></p>`

// officeInputs are the documents LibreOffice converts for the
// differential test (officePDFs runs it on them with the other test
// files): a Word document, a spreadsheet, a presentation and two HTML
// pages, and the pictures one shows.
func officeInputs() (map[string]string, error) {
	files := map[string]string{
		"rich.html": richHTML,
		// LibreOffice 7.4 prints an HTML page of one page blank: the
		// pictures are on a second.
		"pictures.html": "<!doctype html><html><head><meta charset=\"utf-8\"></head><body><p>Pictures</p>" + imagesHTML + "</body></html>",
		"sheet.csv":     sheetCSV,
		"slides.fodp":   slidesFODP,
	}
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	parts := docxFiles()
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		f, err := zw.Create(name)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write([]byte(parts[name])); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	files["memo.docx"] = z.String()
	for _, name := range []string{"src.jpg", "alpha.png"} {
		b, err := os.ReadFile(fixture(name))
		if err != nil {
			return nil, err
		}
		files[name] = string(b)
	}
	return files, nil
}

// chromePDF prints richHTML and imagesHTML with Chromium, as one
// document, into dir.
func chromePDF(t *testing.T, dir string) string {
	t.Helper()
	for _, name := range []string{"src.jpg", "alpha.png", "src.png"} {
		b, err := os.ReadFile(fixture(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	page := filepath.Join(dir, "chrome.html")
	if err := os.WriteFile(page, []byte(strings.Replace(richHTML, "</body>", imagesHTML+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "chrome.pdf")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
		"--user-data-dir="+filepath.Join(dir, "chromium"), "--print-to-pdf="+out, "file://"+page)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --print-to-pdf: %v\n%s", err, b)
	}
	return out
}

// docxFiles are the parts of a Word document: paragraphs with a tab, a
// page break, a bullet-like run of symbols and a table.
func docxFiles() map[string]string {
	p := func(runs string) string { return "<w:p>" + runs + "</w:p>" }
	r := func(text string) string { return `<w:r><w:t xml:space="preserve">` + text + `</w:t></w:r>` }
	cell := func(text string) string { return "<w:tc>" + p(r(text)) + "</w:tc>" }
	body := p(r("Memo to the finance office")) +
		p(r("Item")+"<w:r><w:tab/></w:r>"+r("Amount")) +
		p(r("• Affluent fjords, “quoted” and — dashed")) +
		"<w:tbl><w:tblPr><w:tblBorders><w:top w:val=\"single\"/><w:insideV w:val=\"single\"/></w:tblBorders></w:tblPr>" +
		"<w:tr>" + cell("Region") + cell("Total") + "</w:tr><w:tr>" + cell("North") + cell("1,024") + "</w:tr></w:tbl>" +
		p(`<w:r><w:br w:type="page"/></w:r>`+r("Page two of the memo"))
	return map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
			`<Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"_rels/.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`,
		"word/document.xml": `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			body + `</w:body></w:document>`,
	}
}

// sheetCSV is a spreadsheet of numbers, text and an empty cell.
const sheetCSV = "Region,Q1,Q2,Note\nNorth,1024,2048,ok\nSouth,17.5,,late\nEast,-3,1e3,\"a, b\"\n"

// slidesFODP is a two-slide presentation in OpenDocument's flat XML.
const slidesFODP = `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">
<office:body><office:presentation>
<draw:page draw:name="one"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm"><draw:text-box>
<text:p>Slide title: efficient workflow</text:p><text:p>Second line of the first slide</text:p></draw:text-box></draw:frame></draw:page>
<draw:page draw:name="two"><draw:frame svg:x="2cm" svg:y="5cm" svg:width="20cm" svg:height="3cm"><draw:text-box>
<text:p>Closing slide</text:p></draw:text-box></draw:frame></draw:page>
</office:presentation></office:body></office:document>
`

// rgbPixels is a PNG fixture's pixels as 8-bit RGB, its alpha channel,
// and its size.
func rgbPixels(t *testing.T, name string) ([]byte, []byte, int, int) {
	t.Helper()
	f, err := os.Open(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bounds()
	rgb := make([]byte, 0, b.Dx()*b.Dy()*3)
	alpha := make([]byte, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := image.NewNRGBA(image.Rect(0, 0, 1, 1))
			c.Set(0, 0, m.At(x, y))
			rgb = append(rgb, c.Pix[0], c.Pix[1], c.Pix[2])
			alpha = append(alpha, c.Pix[3])
		}
	}
	return rgb, alpha, b.Dx(), b.Dy()
}

// ccittMH is a 16×8 bilevel image coded as CCITT group 3, one
// dimension (K 0), rows not byte-aligned: each row alternates white and
// black runs, starting with white.
func ccittMH() []byte {
	white := map[int]string{0: "00110101", 4: "1011", 16: "101010"}
	black := map[int]string{8: "000101", 16: "0000010111"}
	rows := [][]string{
		{white[16]},
		{white[4], black[8], white[4]},
		{white[0], black[16]},
		{white[0], black[16]},
		{white[4], black[8], white[4]},
		{white[16]}, {white[16]}, {white[16]},
	}
	var bits strings.Builder
	for _, r := range rows {
		for _, c := range r {
			bits.WriteString(c)
		}
	}
	s := bits.String()
	for len(s)%8 != 0 {
		s += "0"
	}
	out := make([]byte, len(s)/8)
	for i := range out {
		for j := range 8 {
			if s[i*8+j] == '1' {
				out[i] |= 0x80 >> j
			}
		}
	}
	return out
}

// jbig2White is an embedded JBIG2 stream (segments, no file header) of a
// 16×8 white page: a page information segment and an immediate lossless
// generic region coded with MMR, eight rows of vertical mode 0.
func jbig2White() []byte {
	var b bytes.Buffer
	seg := func(num uint32, typ byte, data []byte) {
		b.Write([]byte{byte(num >> 24), byte(num >> 16), byte(num >> 8), byte(num), typ, 0, 1})
		n := len(data)
		b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		b.Write(data)
	}
	be32 := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	page := bytes.Join([][]byte{be32(16), be32(8), be32(0), be32(0), {0}, {0, 0}}, nil)
	seg(0, 48, page)
	region := bytes.Join([][]byte{be32(16), be32(8), be32(0), be32(0), {0}, {1}, {0xff}}, nil)
	seg(1, 39, region)
	return b.Bytes()
}

// handPDFs writes the hand-made PDFs into dir and returns their paths.
func handPDFs(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	write := func(name string, w *pdfWriter) {
		paths = append(paths, w.write(t, filepath.Join(dir, name)))
	}
	helv := func(w *pdfWriter) int {
		return w.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	}
	text := func(font int, content string) (string, []byte) {
		return fmt.Sprintf("/Font << /F1 %d 0 R >>", font), []byte(content)
	}

	// A font whose name holds XML: mutool's stext XML writes it as it is.
	{
		w := newPDF()
		f := w.add(`<< /Type /Font /Subtype /Type1 /BaseFont /A#22#3E#3Cchar#20c#3D#22ZZZ#22#2F#3E#3Cline#3E /Encoding /WinAnsiEncoding >>`)
		res, c := text(f, "BT /F1 12 Tf 20 50 Td (Plain words) Tj ET")
		w.page(200, 100, res, c)
		write("fontname.pdf", w)
	}
	// Text crossing the page's right and top edges, and text wholly
	// outside it.
	{
		w := newPDF()
		res, c := text(helv(w), "BT /F1 12 Tf 10 50 Td (Inside the page, then over the edge) Tj ET\n"+
			"BT /F1 12 Tf 10 92 Td (Top edge) Tj ET\nBT /F1 12 Tf 10 150 Td (Above) Tj ET\n"+
			"BT /F1 12 Tf -8 20 Td (Left edge) Tj ET\nBT /F1 12 Tf 10 -3 Td (Bottom) Tj ET")
		w.page(120, 100, res, c)
		write("edges.pdf", w)
	}
	// A glyph of no width (its /Widths entry 0), and text of size 0.
	{
		w := newPDF()
		widths := strings.TrimSpace(strings.Repeat("556 ", 26))
		f := w.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /FirstChar 97 /LastChar 122 /Widths [" +
			strings.Replace(widths, "556", "0", 1) + "] >>")
		res, c := text(f, "BT /F1 12 Tf 20 50 Td (bab cab) Tj ET\nBT /F1 0 Tf 20 30 Td (zero size) Tj ET\nBT /F1 12 Tf 20 10 Td (after) Tj ET")
		w.page(200, 100, res, c)
		write("zerowidth.pdf", w)
	}
	// A ToUnicode map to NUL, C1 controls, a tab, a soft hyphen, a lone
	// surrogate, two characters, a character past the BMP, U+FFFD and a
	// code with no mapping (Helvetica's own name for it then).
	{
		w := newPDF()
		cmap := w.stream("", []byte(`/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /T def
1 begincodespacerange <00> <FF> endcodespacerange
10 beginbfchar <41> <0000> <42> <0085> <43> <0009> <44> <00AD> <45> <D800> <46> <00660069> <47> <D83DDE00> <48> <FFFD> <49> <0080> <4A> <009F> endbfchar
endcmap CMapName currentdict /CMap defineresource pop end end`), true)
		f := w.add(fmt.Sprintf("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode %d 0 R >>", cmap))
		res, c := text(f, "BT /F1 12 Tf 10 80 Td (xAx) Tj ET\nBT /F1 12 Tf 10 65 Td (xBxIxJx) Tj ET\nBT /F1 12 Tf 10 50 Td (xCxDx) Tj ET\n"+
			"BT /F1 12 Tf 10 35 Td (xEx EEx) Tj ET\nBT /F1 12 Tf 10 20 Td (xFxGxHxKx) Tj ET\nBT /F1 12 Tf 10 5 Td (A) Tj ET")
		w.page(200, 100, res, c)
		write("tounicode.pdf", w)
	}
	// Pages turned 90° (text near an edge) and 45° (which MuPDF rounds
	// to 90 and PyMuPDF leaves alone), and a crop box cutting a line.
	{
		w := newPDF()
		f := helv(w)
		res, c := text(f, "BT /F1 12 Tf 5 90 Td (Rotated page, near the top edge of it) Tj ET\nBT /F1 12 Tf 5 40 Td (middle) Tj ET")
		w.pageWith(150, 100, "/Rotate 90", res, c)
		w.pageWith(150, 100, "/Rotate 45", res, c)
		w.pageWith(150, 100, "/Rotate -270", res, c)
		w.pageWith(150, 100, "/CropBox [0 0 100 95]", res, c)
		write("rotate.pdf", w)
	}
	// A Type 3 font whose box is half an em (so PyMuPDF makes its
	// characters taller), near the top edge, plain and scaled to half
	// width.
	{
		w := newPDF()
		glyph := w.stream("", []byte("500 0 0 0 500 500 d1 0 0 500 500 re f"), false)
		f := w.add(fmt.Sprintf("<< /Type /Font /Subtype /Type3 /FontBBox [0 0 500 500] /FontMatrix [0.001 0 0 0.001 0 0] "+
			"/CharProcs << /a %d 0 R /b %d 0 R >> /Encoding << /Type /Encoding /Differences [97 /a /b] >> /FirstChar 97 /LastChar 98 /Widths [500 0] /Resources << >> >>", glyph, glyph))
		res, c := text(f, "BT /F1 10 Tf 10 93 Td (aaa) Tj ET\nBT /F1 10 Tf 10 96 Td (aba) Tj ET\nq BT /F1 10 Tf 50 Tz 10 91 Td (aaaa) Tj ET Q\n"+
			"BT /F1 10 Tf 10 50 Td (abab) Tj ET\nBT /F1 10 Tf 10 1 Td (low) Tj ET\n"+
			// Upside down near the bottom edge, and turned a quarter
			// near the left one: kept only when their box is
			// not made taller.
			"BT /F1 10 Tf 1 0 0 -1 30 7 Tm (bab) Tj ET\nBT /F1 10 Tf 1 0 0 -1 60 12 Tm (aab) Tj ET\n"+
			"BT /F1 10 Tf 0 1 -1 0 7 30 Tm (ab) Tj ET\nBT /F1 10 Tf 0 1 -1 0 12 60 Tm (ba) Tj ET")
		w.page(100, 100, res, c)
		write("type3.pdf", w)
	}
	// Text in an annotation's appearance, invisible text (render mode
	// 3, as OCR layers are), text drawn twice in place (fake bold), a
	// page with only spaces and an empty page.
	{
		w := newPDF()
		f := helv(w)
		ap := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 100 30] /Resources << /Font << /F1 %d 0 R >> >>", f),
			[]byte("BT /F1 10 Tf 5 10 Td (Annotation text) Tj ET"), false)
		annot := w.add(fmt.Sprintf("<< /Type /Annot /Subtype /FreeText /Rect [50 10 150 40] /Contents (Annotation text) /DA (/Helv 10 Tf 0 g) /AP << /N %d 0 R >> >>", ap))
		res, c := text(f, "BT /F1 12 Tf 10 80 Td (Visible) Tj ET\nBT 3 Tr /F1 12 Tf 10 60 Td (Invisible OCR layer) Tj ET\n"+
			"BT /F1 12 Tf 10 45 Td (Bold) Tj ET BT /F1 12 Tf 10 45 Td (Bold) Tj ET")
		w.pageWith(200, 100, fmt.Sprintf("/Annots [%d 0 R]", annot), res, c)
		res, c = text(f, "BT /F1 12 Tf 10 80 Td (   ) Tj ET")
		w.page(200, 100, res, c)
		w.page(200, 100, "", nil)
		write("misc.pdf", w)
	}
	// A document of spaces alone: stripped to nothing.
	{
		w := newPDF()
		res, c := text(helv(w), "BT /F1 12 Tf 10 50 Td (  ) Tj ET")
		w.page(100, 100, res, c)
		write("blank.pdf", w)
	}

	// Images.
	rgb, alpha, iw, ih := rgbPixels(t, "alpha.png")
	jpg, err := os.ReadFile(fixture("src.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	rgbImage := func(w *pdfWriter, extra string) int {
		return w.stream(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8 %s", iw, ih, extra), rgb, true)
	}
	jpegImage := func(w *pdfWriter) int {
		return w.stream("/Type /XObject /Subtype /Image /Width 96 /Height 60 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", jpg, false)
	}
	draw := func(names ...string) []byte {
		var b strings.Builder
		for i, n := range names {
			fmt.Fprintf(&b, "q 96 0 0 60 %d %d cm /%s Do Q\n", 10+i*5, 10+i*70, n)
		}
		return []byte(b.String())
	}
	// A JPEG drawn twice, and a PNG-like image with a soft mask: two
	// images for PyMuPDF (the mask is not one), three drawings.
	{
		w := newPDF()
		j := jpegImage(w)
		mask := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8", iw, ih), alpha, true)
		im := rgbImage(w, fmt.Sprintf("/SMask %d 0 R", mask))
		w.page(300, 300, fmt.Sprintf("/XObject << /J %d 0 R /M %d 0 R >>", j, im), draw("J", "M", "J"))
		write("img-twice-smask.pdf", w)
	}
	// An image drawn only inside a form XObject, an inline image, an
	// image the page lists but never draws, one image under two names,
	// and the form's image listed by the page too.
	{
		w := newPDF()
		j := jpegImage(w)
		im := rgbImage(w, "")
		unused := w.stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}, false)
		form := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 300 300] /Resources << /XObject << /FJ %d 0 R >> >>", j),
			[]byte("q 96 0 0 60 0 0 cm /FJ Do Q"), false)
		inline := "q 20 0 0 20 150 150 cm BI /W 2 /H 2 /CS /G /BPC 8 ID \x00\xff\xff\x00 EI Q\n"
		w.page(300, 300, fmt.Sprintf("/XObject << /Fm %d 0 R /M %d 0 R /M2 %d 0 R /U %d 0 R /J %d 0 R >>", form, im, im, unused, j),
			append([]byte("q /Fm Do Q\n"+inline), draw("M", "M2")...))
		write("img-form-inline.pdf", w)
	}
	// The dictionary of ccittMH's 16x8 CCITT image.
	const faxDict = "/Type /XObject /Subtype /Image /Width 16 /Height 8 /ColorSpace /DeviceGray /BitsPerComponent 1 /Filter /CCITTFaxDecode /DecodeParms << /K 0 /Columns 16 /Rows 8 >>"
	// A CCITT fax image, a JBIG2 image, a CMYK image, an indexed image,
	// a stencil mask, an inverted image (/Decode [1 0]), a colour-key
	// masked image, a JPEG behind a Flate filter, a 16-bit image.
	{
		w := newPDF()
		fax := w.stream(faxDict, ccittMH(), false)
		cmyk := make([]byte, 0, iw*ih*4)
		for i := 0; i < len(rgb); i += 3 {
			k := 255 - max(rgb[i], rgb[i+1], rgb[i+2])
			cmyk = append(cmyk, 255-rgb[i]-k, 255-rgb[i+1]-k, 255-rgb[i+2]-k, k)
		}
		cm := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceCMYK /BitsPerComponent 8", iw, ih), cmyk, true)
		idxPix := make([]byte, 64)
		for i := range idxPix {
			idxPix[i] = byte((i/8 + i%8*3) % 4)
		}
		idx := w.stream("/Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace [/Indexed /DeviceRGB 3 <ff000000ff000000ffffff00>] /BitsPerComponent 8", idxPix, true)
		stencil := w.stream("/Type /XObject /Subtype /Image /Width 16 /Height 2 /ImageMask true /BitsPerComponent 1", []byte{0xf0, 0x0f, 0x3c, 0xc3}, false)
		inv := rgbImage(w, "/Decode [1 0 1 0 1 0]")
		key := rgbImage(w, "/Mask [0 128 0 128 0 128]")
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(jpg)
		zw.Close()
		flatejpg := w.add(fmt.Sprintf("<< /Type /XObject /Subtype /Image /Width 96 /Height 60 /ColorSpace /DeviceRGB /BitsPerComponent 8 "+
			"/Filter [/FlateDecode /DCTDecode] /Length %d >>\nstream\n%s\nendstream", z.Len(), z.Bytes()))
		g16 := make([]byte, 0, 16*16*2)
		for i := range 256 {
			g16 = append(g16, byte(i), byte(255-i))
		}
		gray16 := w.stream("/Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray /BitsPerComponent 16", g16, true)
		names := []string{"Fax", "Cm", "Idx", "St", "Inv", "Key", "FJ", "G16"}
		w.page(300, 900, fmt.Sprintf("/XObject << /Fax %d 0 R /Cm %d 0 R /Idx %d 0 R /St %d 0 R /Inv %d 0 R /Key %d 0 R /FJ %d 0 R /G16 %d 0 R >>",
			fax, cm, idx, stencil, inv, key, flatejpg, gray16), draw(names...))
		write("img-kinds.pdf", w)
		w = newPDF()
		w.page(300, 300, fmt.Sprintf("/XObject << /Jb %d 0 R >>", w.stream("/Type /XObject /Subtype /Image /Width 16 /Height 8 /ColorSpace /DeviceGray /BitsPerComponent 1 /Filter /JBIG2Decode", jbig2White(), false)), draw("Jb"))
		write("img-jbig2.pdf", w)
		w = newPDF()
		fax2 := w.stream(faxDict, ccittMH(), false)
		j := jpegImage(w)
		w.page(300, 300, fmt.Sprintf("/XObject << /Fax %d 0 R /J %d 0 R >>", fax2, j), draw("Fax", "J"))
		write("img-ccitt.pdf", w)
	}
	// A JPEG whose header MuPDF cannot read: extract_image raises, and
	// compare_pdf_images scores 0.
	{
		w := newPDF()
		bad := w.stream("/Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode",
			[]byte("\xff\xd8\xff\xfe not a jpeg at all"), false)
		w.page(300, 300, fmt.Sprintf("/XObject << /B %d 0 R >>", bad), draw("B"))
		write("img-badjpeg.pdf", w)
	}
	// Forms: one listed twice, which ends the scan of the page's
	// resources at the second (the image of the form after it is not
	// listed); one listing itself; an image in a tiling pattern, drawn
	// but not listed.
	{
		w := newPDF()
		j := jpegImage(w)
		im := rgbImage(w, "")
		small := w.stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}, false)
		formA := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 300 300] /Resources << /XObject << /I %d 0 R >> >>", j),
			[]byte("q 96 0 0 60 0 0 cm /I Do Q"), false)
		formB := w.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 300 300] /Resources << /XObject << /I %d 0 R >> >>", im),
			[]byte("q 96 0 0 60 0 100 cm /I Do Q"), false)
		self := len(w.objs) + 1
		w.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /Me %d 0 R /S %d 0 R >> >>", self, small),
			[]byte("q 10 0 0 10 0 0 cm /S Do Q"), false)
		pattern := w.stream(fmt.Sprintf("/Type /Pattern /PatternType 1 /PaintType 1 /TilingType 1 /BBox [0 0 20 20] /XStep 20 /YStep 20 "+
			"/Resources << /XObject << /P %d 0 R >> >>", small), []byte("q 20 0 0 20 0 0 cm /P Do Q"), false)
		w.page(300, 300, fmt.Sprintf("/XObject << /Self %d 0 R /A %d 0 R /A2 %d 0 R /B %d 0 R >> /Pattern << /Pt %d 0 R >>", self, formA, formA, formB, pattern),
			[]byte("/Self Do /A Do /A2 Do /B Do /Pattern cs /Pt scn 0 200 100 100 re f"))
		write("img-forms.pdf", w)
	}
	// Images on a page whose resources it inherits from the page tree.
	{
		w := newPDF()
		j := jpegImage(w)
		c := w.stream("", draw("J"), true)
		w.pages = append(w.pages, w.add(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Contents %d 0 R >>", c)))
		w.treeExtra = fmt.Sprintf("/Resources << /XObject << /J %d 0 R >> >> ", j)
		write("img-inherited.pdf", w)
	}
	return paths
}
