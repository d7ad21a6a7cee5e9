package pptx

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	decl   = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"
	nsDecl = `xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	relsNS = `xmlns="http://schemas.openxmlformats.org/package/2006/relationships"`
	relT   = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
)

const ctPML = "application/vnd.openxmlformats-officedocument.presentationml."

const contentTypes = decl + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
	`<Default Extension="xml" ContentType="application/xml"/><Default Extension="png" ContentType="image/png"/>` +
	`<Override PartName="/ppt/presentation.xml" ContentType="` + ctPML + `presentation.main+xml"/>` +
	`<Override PartName="/ppt/slides/slide1.xml" ContentType="` + ctPML + `slide+xml"/>` +
	`<Override PartName="/ppt/slideLayouts/slideLayout1.xml" ContentType="` + ctPML + `slideLayout+xml"/>` +
	`<Override PartName="/ppt/slideMasters/slideMaster1.xml" ContentType="` + ctPML + `slideMaster+xml"/>` +
	`<Override PartName="/ppt/notesSlides/notesSlide1.xml" ContentType="` + ctPML + `notesSlide+xml"/>` +
	`</Types>`

func rels(pairs ...string) string {
	var b strings.Builder
	b.WriteString(decl + `<Relationships ` + relsNS + `>`)
	for i := 0; i+2 < len(pairs)+1; i += 3 {
		b.WriteString(`<Relationship Id="` + pairs[i] + `" Type="` + relT + pairs[i+1] + `" Target="` + pairs[i+2] + `"/>`)
	}
	b.WriteString(`</Relationships>`)
	return b.String()
}

func tree(shapes string) string {
	return `<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>` + shapes + `</p:spTree></p:cSld>`
}

func xfrm(x, y, cx, cy string) string {
	return `<a:xfrm><a:off x="` + x + `" y="` + y + `"/><a:ext cx="` + cx + `" cy="` + cy + `"/></a:xfrm>`
}

// placeholder returns a p:sp placeholder, with a transform unless pos is
// empty.
func placeholder(typ, idx, pos, text string) string {
	return `<p:sp><p:nvSpPr><p:cNvPr id="2" name="ph"/><p:cNvSpPr/><p:nvPr><p:ph type="` + typ + `" idx="` + idx + `"/></p:nvPr></p:nvSpPr><p:spPr>` + pos +
		`</p:spPr><p:txBody><a:bodyPr/><a:p><a:r><a:t>` + text + `</a:t></a:r></a:p></p:txBody></p:sp>`
}

// minimal builds a one-slide package by hand, with the slide's shapes,
// its layout's and master's.
func minimal(slideShapes, layoutShapes, masterShapes string, extra map[string]string) []byte {
	files := map[string]string{
		"[Content_Types].xml":                          contentTypes,
		"_rels/.rels":                                  rels("rId1", "officeDocument", "ppt/presentation.xml"),
		"ppt/presentation.xml":                         decl + `<p:presentation ` + nsDecl + `><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:sldIdLst><p:sldId id="256" r:id="rId2"/></p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/></p:presentation>`,
		"ppt/_rels/presentation.xml.rels":              rels("rId1", "slideMaster", "slideMasters/slideMaster1.xml", "rId2", "slide", "slides/slide1.xml"),
		"ppt/slides/slide1.xml":                        decl + `<p:sld ` + nsDecl + `>` + tree(slideShapes) + `</p:sld>`,
		"ppt/slides/_rels/slide1.xml.rels":             rels("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml", "rId2", "image", "../media/image1.png"),
		"ppt/slideLayouts/slideLayout1.xml":            decl + `<p:sldLayout ` + nsDecl + `>` + tree(layoutShapes) + `</p:sldLayout>`,
		"ppt/slideLayouts/_rels/slideLayout1.xml.rels": rels("rId1", "slideMaster", "../slideMasters/slideMaster1.xml"),
		"ppt/slideMasters/slideMaster1.xml":            decl + `<p:sldMaster ` + nsDecl + `>` + tree(masterShapes) + `</p:sldMaster>`,
		"ppt/media/image1.png":                         "PNGDATA",
	}
	for k, v := range extra {
		files[k] = v
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			panic(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestPlaceholderPositionInheritance(t *testing.T) {
	slide := placeholder("title", "0", "", "own none") +
		placeholder("body", "1", "", "from master") +
		placeholder("body", "2", xfrm("5", "6", "7", "8"), "own") +
		placeholder("body", "9", "", "no layout placeholder")
	layout := placeholder("title", "0", xfrm("10", "20", "30", "40"), "") +
		placeholder("body", "1", "", "") +
		placeholder("body", "2", xfrm("1", "1", "1", "1"), "")
	master := placeholder("title", "0", xfrm("100", "200", "300", "400"), "") +
		placeholder("body", "1", xfrm("111", "222", "333", "444"), "")
	p, err := Read(minimal(slide, layout, master, nil))
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := p.Slides[0].Shapes()
	if err != nil {
		t.Fatal(err)
	}
	want := [][4]int64{{10, 20, 30, 40}, {111, 222, 333, 444}, {5, 6, 7, 8}}
	for i, w := range want {
		for k := range 4 {
			got, err := shapes[i].Pos(k)
			if err != nil || got == nil || *got != w[k] {
				t.Errorf("shape %d Pos(%d) = %v, %v; want %d", i, k, got, err, w[k])
			}
		}
	}
	if got, err := shapes[3].Pos(Left); err != nil || got != nil {
		t.Errorf("placeholder without a layout match: Pos(Left) = %v, %v; want nil", got, err)
	}
}

func TestShapeTypes(t *testing.T) {
	sp := func(cNvSpPr, geom string) string {
		return `<p:sp><p:nvSpPr><p:cNvPr id="3" name="s"/>` + cNvSpPr + `<p:nvPr/></p:nvSpPr><p:spPr>` + geom + `</p:spPr></p:sp>`
	}
	frame := func(uri, data string) string {
		return `<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="4" name="g"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm/><a:graphic><a:graphicData uri="` + uri + `">` + data + `</a:graphicData></a:graphic></p:graphicFrame>`
	}
	pic := func(nvPr string) string {
		return `<p:pic><p:nvPicPr><p:cNvPr id="5" name="p"/><p:cNvPicPr/><p:nvPr>` + nvPr + `</p:nvPr></p:nvPicPr><p:blipFill><a:blip r:embed="rId2"/></p:blipFill><p:spPr/></p:pic>`
	}
	tests := []struct {
		name, xml string
		want      int
		wantErr   bool
	}{
		{"text box", sp(`<p:cNvSpPr txBox="1"/>`, `<a:prstGeom prst="rect"/>`), TypeTextBox, false},
		{"auto shape", sp(`<p:cNvSpPr/>`, `<a:prstGeom prst="rect"/>`), TypeAutoShape, false},
		{"freeform", sp(`<p:cNvSpPr/>`, `<a:custGeom/>`), TypeFreeform, false},
		{"no geometry", sp(`<p:cNvSpPr/>`, ``), 0, true},
		{"bad txBox", sp(`<p:cNvSpPr txBox="yes"/>`, `<a:prstGeom prst="rect"/>`), 0, true},
		{"placeholder", placeholder("body", "1", "", "x"), TypePlaceholder, false},
		{"picture", pic(""), TypePicture, false},
		{"movie", pic(`<a:videoFile r:link="rId9"/>`), TypeMedia, false},
		{"table", frame("http://schemas.openxmlformats.org/drawingml/2006/table", "<a:tbl/>"), TypeTable, false},
		{"chart", frame("http://schemas.openxmlformats.org/drawingml/2006/chart", ""), TypeChart, false},
		{"smartart", frame("http://schemas.openxmlformats.org/drawingml/2006/diagram", ""), TypeNone, false},
		{"group", `<p:grpSp><p:nvGrpSpPr><p:cNvPr id="6" name="g"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:grpSp>`, TypeGroup, false},
		{"connector", `<p:cxnSp><p:nvCxnSpPr><p:cNvPr id="7" name="c"/><p:cNvCxnSpPr/><p:nvPr/></p:nvCxnSpPr><p:spPr/></p:cxnSp>`, TypeLine, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Read(minimal(tt.xml, "", "", nil))
			if err != nil {
				t.Fatal(err)
			}
			shapes, err := p.Slides[0].Shapes()
			if err != nil || len(shapes) != 1 {
				t.Fatalf("Shapes() = %d shapes, %v; want 1", len(shapes), err)
			}
			got, err := shapes[0].ShapeType()
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("ShapeType() = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTextAndFont(t *testing.T) {
	body := `<p:sp><p:nvSpPr><p:cNvPr id="3" name="t"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr><a:prstGeom prst="rect"/></p:spPr><p:txBody><a:bodyPr/>` +
		`<a:p><a:pPr algn="ctr" lvl="2"/><a:r><a:rPr sz="2400" b="1" i="0" u="dbl" strike="sngStrike"><a:solidFill><a:srgbClr val="FF8000"/></a:solidFill><a:latin typeface="Serif"/></a:rPr><a:t>ab</a:t></a:r><a:br/><a:fld id="{1}" type="slidenum"><a:t>7</a:t></a:fld><a:r><a:rPr u="sng"><a:solidFill><a:schemeClr val="tx1"/></a:solidFill></a:rPr><a:t/></a:r></a:p>` +
		`<a:p/></p:txBody></p:sp>` +
		`<p:sp><p:nvSpPr><p:cNvPr id="4" name="e"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr><a:prstGeom prst="rect"/></p:spPr></p:sp>`
	p, err := Read(minimal(body, "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	shapes, _ := p.Slides[0].Shapes()
	text, err := shapes[0].Text()
	if err != nil || text != "ab\v7\n" {
		t.Errorf("Text() = %q, %v; want %q", text, err, "ab\v7\n")
	}
	if ps := shapes[1].Paragraphs(); len(ps) != 1 {
		t.Errorf("a shape without a text body has %d paragraphs; want python-pptx's 1", len(ps))
	}
	para := shapes[0].Paragraphs()[0]
	if a, err := para.Alignment(); a != "ctr" || err != nil {
		t.Errorf("Alignment() = %q, %v; want ctr", a, err)
	}
	if l, err := para.Level(); l != 2 || err != nil {
		t.Errorf("Level() = %d, %v; want 2", l, err)
	}
	runs := para.Runs()
	if len(runs) != 2 {
		t.Fatalf("Runs() = %d; want 2 (fields and breaks are not runs)", len(runs))
	}
	f := runs[0].Font()
	name, _ := f.Name()
	size, _ := f.Size()
	bold, _ := f.Bold()
	italic, _ := f.Italic()
	u, _ := f.Underline()
	rgb, ok, err := f.Color()
	if name == nil || *name != "Serif" || size == nil || *size != 2400 || bold == nil || !*bold || italic == nil || *italic ||
		u != "dbl" || f.Strike() != "sngStrike" || !ok || err != nil || rgb != [3]uint8{0xff, 0x80, 0} {
		t.Errorf("font = %v %v %v %v %q %q %v %v %v", name, size, bold, italic, u, f.Strike(), rgb, ok, err)
	}
	g := runs[1].Font()
	name, _ = g.Name()
	bold, _ = g.Bold()
	u, _ = g.Underline()
	if _, ok, err := g.Color(); ok || err != nil {
		t.Errorf("theme colour: Color() ok = %v, %v; want no rgb", ok, err)
	}
	if name != nil || bold != nil || u != UnderlineTrue || g.Strike() != "noStrike" {
		t.Errorf("second run = %v %v %q %q; want unset name and bold, single underline, noStrike", name, bold, u, g.Strike())
	}
}

// TestEmptyEnumerationValues: python-pptx 1.0.2 maps "" to no member of
// an enumeration (1.0.0 and 1.0.1 read algn="" and u="" as MIXED), so
// reading either raises.
func TestEmptyEnumerationValues(t *testing.T) {
	body := `<p:sp><p:nvSpPr><p:cNvPr id="3" name="t"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>` +
		`<a:p><a:pPr algn=""/><a:r><a:rPr u=""/><a:t>x</a:t></a:r></a:p></p:txBody></p:sp>`
	p, err := Read(minimal(body, "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	shapes, _ := p.Slides[0].Shapes()
	para := shapes[0].Paragraphs()[0]
	if a, err := para.Alignment(); err == nil {
		t.Errorf(`Alignment() of algn="" = %q; want an error`, a)
	}
	if u, err := para.Runs()[0].Font().Underline(); err == nil {
		t.Errorf(`Underline() of u="" = %q; want an error`, u)
	}
}

func TestNotesAndBackground(t *testing.T) {
	notes := decl + `<p:notes ` + nsDecl + `>` + tree(placeholder("body", "1", "", "speaker says")) + `</p:notes>`
	data := minimal("", "", "", map[string]string{
		"ppt/slides/_rels/slide1.xml.rels":  rels("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml", "rId3", "notesSlide", "../notesSlides/notesSlide1.xml"),
		"ppt/notesSlides/notesSlide1.xml":   notes,
		"ppt/slideMasters/slideMaster1.xml": decl + `<p:sldMaster ` + nsDecl + `><p:cSld><p:bg><p:bgPr><a:solidFill><a:srgbClr val="00FF00"/></a:solidFill></p:bgPr></p:bg><p:spTree/></p:cSld></p:sldMaster>`,
	})
	p, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Slides[0]
	if n, err := s.NotesText(); n != "speaker says" || err != nil {
		t.Errorf("NotesText() = %q, %v; want speaker says", n, err)
	}
	if f := s.Background(); f.Type != FillBackground {
		t.Errorf("inherited background: Type = %d; want noFill (%d), as python-pptx reads it", f.Type, FillBackground)
	}
	m, err := s.MasterBackground()
	if err != nil {
		t.Fatal(err)
	}
	if rgb, err := m.RGB(); err != nil || rgb != [3]uint8{0, 255, 0} {
		t.Errorf("master background = %v, %v; want green", rgb, err)
	}
	// Without a notes slide or notes master python-pptx makes both, and
	// the notes read empty.
	p2, _ := Read(minimal("", "", "", nil))
	if n, err := p2.Slides[0].NotesText(); n != "" || err != nil {
		t.Errorf("no notes: NotesText() = %q, %v; want empty", n, err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pptx")
	if err := os.WriteFile(junk, []byte("PK\x03\x04 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "absent.pptx")); err == nil {
		t.Error("Open(missing) succeeded")
	}
	if _, err := Open(junk); err == nil {
		t.Error("Open(junk) succeeded")
	}
	deep := strings.Repeat("<a:x>", 300) + strings.Repeat("</a:x>", 300)
	if _, err := Read(minimal(`<p:sp xmlns:a="`+NSA+`">`+deep+`</p:sp>`, "", "", nil)); err == nil {
		t.Error("a slide nested 300 deep parsed")
	}
	if _, err := Read(minimal("", "", "", map[string]string{"ppt/presentation.xml": "<p:presentation"})); err == nil {
		t.Error("a truncated presentation.xml parsed")
	}
}

// bomb returns a package whose slide inflates to n bytes of spaces, its
// header claiming claimed bytes.
func bomb(t *testing.T, n int, claimed uint64) []byte {
	t.Helper()
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, flate.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	crc := crc32.NewIEEE()
	for written := 0; written < n; written += len(chunk) {
		fw.Write(chunk)
		crc.Write(chunk)
	}
	fw.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, content := range map[string]string{
		"[Content_Types].xml":             contentTypes,
		"_rels/.rels":                     rels("rId1", "officeDocument", "ppt/presentation.xml"),
		"ppt/presentation.xml":            decl + `<p:presentation ` + nsDecl + `><p:sldIdLst><p:sldId id="256" r:id="rId2"/></p:sldIdLst></p:presentation>`,
		"ppt/_rels/presentation.xml.rels": rels("rId2", "slide", "slides/slide1.xml"),
	} {
		w, _ := zw.Create(name)
		w.Write([]byte(content))
	}
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "ppt/slides/slide1.xml", Method: zip.Deflate,
		CompressedSize64: uint64(raw.Len()), UncompressedSize64: claimed, CRC32: crc.Sum32()})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw.Bytes())
	zw.Close()
	return b.Bytes()
}

func TestZipBomb(t *testing.T) {
	const n = MaxPart + (4 << 20)
	if _, err := Read(bomb(t, n, n)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("slide inflating to %d bytes: err = %v; want ErrTooLarge", n, err)
	}
	// A header that understates the size: archive/zip stops at the
	// declared size, and the read is capped in any case.
	if _, err := Read(bomb(t, n, 100)); err == nil {
		t.Errorf("slide inflating to %d bytes, header saying 100: no error", n)
	}
}

func FuzzReadPresentation(f *testing.F) {
	f.Add(minimal(placeholder("title", "0", "", "t")+`<p:pic><p:nvPicPr><p:cNvPr id="5" name="p"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="rId2"/></p:blipFill><p:spPr/></p:pic>`,
		placeholder("title", "0", xfrm("1", "2", "3", "4"), ""), "", nil))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Read(data)
		if err != nil {
			return
		}
		p.SlideSize()
		for _, s := range p.Slides {
			s.NotesText()
			s.Background().RGB()
			s.MasterBackground()
			shapes, _ := s.Shapes()
			walk(shapes)
		}
	})
}

func walk(shapes []*Shape) {
	for _, sh := range shapes {
		sh.ShapeType()
		for k := range 4 {
			sh.Pos(k)
		}
		sh.Text()
		sh.ImageBlob()
		if tb, err := sh.Table(); err == nil {
			for r := range tb.Rows {
				for c := range tb.Columns {
					tb.Cell(r, c)
				}
			}
		}
		for _, para := range sh.Paragraphs() {
			para.Alignment()
			para.Level()
			for _, r := range para.Runs() {
				f := r.Font()
				f.Name()
				f.Size()
				f.Bold()
				f.Underline()
				f.Color()
			}
		}
		walk(sh.Children())
	}
}

func TestParseXMLLimits(t *testing.T) {
	doc := []byte("<r>" + strings.Repeat("<e/>", 20) + "</r>")
	if _, n, err := parseXML(doc, 21); err != nil || n != 21 {
		t.Errorf("parseXML(21 elements, limit 21) = %d, %v; want 21, nil", n, err)
	}
	if _, _, err := parseXML(doc, 20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("parseXML(21 elements, limit 20): err = %v; want ErrTooLarge", err)
	}
	root, err := ParseXML([]byte(`<a><t></t><t/><t> x </t><b>1<c/>2</b></a>`))
	if err != nil {
		t.Fatal(err)
	}
	ts := root.ChildrenNamed("", "t")
	if ts[0].Text != nil || ts[1].Text != nil || ts[2].TextOr("") != " x " || root.Child("", "b").TextOr("") != "1" {
		t.Errorf("texts = %v %v %q %q; want ElementTree's None, None, \" x \", \"1\"", ts[0].Text, ts[1].Text, ts[2].TextOr(""), root.Child("", "b").TextOr(""))
	}
}
