package slides

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The fixtures are presentations LibreOffice writes: flat ODF sources
// (.fodp) converted to pptx by `soffice --headless --convert-to pptx`, all
// in one run per test binary.

const fodpHead = `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:smil="urn:oasis:names:tc:opendocument:xmlns:smil-compatible:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">
 <office:automatic-styles>
  <style:style style:name="pr1" style:family="presentation"/>
  <style:style style:name="dpred" style:family="drawing-page"><style:drawing-page-properties draw:fill="solid" draw:fill-color="#ff0000"/></style:style>
  <style:style style:name="dpblue" style:family="drawing-page"><style:drawing-page-properties draw:fill="solid" draw:fill-color="#0000ff"/></style:style>
  <style:style style:name="dpdissolve" style:family="drawing-page"><style:drawing-page-properties presentation:transition-type="automatic" smil:type="dissolve" smil:subtype="default"/></style:style>
  <style:style style:name="TR" style:family="text"><style:text-properties fo:color="#ff0000"/></style:style>
  <style:style style:name="TG" style:family="text"><style:text-properties fo:color="#00ff00"/></style:style>
  <style:style style:name="TRB" style:family="text"><style:text-properties fo:color="#ff0000" fo:font-weight="bold"/></style:style>
  <style:style style:name="TRI" style:family="text"><style:text-properties fo:color="#ff0000" fo:font-style="italic"/></style:style>
  <style:style style:name="TRU" style:family="text"><style:text-properties fo:color="#ff0000" style:text-underline-style="solid" style:text-underline-width="auto" style:text-underline-color="font-color"/></style:style>
  <style:style style:name="TRK" style:family="text"><style:text-properties fo:color="#ff0000" style:text-line-through-style="solid"/></style:style>
  <style:style style:name="TRS" style:family="text"><style:text-properties fo:color="#ff0000" fo:font-size="30pt"/></style:style>
  <style:style style:name="TRF" style:family="text"><style:text-properties fo:color="#ff0000" fo:font-family="'DejaVu Serif'"/></style:style>
  <style:style style:name="TB" style:family="text"><style:text-properties fo:font-weight="bold"/></style:style>
  <style:style style:name="PC" style:family="paragraph"><style:paragraph-properties fo:text-align="center"/></style:style>
 </office:automatic-styles>
 <office:body>
  <office:presentation>
`

const fodpTail = `  </office:presentation>
 </office:body>
</office:document>
`

type page struct {
	style, body, notes string
}

func fodp(pages ...page) string {
	var b strings.Builder
	b.WriteString(fodpHead)
	for i, p := range pages {
		b.WriteString(`<draw:page draw:name="page` + string(rune('1'+i)) + `"`)
		if p.style != "" {
			b.WriteString(` draw:style-name="` + p.style + `"`)
		}
		b.WriteString(">" + p.body)
		if p.notes != "" {
			b.WriteString(`<presentation:notes><draw:page-thumbnail presentation:style-name="pr1" draw:layer="layout" svg:x="2cm" svg:y="2cm" svg:width="17cm" svg:height="10cm" draw:page-number="1" presentation:class="page"/>` +
				`<draw:frame presentation:style-name="pr1" draw:layer="layout" svg:x="2cm" svg:y="14cm" svg:width="17cm" svg:height="10cm" presentation:class="notes" presentation:placeholder="false"><draw:text-box><text:p>` +
				p.notes + `</text:p></draw:text-box></draw:frame></presentation:notes>`)
		}
		b.WriteString("</draw:page>\n")
	}
	b.WriteString(fodpTail)
	return b.String()
}

func textBox(x, y, w, h, content string) string {
	return `<draw:frame svg:x="` + x + `" svg:y="` + y + `" svg:width="` + w + `" svg:height="` + h + `"><draw:text-box>` + content + `</draw:text-box></draw:frame>`
}

const (
	tableA = `<draw:frame svg:x="2cm" svg:y="8cm" svg:width="10cm" svg:height="4cm"><table:table><table:table-column/><table:table-column/>` +
		`<table:table-row><table:table-cell><text:p>A</text:p></table:table-cell><table:table-cell><text:p>B</text:p></table:table-cell></table:table-row>` +
		`<table:table-row><table:table-cell><text:p>C</text:p></table:table-cell><table:table-cell><text:p>D</text:p></table:table-cell></table:table-row></table:table></draw:frame>`
	bulletsA = `<text:list><text:list-item><text:p>one</text:p><text:list><text:list-item><text:p>two</text:p></text:list-item></text:list></text:list-item></text:list>`
	bulletsB = `<text:list><text:list-item><text:p>one</text:p></text:list-item><text:list-item><text:p>two</text:p></text:list-item></text:list>`
)

// deck is the reference presentation with one part replaced.
func deck(repl ...string) string {
	title := `<text:p>Hello <text:span text:style-name="TR">world</text:span></text:p>`
	pages := []page{
		{body: textBox("2cm", "2cm", "12cm", "3cm", title) + tableA, notes: "note one"},
		{body: textBox("2cm", "2cm", "12cm", "6cm", bulletsA)},
	}
	s := fodp(pages...)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			panic("deck: no " + repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	return s
}

// layoutDeck has a title on slide 1, a picture on slide 2 and a table on
// slide 3, for the options that look at one slide's positions.
func layoutDeck(pic []byte, repl ...string) string {
	s := fodp(
		page{body: textBox("2cm", "2cm", "20cm", "3cm", "<text:p>Product Comparison</text:p>")},
		page{body: picture("2cm", "8cm", "6cm", "4cm", pic) + textBox("2cm", "2cm", "10cm", "2cm", "<text:p>caption</text:p>")},
		page{body: strings.Replace(tableA, `svg:x="2cm" svg:y="8cm"`, `svg:x="3cm" svg:y="2cm"`, 1)},
	)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			panic("layoutDeck: no " + repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	return s
}

// pngData returns a small PNG of one colour.
func pngData(c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for x := range 8 {
		for y := range 6 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func picture(x, y, w, h string, data []byte) string {
	return `<draw:frame svg:x="` + x + `" svg:y="` + y + `" svg:width="` + w + `" svg:height="` + h + `"><draw:image><office:binary-data>` +
		base64.StdEncoding.EncodeToString(data) + `</office:binary-data></draw:image></draw:frame>`
}

// sources are the fixtures by name.
func sources() map[string]string {
	red := pngData(color.RGBA{200, 10, 10, 255})
	green := pngData(color.RGBA{10, 200, 10, 255})
	onePic := func(x, y, w, h string) string {
		return fodp(page{body: picture(x, y, w, h, red) + textBox("1cm", "1cm", "5cm", "2cm", "<text:p>caption</text:p>")})
	}
	return map[string]string{
		"layout":          layoutDeck(red),
		"layouttitledown": layoutDeck(red, `svg:x="2cm" svg:y="2cm" svg:width="20cm"`, `svg:x="2cm" svg:y="11cm" svg:width="20cm"`),
		"layoutpicright":  layoutDeck(red, `svg:x="2cm" svg:y="8cm" svg:width="6cm"`, `svg:x="14cm" svg:y="8cm" svg:width="6cm"`),
		"layoutpicup":     layoutDeck(red, `svg:x="2cm" svg:y="8cm" svg:width="6cm"`, `svg:x="2cm" svg:y="3cm" svg:width="6cm"`),
		"layoutpictaller": layoutDeck(red, `svg:width="6cm" svg:height="4cm"`, `svg:width="6cm" svg:height="6cm"`),
		"layouttabledown": layoutDeck(red, `svg:x="3cm" svg:y="2cm"`, `svg:x="3cm" svg:y="11cm"`),
		"base":            deck(),
		"text":            deck("Hello", "Hallo"),
		"color":           deck(`"TR">world`, `"TG">world`),
		"bold":            deck(`"TR">world`, `"TRB">world`),
		"italic":          deck(`"TR">world`, `"TRI">world`),
		"underline":       deck(`"TR">world`, `"TRU">world`),
		"strike":          deck(`"TR">world`, `"TRK">world`),
		"size":            deck(`"TR">world`, `"TRS">world`),
		"font":            deck(`"TR">world`, `"TRF">world`),
		"align":           deck(`<text:p>Hello`, `<text:p text:style-name="PC">Hello`),
		"moved":           deck(`svg:x="2cm" svg:y="2cm" svg:width="12cm" svg:height="3cm"`, `svg:x="5cm" svg:y="2cm" svg:width="12cm" svg:height="3cm"`),
		"notes":           deck("note one", "note two"),
		"background":      deck(`<draw:page draw:name="page1"`, `<draw:page draw:name="page1" draw:style-name="dpred"`),
		"oneslide":        fodp(page{body: textBox("2cm", "2cm", "12cm", "3cm", `<text:p>Hello <text:span text:style-name="TR">world</text:span></text:p>`) + tableA, notes: "note one"}),
		"tablebold":       deck(`<text:p>A</text:p>`, `<text:p><text:span text:style-name="TB">A</text:span></text:p>`),
		"tabletext":       deck(`<text:p>D</text:p>`, `<text:p>E</text:p>`),
		"bulletlevel":     deck(bulletsA, bulletsB),
		"transition":      fodp(page{style: "dpdissolve", body: textBox("2cm", "2cm", "12cm", "3cm", "<text:p>fade</text:p>")}),
		"redbg":           fodp(page{style: "dpred", body: ""}, page{style: "dpred", body: ""}),
		"bluebg":          fodp(page{style: "dpblue", body: ""}, page{style: "dpred", body: ""}),
		"picorig":         onePic("4cm", "4cm", "8cm", "6cm"),
		"picfull":         onePic("0cm", "0cm", "28cm", "15.75cm"),
		"picother": fodp(page{body: picture("0cm", "0cm", "28cm", "15.75cm", green) +
			textBox("1cm", "1cm", "5cm", "2cm", "<text:p>caption</text:p>")}),
	}
}

var (
	fixturesOnce sync.Once
	fixturesDir  string
	fixturesErr  error
	fixturesOut  []byte // soffice's output, when it failed
)

// needProgram fails in CI and skips elsewhere when name is missing.
func needProgram(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
}

// fixture returns the path of the pptx LibreOffice made from source name.
func fixture(t *testing.T, name string) string {
	t.Helper()
	needProgram(t, "soffice")
	fixturesOnce.Do(func() {
		fixturesDir, fixturesErr = os.MkdirTemp("", "slides-fixtures-")
		if fixturesErr != nil {
			return
		}
		var args []string
		for n, src := range sources() {
			p := filepath.Join(fixturesDir, n+".fodp")
			if fixturesErr = os.WriteFile(p, []byte(src), 0o644); fixturesErr != nil {
				return
			}
			args = append(args, p)
		}
		// A private profile: a LibreOffice already running under the
		// default one would take the job over, or refuse it.
		profile := "-env:UserInstallation=file://" + filepath.Join(fixturesDir, "profile")
		cmd := exec.Command("soffice", append([]string{profile, "--headless", "--convert-to", "pptx", "--outdir", fixturesDir}, args...)...)
		fixturesOut, fixturesErr = cmd.CombinedOutput()
	})
	if fixturesErr != nil {
		t.Fatalf("soffice: %v: %s", fixturesErr, fixturesOut)
	}
	p := filepath.Join(fixturesDir, name+".pptx")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixturesDir != "" {
		os.RemoveAll(fixturesDir)
	}
	os.Exit(code)
}

// rezip copies the pptx at src to a new file with some entries' content
// replaced (edit returns the new content; nil drops the entry).
func rezip(t *testing.T, src string, edit func(name string, data []byte) []byte) string {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		data = edit(f.Name, data)
		if data == nil {
			continue
		}
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "edited.pptx")
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// replaceIn edits one entry with string replacements.
func replaceIn(entry string, pairs ...string) func(string, []byte) []byte {
	return func(name string, data []byte) []byte {
		if name != entry {
			return data
		}
		s := string(data)
		for i := 0; i+1 < len(pairs); i += 2 {
			s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
		}
		return []byte(s)
	}
}
