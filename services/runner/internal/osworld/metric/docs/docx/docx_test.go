package docx

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

const wordDocNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`

// pkgBytes zips parts into a package.
func pkgBytes(t testing.TB, parts map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// wordParts is the smallest package python-docx opens, with body as the
// content of w:body and rels as extra relationships of the main part.
func wordParts(body, rels string) map[string]string {
	return map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
			`<Default Extension="xml" ContentType="application/xml"/><Default Extension="png" ContentType="image/png"/>` +
			`<Override PartName="/word/document.xml" ContentType="` + ctDoc + `"/></Types>`,
		"_rels/.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="` + relOD + `" Target="word/document.xml"/></Relationships>`,
		"word/_rels/document.xml.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + rels + `</Relationships>`,
		"word/document.xml":            `<?xml version="1.0" encoding="UTF-8"?><w:document ` + wordDocNS + `><w:body>` + body + `</w:body></w:document>`,
	}
}

func ptr[T any](v T) *T { return &v }

// tcXML is a table cell with the given w:tcPr content and one paragraph.
func tcXML(props, text string) string {
	return `<w:tc><w:tcPr>` + props + `</w:tcPr><w:p><w:r><w:t>` + text + `</w:t></w:r></w:p></w:tc>`
}

// TestParagraphText pins python-docx 1.x's text rules on hand-written
// XML: these are the cases LibreOffice does not write but Word does.
func TestParagraphText(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"runs and hyperlinks", `<w:p><w:r><w:t>a</w:t></w:r><w:hyperlink r:id="x"><w:r><w:t>b</w:t></w:r></w:hyperlink></w:p>`, []string{"ab"}},
		{"field and content control left out", `<w:p><w:fldSimple w:instr="PAGE"><w:r><w:t>1</w:t></w:r></w:fldSimple><w:sdt><w:sdtContent><w:r><w:t>s</w:t></w:r></w:sdtContent></w:sdt><w:r><w:t>x</w:t></w:r></w:p>`, []string{"x"}},
		{"breaks and tabs", `<w:p><w:r><w:t>a</w:t><w:br/><w:t>b</w:t><w:br w:type="page"/><w:br w:type="column"/><w:tab/><w:cr/><w:noBreakHyphen/><w:ptab/><w:delText>d</w:delText></w:r></w:p>`, []string{"a\nb\t\n-\t"}},
		{"whitespace kept", `<w:p><w:r><w:t xml:space="preserve">  a  </w:t></w:r></w:p>`, []string{"  a  "}},
		{"body paragraphs only", `<w:p><w:r><w:t>1</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:sdt><w:sdtContent><w:p/></w:sdtContent></w:sdt><w:p/>`, []string{"1", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Read(pkgBytes(t, wordParts(tt.body, "")))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			var got []string
			for _, p := range d.Paragraphs {
				got = append(got, p.Text)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("paragraph texts = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunProperties(t *testing.T) {
	body := `<w:p><w:pPr><w:jc w:val="center"/><w:spacing w:line="276" w:lineRule="auto"/>` +
		`<w:tabs><w:tab w:val="clear" w:pos="709"/><w:tab w:val="decimal" w:pos="2835.4"/></w:tabs></w:pPr>` +
		`<w:r><w:rPr><w:i/><w:strike w:val="0"/><w:vertAlign w:val="superscript"/><w:sz w:val="27"/>` +
		`<w:rFonts w:ascii="Arial"/><w:color w:val="1F2e3D"/></w:rPr><w:t>x</w:t><w:br w:type="page"/></w:r>` +
		`<w:r><w:rPr><w:i w:val="false"/><w:strike w:val="on"/><w:vertAlign w:val="subscript"/><w:color w:val="auto"/></w:rPr></w:r>` +
		`<w:r><w:pict><w:br w:type="page"/></w:pict></w:r></w:p>` +
		`<w:p><w:pPr><w:spacing w:line="300" w:lineRule="exact"/></w:pPr></w:p><w:p><w:pPr><w:spacing w:line="480"/></w:pPr></w:p>`
	d, err := Read(pkgBytes(t, wordParts(body, "")))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	p := d.Paragraphs[0]
	if p.Alignment != "center" || p.LineSpacing == nil || *p.LineSpacing != 276*635.0/152400 {
		t.Errorf("alignment %q, line spacing %v; want center, %v", p.Alignment, p.LineSpacing, 276*635.0/152400)
	}
	wantTabs := []TabStop{{Alignment: "clear", Position: 709 * 635}, {Alignment: "decimal", Position: 2835 * 635}}
	if !reflect.DeepEqual(p.TabStops, wantTabs) {
		t.Errorf("tab stops = %v, want %v", p.TabStops, wantTabs)
	}
	want := []Run{
		{Text: "x", Italic: ptr(true), Strike: ptr(false), Subscript: ptr(false), Size: ptr(int64(13.5 * 12700)),
			FontName: ptr("Arial"), Color: &RGB{0x1f, 0x2e, 0x3d}, PageBreaks: 1},
		{Italic: ptr(false), Strike: ptr(true), Subscript: ptr(true)},
		{PageBreaks: 1},
	}
	if !reflect.DeepEqual(p.Runs, want) {
		t.Errorf("runs = %+v\nwant %+v", p.Runs, want)
	}
	if got := *d.Paragraphs[1].LineSpacing; got != 300*635 {
		t.Errorf("exact line spacing = %v EMU, want %v", got, 300*635)
	}
	if got := *d.Paragraphs[2].LineSpacing; got != 2 {
		t.Errorf("line spacing without a rule = %v, want 2 lines", got)
	}
}

func TestTableGrid(t *testing.T) {
	cell := tcXML
	grid := `<w:tblGrid><w:gridCol/><w:gridCol/><w:gridCol/></w:tblGrid>`
	tests := []struct {
		name, rows string
		want       []string
		wantErr    error
	}{
		{"plain", `<w:tr>` + cell("", "a") + cell("", "b") + cell("", "c") + `</w:tr>`, []string{"a", "b", "c"}, nil},
		{"span and merge", `<w:tr>` + cell(`<w:gridSpan w:val="2"/>`, "ab") + cell(`<w:vMerge w:val="restart"/>`, "c") + `</w:tr>` +
			`<w:tr>` + cell("", "d") + cell("", "e") + cell(`<w:vMerge/>`, "hidden") + `</w:tr>`,
			[]string{"ab", "ab", "c", "d", "e", "c"}, nil},
		{"merge in first row", `<w:tr>` + cell(`<w:vMerge/>`, "x") + `</w:tr>`, nil, ErrLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Read(pkgBytes(t, wordParts(`<w:tbl>`+grid+tt.rows+`</w:tbl>`, "")))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			cells, err := d.Tables[0].Grid()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Grid error = %v, want %v", err, tt.wantErr)
			}
			var got []string
			for _, c := range cells {
				got = append(got, c.Text())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("grid = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSectionsAndImages(t *testing.T) {
	png := "\x89PNG fake"
	rels := `<Relationship Id="f1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footer" Target="footer1.xml"/>` +
		`<Relationship Id="i2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/b.png"/>` +
		`<Relationship Id="i1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="/word/media/a.png"/>`
	body := `<w:p><w:pPr><w:sectPr><w:pgSz w:w="12240"/><w:pgMar w:left="1440" w:right="1.5in"/></w:sectPr></w:pPr></w:p>` +
		`<w:p><w:pPr><w:sectPr><w:footerReference w:type="even" r:id="f1"/></w:sectPr></w:pPr></w:p>` +
		`<w:sectPr><w:footerReference w:type="default" r:id="f1"/></w:sectPr>`
	parts := wordParts(body, rels)
	parts["word/footer1.xml"] = `<w:ftr ` + wordDocNS + `><w:p><w:r><w:t>Page </w:t></w:r><w:r><w:t>3</w:t></w:r></w:p><w:p/></w:ftr>`
	parts["[Content_Types].xml"] = strings.Replace(parts["[Content_Types].xml"], "</Types>",
		`<Override PartName="/word/footer1.xml" ContentType="`+ctFooter+`"/></Types>`, 1)
	parts["word/media/a.png"] = png + "a"
	parts["word/media/b.png"] = png + "b"
	d, err := Read(pkgBytes(t, parts))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(d.Sections) != 3 {
		t.Fatalf("%d sections, want 3", len(d.Sections))
	}
	s := d.Sections[0]
	if *s.PageWidth != 12240*635 || *s.LeftMargin != 1440*635 || *s.RightMargin != 1371600 {
		t.Errorf("section 0 geometry = %d %d %d", *s.PageWidth, *s.LeftMargin, *s.RightMargin)
	}
	var footers []string
	for _, s := range d.Sections {
		footers = append(footers, s.Footer[0].Text)
	}
	// The first section has no footer (an empty one is added on access);
	// the second has only an even-page one and inherits the first's.
	if want := []string{"", "", "Page 3"}; !reflect.DeepEqual(footers, want) {
		t.Errorf("footers = %q, want %q", footers, want)
	}
	if len(d.Images) != 2 || string(d.Images[0]) != png+"b" || string(d.Images[1]) != png+"a" {
		t.Errorf("images = %q, want b then a in relationship order", d.Images)
	}
}

func TestReadRefuses(t *testing.T) {
	base := wordParts(`<w:p/>`, "")
	with := func(name, body string) []byte {
		p := map[string]string{}
		for k, v := range base {
			p[k] = v
		}
		if body == "" {
			delete(p, name)
		} else {
			p[name] = body
		}
		return pkgBytes(t, p)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"not a zip", []byte("plain text")},
		{"empty", nil},
		{"no content types", with("[Content_Types].xml", "")},
		{"no main part", with("word/document.xml", "")},
		{"macro document", with("[Content_Types].xml", strings.Replace(base["[Content_Types].xml"], ctDoc, "application/vnd.ms-word.document.macroEnabled.main+xml", 1))},
		{"malformed xml", with("word/document.xml", `<w:document `+wordDocNS+`><w:body><w:p></w:body>`)},
		{"dangling relationship", with("word/_rels/document.xml.rels", `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="x" Type="t" Target="gone.xml"/></Relationships>`)},
		{"utf-16 declared", with("word/document.xml", `<?xml version="1.0" encoding="UTF-16"?><w:document `+wordDocNS+`/>`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Read(tt.data); err == nil {
				t.Errorf("Read succeeded, want an error")
			}
		})
	}
}

// TestZipBomb reads packages whose document part inflates past the
// per-part cap: one declaring its real size, one claiming a few bytes.
func TestZipBomb(t *testing.T) {
	var comp bytes.Buffer
	fw, err := flate.NewWriter(&comp, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte(`<w:document ` + wordDocNS + `><w:body>`))
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = ' '
	}
	size := uint64(0)
	for range (maxPart >> 20) + 2 {
		fw.Write(chunk)
		size += uint64(len(chunk))
	}
	fw.Close()
	for _, declared := range []uint64{size, 10} {
		var raw bytes.Buffer
		zw := zip.NewWriter(&raw)
		for name, body := range wordParts(`<w:p/>`, "") {
			if name == "word/document.xml" {
				continue
			}
			w, _ := zw.Create(name)
			w.Write([]byte(body))
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "word/document.xml", Method: zip.Deflate,
			CompressedSize64: uint64(comp.Len()), UncompressedSize64: declared})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
		zw.Close()
		_, err = Read(raw.Bytes())
		if err == nil {
			t.Fatalf("Read of a zip bomb declaring %d bytes succeeded", declared)
		}
		if !errors.Is(err, boundedread.ErrTooLarge) && !errors.Is(err, zip.ErrFormat) && !errors.Is(err, zip.ErrChecksum) {
			t.Errorf("Read of a zip bomb declaring %d bytes: %v, want a size or format error", declared, err)
		}
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "none.docx")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
	if _, err := OpenODT(filepath.Join(t.TempDir(), "none.odt")); err == nil {
		t.Error("OpenODT of a missing file succeeded")
	}
}

func TestRegistryValue(t *testing.T) {
	xcu := `<?xml version="1.0" encoding="UTF-8"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">` +
		`<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse"><value>Arial</value></prop></item>` +
		`<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Heading" oor:op="fuse"><value>Other</value></prop></item>` +
		`<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse"><value>Times New Roman</value></prop></item>` +
		`<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="Standard"><value>No</value></prop></item></oor:items>`
	got, ok, err := RegistryValue([]byte(xcu), "/org.openoffice.Office.Writer/DefaultFont", "Standard")
	if err != nil || !ok || got != "Times New Roman" {
		t.Errorf("RegistryValue = %q, %v, %v; want the last Standard value", got, ok, err)
	}
	if _, ok, err := RegistryValue([]byte(xcu), "/none", "Standard"); ok || err != nil {
		t.Errorf("RegistryValue of an absent item = ok %v, err %v", ok, err)
	}
	if _, _, err := RegistryValue([]byte("<oor:items"), "/x", "y"); err == nil {
		t.Error("RegistryValue of malformed XML succeeded")
	}
}

// needSoffice returns LibreOffice's binary; a test needing it fails in CI
// when it is missing and skips elsewhere.
func needSoffice(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("soffice")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("soffice (LibreOffice) not installed: %v", err)
		}
		t.Skipf("soffice (LibreOffice) not installed: %v", err)
	}
	return p
}

// convert has LibreOffice convert the flat ODF documents srcs (name →
// content) to format, with a private profile so that concurrent runs do
// not share one, and returns the output directory.
func convert(t *testing.T, format string, srcs map[string]string) string {
	t.Helper()
	bin := needSoffice(t)
	dir := t.TempDir()
	args := []string{"-env:UserInstallation=file://" + filepath.Join(dir, "profile"), "--headless", "--convert-to", format, "--outdir", dir}
	for name, body := range srcs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	return dir
}

// fodt is a flat ODF text document with the given automatic styles,
// footer paragraph content ("" for none) and body.
func fodt(styles, footer, body string) string {
	master := `<style:master-page style:name="Standard" style:page-layout-name="pm1"/>`
	if footer != "" {
		master = `<style:master-page style:name="Standard" style:page-layout-name="pm1"><style:footer><text:p>` + footer + `</text:p></style:footer></style:master-page>`
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
<office:automatic-styles>` + styles + `<style:page-layout style:name="pm1"><style:page-layout-properties fo:page-width="21cm" fo:page-height="29.7cm" fo:margin-left="2cm" fo:margin-right="2cm"/></style:page-layout></office:automatic-styles>
<office:master-styles>` + master + `</office:master-styles>
<office:body><office:text>` + body + `</office:text></office:body></office:document>`
}

// TestLibreOffice reads documents LibreOffice wrote, in both formats.
func TestLibreOffice(t *testing.T) {
	styles := `<style:style style:name="P1" style:family="paragraph"><style:paragraph-properties fo:text-align="center" fo:line-height="150%"><style:tab-stops><style:tab-stop style:position="5cm" style:type="right"/></style:tab-stops></style:paragraph-properties></style:style>` +
		`<style:style style:name="P2" style:family="paragraph"><style:paragraph-properties fo:break-before="page"/></style:style>` +
		`<style:style style:name="T1" style:family="text"><style:text-properties fo:font-style="italic" fo:font-size="14pt" style:text-line-through-style="solid"/></style:style>` +
		`<style:style style:name="T2" style:family="text"><style:text-properties style:text-position="sub 58%" fo:color="#0000ff"/></style:style>` +
		`<style:style style:name="T3" style:family="text"><style:text-properties fo:background-color="#ffff00"/></style:style>`
	body := `<text:p text:style-name="P1">Title<text:tab/>right</text:p>` +
		`<text:p>a <text:span text:style-name="T1">b</text:span> H<text:span text:style-name="T2">2</text:span>O <text:a xlink:href="http://example.org/">link</text:a> <text:span text:style-name="T3">marked</text:span></text:p>` +
		`<text:h text:outline-level="1">Heading</text:h>` +
		`<table:table><table:table-column table:number-columns-repeated="2"/><table:table-row><table:table-cell><text:p>c1</text:p><text:p>c1b</text:p></table:table-cell><table:table-cell><text:p>c2</text:p></table:table-cell></table:table-row></table:table>` +
		`<text:p text:style-name="P2">After</text:p>`
	src := map[string]string{"doc.fodt": fodt(styles, `Page <text:page-number text:select-page="current">1</text:page-number>`, body)}
	dir := convert(t, "docx", src)
	d, err := Open(filepath.Join(dir, "doc.docx"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	var texts []string
	for _, p := range d.Paragraphs {
		texts = append(texts, p.Text)
	}
	// python-docx 1.x: hyperlink text counts, a page break adds nothing.
	if want := []string{"Title\tright", "a b H2O link marked", "Heading", "After"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("paragraphs = %q, want %q", texts, want)
	}
	p0 := d.Paragraphs[0]
	if p0.Alignment != "center" || p0.LineSpacing == nil || *p0.LineSpacing != 1.5 {
		t.Errorf("first paragraph alignment %q spacing %v, want center 1.5", p0.Alignment, p0.LineSpacing)
	}
	var right []TabStop
	for _, ts := range p0.TabStops {
		if ts.Alignment == "right" {
			right = append(right, ts)
		}
	}
	// 5 cm is 2835 twips.
	if want := []TabStop{{Alignment: "right", Position: 2835 * 635}}; !reflect.DeepEqual(right, want) {
		t.Errorf("right tab stops = %v, want %v", right, want)
	}
	var b, sub *Run
	for i, r := range d.Paragraphs[1].Runs {
		switch r.Text {
		case "b":
			b = &d.Paragraphs[1].Runs[i]
		case "2":
			sub = &d.Paragraphs[1].Runs[i]
		}
	}
	if b == nil || !*b.Italic || !*b.Strike || *b.Size != 14*12700 {
		t.Errorf("italic run = %+v, want italic, struck, 14 pt", b)
	}
	if sub == nil || !*sub.Subscript || *sub.Color != (RGB{0, 0, 255}) {
		t.Errorf("subscript run = %+v, want subscript and blue", sub)
	}
	breaks := 0
	for _, r := range d.Paragraphs[3].Runs {
		breaks += r.PageBreaks
	}
	if breaks != 1 {
		t.Errorf("page breaks before the last paragraph = %d, want 1", breaks)
	}
	if len(d.Tables) != 1 || d.Tables[0].Columns != 2 {
		t.Fatalf("tables = %+v, want one of 2 columns", d.Tables)
	}
	cells, err := d.Tables[0].Grid()
	if err != nil || len(cells) != 2 || cells[0].Text() != "c1\nc1b" || cells[1].Text() != "c2" {
		t.Errorf("table cells = %v, %v", cells, err)
	}
	if len(d.Sections) != 1 || !strings.HasPrefix(d.Sections[0].Footer[0].Text, "Page ") || *d.Sections[0].PageWidth != 11906*635 {
		t.Errorf("sections = %+v, want one with a page-number footer on A4", d.Sections)
	}

	dir = convert(t, "odt", src)
	o, err := OpenODT(filepath.Join(dir, "doc.odt"))
	if err != nil {
		t.Fatalf("OpenODT: %v", err)
	}
	// odfpy lists the footer's paragraph after the body's, skips the
	// heading, and reads only direct text and direct spans: no tab, no
	// link, no page number field.
	if want := []string{"Titleright", "a b H2O  marked", "c1", "c1b", "c2", "After", "Page "}; !reflect.DeepEqual(o.Paragraphs, want) {
		t.Errorf("odt paragraphs = %q, want %q", o.Paragraphs, want)
	}
	if highlighted, err := o.Highlighted("#ffff00"); !highlighted || err != nil {
		t.Errorf("no span with a yellow background among %v / %+v", o.SpanStyles, o.AutoStyles)
	}
}

func FuzzReadDocument(f *testing.F) {
	f.Add(pkgBytes(f, wordParts(`<w:p><w:r><w:t>a</w:t></w:r></w:p><w:tbl><w:tblGrid><w:gridCol/></w:tblGrid><w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr></w:tc></w:tr></w:tbl><w:sectPr/>`, "")))
	f.Add(pkgBytes(f, map[string]string{"META-INF/manifest.xml": `<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="content.xml"/></manifest:manifest>`,
		"content.xml": `<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><text:p>a<text:span>b</text:span></text:p></office:body></office:document-content>`}))
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, err := Read(data); err == nil {
			walkTables(d)
		}
		ReadODT(data)
	})
}

// FuzzDocumentBody fuzzes the XML of w:body, which a zip-level fuzzer
// rarely reaches intact.
func FuzzDocumentBody(f *testing.F) {
	f.Add(`<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid><w:tr><w:trPr><w:gridBefore w:val="1"/></w:trPr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr></w:tc></w:tr>` +
		`<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p><w:r><w:t>a<!--c-->b</w:t></w:r></w:p></w:tc></w:tr></w:tbl>`)
	f.Add(`<w:p><w:pPr><w:jc w:val="start"/><w:spacing w:line="1_0e2" w:lineRule="exact"/><w:tabs><w:tab w:val="left" w:pos="1in"/></w:tabs></w:pPr>` +
		`<w:r><w:rPr><w:i w:val="on"/><w:sz w:val="٢٨"/><w:color w:val=" FF00000"/><w:vertAlign/></w:rPr><w:t>x</w:t></w:r></w:p><w:sectPr><w:pgSz w:w="8.5in"/><w:pgMar w:left="1e3"/></w:sectPr>`)
	f.Fuzz(func(t *testing.T, body string) {
		if d, err := Read(pkgBytes(t, wordParts(body, ""))); err == nil {
			walkTables(d)
		}
	})
}

// walkTables lays out every table as the metrics do, which must not panic.
func walkTables(d *Document) {
	for i := range d.Tables {
		d.Tables[i].Grid()
		for r := range d.Tables[i].Rows {
			d.Tables[i].RowCells(r)
		}
	}
}

func TestReadODTParts(t *testing.T) {
	const manifest = `<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="content.xml"/></manifest:manifest>`
	const content = `<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0">` +
		`<office:body><office:text><text:p>a<text:span text:style-name="T1">b<text:span>nested</text:span></text:span><text:s/>c<![CDATA[d]]>e</text:p></office:text></office:body></office:document-content>`
	d, err := ReadODT(pkgBytes(t, map[string]string{"META-INF/manifest.xml": manifest, "content.xml": content, "styles.xml": `<x/>`}))
	if err != nil {
		t.Fatalf("ReadODT: %v", err)
	}
	// styles.xml is not in the manifest, so odfpy never reads it.
	if want := []string{"abcde"}; !reflect.DeepEqual(d.Paragraphs, want) {
		t.Errorf("paragraphs = %q, want %q", d.Paragraphs, want)
	}
	if want := []string{"T1", ""}; !reflect.DeepEqual(d.SpanStyles, want) {
		t.Errorf("span styles = %q, want %q", d.SpanStyles, want)
	}
	if _, err := ReadODT(pkgBytes(t, map[string]string{"content.xml": content})); err == nil {
		t.Error("ReadODT without a manifest succeeded")
	}
	if _, err := ReadODT(pkgBytes(t, map[string]string{"META-INF/manifest.xml": manifest, "content.xml": "<office:document-content"})); err == nil {
		t.Error("ReadODT of malformed content succeeded")
	}
}
