package docs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The fixtures are flat ODF documents that LibreOffice converts, in one
// run per format, to the .docx and .odt files the metrics read: the same
// producer as the task files' gold documents.

// fodt is a flat ODF text document with the given automatic styles,
// footer paragraph content ("" for none) and body.
func fodt(styles, footer, body string) string {
	master := `<style:master-page style:name="Standard" style:page-layout-name="pm1"/>`
	if footer != "" {
		master = `<style:master-page style:name="Standard" style:page-layout-name="pm1"><style:footer><text:p>` + footer + `</text:p></style:footer></style:master-page>`
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
<office:font-face-decls><style:font-face style:name="Times New Roman" svg:font-family="'Times New Roman'"/><style:font-face style:name="DejaVu Sans Mono" svg:font-family="'DejaVu Sans Mono'" style:font-pitch="fixed"/></office:font-face-decls>
<office:automatic-styles>` + styles + `<style:page-layout style:name="pm1"><style:page-layout-properties fo:page-width="21cm" fo:page-height="29.7cm" fo:margin-left="2cm" fo:margin-right="2cm"/></style:page-layout></office:automatic-styles>
<office:master-styles>` + master + `</office:master-styles>
<office:body><office:text>` + body + `</office:text></office:body></office:document>`
}

// paras is one text:p per line, with an optional paragraph style.
func paras(style string, lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		if style != "" {
			fmt.Fprintf(&b, `<text:p text:style-name="%s">%s</text:p>`, style, l)
		} else {
			fmt.Fprintf(&b, `<text:p>%s</text:p>`, l)
		}
	}
	return b.String()
}

// span wraps text in a text style.
func span(style, text string) string {
	return `<text:span text:style-name="` + style + `">` + text + `</text:span>`
}

// table is a table of one text:p per cell.
func table(rows ...[]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<table:table><table:table-column table:number-columns-repeated="%d"/>`, len(rows[0]))
	for _, r := range rows {
		b.WriteString(`<table:table-row>`)
		for _, c := range r {
			fmt.Fprintf(&b, `<table:table-cell><text:p>%s</text:p></table:table-cell>`, c)
		}
		b.WriteString(`</table:table-row>`)
	}
	b.WriteString(`</table:table>`)
	return b.String()
}

// pngImage is a w×h PNG of one colour.
func pngImage(c color.Color, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}

// frame embeds a PNG image in a paragraph.
func frame(name string, png []byte) string {
	return `<text:p><draw:frame draw:name="` + name + `" text:anchor-type="as-char" svg:width="1cm" svg:height="1cm"><draw:image><office:binary-data>` +
		base64.StdEncoding.EncodeToString(png) + `</office:binary-data></draw:image></draw:frame></text:p>`
}

const fixtureStyles = `<style:style style:name="PC" style:family="paragraph"><style:paragraph-properties fo:text-align="center"/></style:style>` +
	`<style:style style:name="L15" style:family="paragraph"><style:paragraph-properties fo:line-height="150%"/></style:style>` +
	`<style:style style:name="L20" style:family="paragraph"><style:paragraph-properties fo:line-height="200%"/></style:style>` +
	`<style:style style:name="BRK" style:family="paragraph"><style:paragraph-properties fo:break-before="page"/></style:style>` +
	`<style:style style:name="TR10" style:family="paragraph"><style:paragraph-properties><style:tab-stops><style:tab-stop style:position="10cm" style:type="right"/></style:tab-stops></style:paragraph-properties></style:style>` +
	`<style:style style:name="TR12" style:family="paragraph"><style:paragraph-properties><style:tab-stops><style:tab-stop style:position="12cm" style:type="right"/></style:tab-stops></style:paragraph-properties></style:style>` +
	`<style:style style:name="TC10" style:family="paragraph"><style:paragraph-properties><style:tab-stops><style:tab-stop style:position="10cm" style:type="center"/></style:tab-stops></style:paragraph-properties></style:style>` +
	`<style:style style:name="B" style:family="text"><style:text-properties fo:font-weight="bold"/></style:style>` +
	`<style:style style:name="I14" style:family="text"><style:text-properties fo:font-style="italic" fo:font-size="14pt"/></style:style>` +
	`<style:style style:name="I12" style:family="text"><style:text-properties fo:font-style="italic" fo:font-size="12pt"/></style:style>` +
	`<style:style style:name="S" style:family="text"><style:text-properties style:text-line-through-style="solid"/></style:style>` +
	`<style:style style:name="SUB" style:family="text"><style:text-properties style:text-position="sub 58%"/></style:style>` +
	`<style:style style:name="TNR" style:family="text"><style:text-properties style:font-name="Times New Roman"/></style:style>` +
	`<style:style style:name="RED" style:family="text"><style:text-properties fo:color="#ff0000"/></style:style>` +
	`<style:style style:name="NEARRED" style:family="text"><style:text-properties fo:color="#fa0000"/></style:style>` +
	`<style:style style:name="DARKRED" style:family="text"><style:text-properties fo:color="#b40000"/></style:style>` +
	`<style:style style:name="BLUE" style:family="text"><style:text-properties fo:color="#0000ff"/></style:style>` +
	`<style:style style:name="HL" style:family="text"><style:text-properties fo:background-color="#ffff00"/></style:style>` +
	`<style:style style:name="BIG" style:family="paragraph"><style:text-properties fo:font-size="48pt"/></style:style>` +
	`<style:style style:name="TERM" style:family="paragraph"><style:paragraph-properties fo:background-color="#300a24"/><style:text-properties fo:font-size="11pt" fo:color="#ffffff" style:font-name="DejaVu Sans Mono"/></style:style>`

// fixtureSources are the documents of the metric tests, by base name.
func fixtureSources() map[string]string {
	doc := func(body string) string { return fodt(fixtureStyles, "", body) }
	red, blue := func(s string) string { return span("RED", s) }, func(s string) string { return span("BLUE", s) }
	return map[string]string{
		"text1":       doc(paras("", "Hello world", "Second line here")),
		"text1fmt":    doc(paras("", span("B", "Hello")+" world", "Second "+span("B", "line")+" here")),
		"text1spaces": doc(paras("", "Hello <text:s text:c=\"2\"/>world", "Second line here")),
		"text1upper":  doc(paras("", "HELLO WORLD", "SECOND LINE HERE")),
		"text1rev":    doc(paras("", "Second line here", "Hello world")),
		"text1empty":  doc(paras("", "Hello world", "", "Second line here")),
		"text1diff":   doc(paras("", "Hello world", "Second line there")),
		"centered":    doc(paras("PC", "Hello world") + paras("", "Second line here")),
		"ls15":        doc(paras("L15", "Hello world", "Second line here")),
		"ls15b":       doc(paras("L15", span("B", "Hello")+" world", "Second line here")),
		"ls20":        doc(paras("L20", "Hello world", "Second line here")),
		"italic14":    doc(paras("", "Hello "+span("I14", "world"), "Second line here")),
		"italic12":    doc(paras("", "Hello "+span("I12", "world"), "Second line here")),
		"strikelast":  doc(paras("", "Hello world", span("S", "Second line here"))),
		"strikepart":  doc(paras("", "Hello world", span("S", "Second")+" line here")),
		"tnr":         doc(paras("", span("TNR", "Hello world"), span("TNR", "Second line here"))),
		"tnrpart":     doc(paras("", span("TNR", "Hello world"), "Second line here")),
		"h2o":         doc(paras("", "H"+span("SUB", "2")+"O is water")),
		"h2oplain":    doc(paras("", "H2O is water")),
		"breaks2":     doc(paras("", "One") + paras("BRK", "Two", "Three")),
		"footer":      fodt(fixtureStyles, `Page <text:page-number text:select-page="current">1</text:page-number>`, paras("", "Hello world")),
		"footertext":  fodt(fixtureStyles, `Company`, paras("", "Hello world")),
		"tableA":      doc(table([]string{"a", "b"}, []string{"c", "d"})),
		"tableA2":     doc(table([]string{span("B", "a"), "b"}, []string{"c", " d "})),
		"tableB":      doc(table([]string{"a", "b"}, []string{"c", "X"})),
		"tableC":      doc(table([]string{"a", "b", "e"}, []string{"c", "d", "f"})),
		"colors":      doc(table([]string{red("apple"), blue("banana")}, []string{red("orange"), blue("kiwi")})),
		"colorsnear":  doc(table([]string{span("NEARRED", "apple"), blue("banana")}, []string{red("orange"), blue("kiwi")})),
		"colorsfar":   doc(table([]string{span("DARKRED", "apple"), blue("banana")}, []string{red("orange"), blue("kiwi")})),
		"colorswrong": doc(table([]string{blue("apple"), blue("banana")}, []string{red("orange"), blue("kiwi")})),
		"colorsnone":  doc(table([]string{"apple", "banana"}, []string{"orange", "kiwi"})),
		"img1":        doc(paras("", "Picture") + frame("i1", pngImage(color.RGBA{255, 0, 0, 255}, 4, 4))),
		"img1b":       doc(paras("", "Another picture") + frame("i1", pngImage(color.RGBA{255, 0, 0, 255}, 4, 4))),
		"img2":        doc(paras("", "Picture") + frame("i1", pngImage(color.RGBA{0, 0, 255, 255}, 4, 4))),
		"refs1":       doc(paras("", "Intro", "References", "A. Author. Title one. 2020.", "", "B. Author. Title two. 2021.")),
		"refs2":       doc(paras("", "Intro", "References", "A. Author. Title one. 2020.", "B. Author. Title 2. 2021.")),
		"refsnone":    doc(paras("", "Intro", "Nothing cited")),
		"trainInit":   doc(paras("", "Train records", "08:00:00, T1, S1, 1", "08:05:00, T2, S2, 2", "08:00:00, T1, S1, 1", "08:10:00, T3, S1, 3")),
		"trainGold":   doc(paras("", "Train records", "08:00:00, T1, S1, 1", "08:05:00, T2, S2, 2", "08:10:00, T3, S1, 3")),
		"trainGood":   doc(paras("", "Train records", "", "08:00:00, T1, S1, 1", "08:05:00, T2, S2, 2", "08:10:00, T3, S1, 3")),
		"trainNew":    doc(paras("", "Train records", "08:00:00, T1, S1, 1", "08:05:00, T2, S2, 2", "08:10:00, T3, S9, 3")),
		"trainShort":  doc(paras("", "Train records", "08:00:00, T1, S1, 1", "08:05:00, T2, S2, 2")),
		"tabsA":       doc(paras("TR10", "one two three<text:tab/>value", "four five six<text:tab/>other")),
		"tabsA2":      doc(paras("TR10", "one two three<text:tab/>value", "four five six<text:tab/>other")),
		"tabsB":       doc(paras("TR12", "one two three<text:tab/>value", "four five six<text:tab/>other")),
		"tabsC":       doc(paras("TC10", "one two three<text:tab/>value", "four five six<text:tab/>other")),
		"highlight":   doc(paras("", "Call "+span("HL", "now")+" please", "Second line")),
		"plain":       doc(paras("", "Call now please", "Second line")),
		"ocr":         doc(paras("BIG", "user@host:~$ ls -la")),
		// A terminal's small light-on-dark text, as in the task's screenshot.
		"ocrterm": doc(paras("TERM", "user@user-virtual-machine:~$ ls",
			"Desktop  Documents  Downloads  Music  Pictures  Public  snap  Templates  Videos", "user@user-virtual-machine:~$ ")),
	}
}

// odtFixtures are the sources also converted to .odt.
var odtFixtures = []string{"text1", "text1fmt", "text1diff", "highlight", "plain"}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

// fixtures converts the sources once per test binary and returns the
// directory holding <name>.docx, <name>.odt, ocr.png, ocrterm.png and the profile's
// registrymodifications.xcu.
func fixtures(t *testing.T) string {
	t.Helper()
	bin := needProgram(t, "soffice")
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = buildFixtures(bin)
	})
	if fixtureErr != nil {
		t.Fatalf("build fixtures: %v", fixtureErr)
	}
	return fixtureDir
}

func buildFixtures(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "docs-fixtures")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	var all, odt []string
	for name, body := range fixtureSources() {
		p := filepath.Join(src, name+".fodt")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
		all = append(all, p)
	}
	for _, name := range odtFixtures {
		odt = append(odt, filepath.Join(src, name+".fodt"))
	}
	profile := "-env:UserInstallation=file://" + filepath.Join(dir, "profile")
	run := func(format string, files []string) error {
		args := append([]string{profile, "--headless", "--convert-to", format, "--outdir", dir}, files...)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("soffice --convert-to %s: %v\n%s", format, err, out)
		}
		return nil
	}
	if err := run("docx", all); err != nil {
		return "", err
	}
	if err := run("odt", odt); err != nil {
		return "", err
	}
	if err := run("png", []string{filepath.Join(src, "ocr.fodt"), filepath.Join(src, "ocrterm.fodt")}); err != nil {
		return "", err
	}
	return dir, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// needProgram returns an external program's path; a test needing it
// fails in CI when it is missing and skips elsewhere.
func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}
