package docx

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pythonOdfpyDump prints, for each .odt named on the command line, what
// check_highlighted_words and get_paragraph_texts_odt read through odfpy:
// each text:p's direct text and its direct spans' text, and whether a
// styled span names an automatic style with a #ffff00 background (or
// "raise" where odfpy raises on the way).
const pythonOdfpyDump = `
import sys, json
from odf.opendocument import load
from odf.text import P, Span

def paragraph_texts(doc):
    out = []
    for p in doc.getElementsByType(P):
        parts = []
        for n in p.childNodes:
            if n.nodeType == n.TEXT_NODE:
                parts.append(n.data)
            elif n.nodeType == n.ELEMENT_NODE and n.tagName == 'text:span':
                parts.extend(c.data for c in n.childNodes if c.nodeType == c.TEXT_NODE)
        out.append(''.join(parts))
    return out

def highlighted(doc):
    for span in doc.getElementsByType(Span):
        name = span.getAttribute('stylename')
        if not name:
            continue
        for style in doc.automaticstyles.childNodes:
            if style.getAttribute('name') == name:
                for prop in style.childNodes:
                    if prop.getAttribute('backgroundcolor') == '#ffff00':
                        return 1
    return 0

for path in sys.argv[1:]:
    try:
        doc = load(path)
    except Exception as e:
        print(json.dumps({"open": type(e).__name__}))
        continue
    row = {"paragraphs": paragraph_texts(doc)}
    try:
        row["highlighted"] = highlighted(doc)
    except Exception:
        row["highlighted"] = "raise"
    print(json.dumps(row))
`

// TestODTMatchesOdfpy compares ReadODT and Highlighted with odfpy
// (Debian's python3-odf, OSWorld's reader of .odt) on random documents
// made of what the readers treat apart: spans with and without style
// names, duplicated style names (odfpy renames them "M"+name), automatic
// styles with whitespace between them and children the schema gives no
// background colour (odfpy raises reading those), comments, notes and
// links. Without python3-odf the test fails in CI and is skipped
// elsewhere.
func TestODTMatchesOdfpy(t *testing.T) {
	// Debian's python3-odf is for Debian's python3, which may not be the
	// first on PATH.
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import odf.opendocument").Run(); err != nil {
		const msg = "no /usr/bin/python3 with odfpy (python3-odf)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(17, 19))
	var paths []string
	for i := range 600 {
		p := filepath.Join(dir, fmt.Sprintf("o%04d.odt", i))
		if err := os.WriteFile(p, pkgBytes(t, randomODT(rng)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(python, append([]string{"-c", pythonOdfpyDump}, paths...)...).Output()
	if err != nil {
		t.Fatalf("python3 odfpy: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("odfpy answered %d documents of %d", len(lines), len(paths))
	}
	bad, raised, lit := 0, 0, 0
	for i, p := range paths {
		var want struct {
			Open        string   `json:"open"`
			Paragraphs  []string `json:"paragraphs"`
			Highlighted any      `json:"highlighted"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		d, err := OpenODT(p)
		if (err != nil) != (want.Open != "") {
			t.Errorf("%s: OpenODT error %v, odfpy's %q", filepath.Base(p), err, want.Open)
			bad++
			continue
		}
		if err != nil {
			continue
		}
		var got any
		switch h, err := d.Highlighted("#ffff00"); {
		case err != nil:
			got = "raise"
			raised++
		case h:
			got = 1.0
			lit++
		default:
			got = 0.0
		}
		if want.Paragraphs == nil {
			want.Paragraphs = []string{}
		}
		paras := d.Paragraphs
		if paras == nil {
			paras = []string{}
		}
		if !reflect.DeepEqual(paras, want.Paragraphs) || got != want.Highlighted {
			t.Errorf("%s: paragraphs %q, highlighted %v; odfpy's %q, %v", filepath.Base(p), paras, got, want.Paragraphs, want.Highlighted)
			bad++
		}
		if bad >= 5 {
			t.Fatal("too many differences")
		}
	}
	// The documents must reach each outcome, or the comparison proves
	// little.
	if raised == 0 || lit == 0 || raised+lit == len(paths) {
		t.Errorf("outcomes: %d raise, %d highlighted of %d documents", raised, lit, len(paths))
	}
}

// randomODT is a random .odt package: a manifest, content.xml and
// styles.xml.
func randomODT(rng *rand.Rand) map[string]string {
	const ns = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
		`xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" ` +
		`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"`
	pick := func(l ...string) string { return l[rng.IntN(len(l))] }
	space := func() string { return pick("", "", "", " ", "\n  ") }
	span := func() string {
		attr := pick("", ` text:style-name="T1"`, ` text:style-name="T2"`, ` text:style-name="T3"`, ` text:style-name=""`)
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pick("w", "x y", "<text:s/>", "<text:tab/>", "<text:span>in</text:span>", "<!-- c -->", "&amp;", "<text:a>l</text:a>"))
		}
		return "<text:span" + attr + ">" + b.String() + "</text:span>"
	}
	para := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			if rng.IntN(5) < 2 {
				b.WriteString(span())
				continue
			}
			b.WriteString(pick("a", "b c", " ", "<text:s/>", "<text:line-break/>", "<text:a>link</text:a>", "<!--c-->",
				"<text:note><text:note-body><text:p>n</text:p></text:note-body></text:note>"))
		}
		tag := pick("text:p", "text:h", `text:p text:style-name="T1"`)
		return "<" + tag + ">" + b.String() + "</" + strings.Fields(tag)[0] + ">"
	}
	autoStyles := func() string {
		var b strings.Builder
		b.WriteString("<office:automatic-styles>" + space())
		for range rng.IntN(5) {
			var props strings.Builder
			for range rng.IntN(4) {
				props.WriteString(pick(`<style:text-properties fo:background-color="#ffff00"/>`, `<style:text-properties fo:background-color="transparent"/>`,
					`<style:text-properties/>`, `<style:paragraph-properties fo:background-color="#ffff00"/>`,
					`<style:table-column-properties style:column-width="1in"/>`, `<style:unknown-properties fo:background-color="#ffff00"/>`, space()))
			}
			name := pick("T1", "T2", "T3", "P1")
			b.WriteString(fmt.Sprintf(pick(`<style:style style:name="%s" style:family="text">%s</style:style>`, `<text:list-style style:name="%s">%s</text:list-style>`,
				`<style:style style:name="%s">%s</style:style>`, `<table:table table:name="%s">%s</table:table>`), name, props.String()) + space())
		}
		return b.String() + "</office:automatic-styles>"
	}
	var body strings.Builder
	for range rng.IntN(5) {
		body.WriteString(para() + space())
	}
	content := `<?xml version="1.0" encoding="UTF-8"?><office:document-content ` + ns + `>` + space()
	if rng.IntN(10) < 9 {
		content += autoStyles()
	}
	content += `<office:body><office:text>` + body.String() + `</office:text></office:body></office:document-content>`
	styles := `<?xml version="1.0" encoding="UTF-8"?><office:document-styles ` + ns + `>`
	if rng.IntN(2) == 0 {
		styles += `<office:styles><style:style style:name="` + pick("T1", "T2", "X") + `"/></office:styles>`
	}
	if rng.IntN(2) == 0 {
		styles += autoStyles()
	}
	footer := ""
	if rng.IntN(2) == 0 {
		footer = para()
	}
	styles += `<office:master-styles><style:master-page style:name="S"><style:footer>` + footer + `</style:footer></style:master-page></office:master-styles></office:document-styles>`
	return map[string]string{
		"mimetype": "application/vnd.oasis.opendocument.text",
		"META-INF/manifest.xml": `<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">` +
			`<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>` +
			`<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>` +
			`<manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/></manifest:manifest>`,
		"content.xml": content,
		"styles.xml":  styles,
	}
}
