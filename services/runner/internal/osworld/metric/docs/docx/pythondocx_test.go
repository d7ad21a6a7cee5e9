package docx

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
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

// pythonDocxDump prints python-docx's view of each .docx named on the
// command line as one JSON line, in modelJSON's shape; a property whose
// read raises is {"raise": name}.
const pythonDocxDump = `
import sys, json, hashlib
import docx

def g(f):
    try:
        return f()
    except Exception as e:
        return {"raise": type(e).__name__}

def run(r):
    f = r.font
    return {"text": g(lambda: r.text), "italic": g(lambda: f.italic), "strike": g(lambda: f.strike),
            "subscript": g(lambda: f.subscript), "size": g(lambda: None if f.size is None else int(f.size)),
            "name": g(lambda: f.name), "color": g(lambda: None if f.color.rgb is None else str(f.color.rgb)),
            "pagebreaks": len(r.element.xpath('.//w:br[@w:type="page"]'))}

def para(p):
    pf = p.paragraph_format
    return {"text": g(lambda: p.text), "runs": [run(r) for r in p.runs],
            "alignment": g(lambda: None if pf.alignment is None else pf.alignment.xml_value),
            "line_spacing": g(lambda: None if pf.line_spacing is None else float(pf.line_spacing)),
            "tabs": g(lambda: [[t.alignment.xml_value, int(t.position)] for t in pf.tab_stops])}

def table(t):
    tcs = [(tc, ri * 1000 + ci) for ri, tr in enumerate(t._tbl.tr_lst) for ci, tc in enumerate(tr.tc_lst)]
    where = lambda e: next(k for x, k in tcs if x is e)
    rows = [[{"span": g(lambda: tc.grid_span), "vmerge": g(lambda: tc.vMerge or None),
              "text": g(lambda: docx.table._Cell(tc, t).text)} for tc in tr.tc_lst] for tr in t._tbl.tr_lst]
    return {"columns": g(lambda: len(t.columns)), "rows": rows,
            "grid": g(lambda: [where(c._tc) for c in t._cells]),
            "rowcells": [g(lambda: [where(c._tc) for c in t.rows[i].cells]) for i in range(len(t._tbl.tr_lst))]}

def section(s):
    return {"page_width": g(lambda: None if s.page_width is None else int(s.page_width)),
            "left_margin": g(lambda: None if s.left_margin is None else int(s.left_margin)),
            "right_margin": g(lambda: None if s.right_margin is None else int(s.right_margin)),
            "footer": g(lambda: [p.text for p in s.footer.paragraphs])}

for path in sys.argv[1:]:
    try:
        d = docx.Document(path)
    except Exception as e:
        print(json.dumps({"open": type(e).__name__}))
        continue
    print(json.dumps({"paragraphs": g(lambda: [para(p) for p in d.paragraphs]),
        "tables": g(lambda: [table(t) for t in d.tables]),
        "sections": g(lambda: [section(s) for s in d.sections]),
        "images": g(lambda: [hashlib.sha256(r.target_part.blob).hexdigest()
                             for r in d.part.rels.values() if "image" in r.reltype])}))
`

// TestReadMatchesPythonDocx compares Read with python-docx itself on
// random documents made of the XML its readers treat apart: property
// values Python's int() and float() read or refuse, enumerations, comments
// inside text, spans and vertical merges. python-docx 1.x is not in
// Debian (it has 0.8), so the test runs only when PYTHON_DOCX names a
// python-docx 1.x source tree (its src directory, with lxml and
// typing_extensions installed, for python3 or OSWORLD_PYTHON):
// PYTHON_DOCX=.../python-docx/src go test -run ReadMatchesPythonDocx.
// It found the differences that
// TestValuesAsPythonDocx and TestRowCells pin.
func TestReadMatchesPythonDocx(t *testing.T) {
	src := os.Getenv("PYTHON_DOCX")
	if src == "" {
		t.Skip("PYTHON_DOCX does not name a python-docx 1.x source tree")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 13))
	var paths []string
	for i := range 1000 {
		p := filepath.Join(dir, fmt.Sprintf("r%04d.docx", i))
		body, footers := randomBody(rng)
		parts := wordParts(body, footerRels(len(footers)))
		for k, f := range footers {
			// Mostly a footer part as Word writes it; else one python-docx
			// reads as a plain Part (no content type) or with a root that
			// holds no paragraphs.
			root := "w:ftr"
			if rng.IntN(5) == 0 {
				root = []string{"w:hdr", "w:body", "w:p", "w:tbl"}[rng.IntN(4)]
			}
			name := fmt.Sprintf("footer%d.xml", k+1)
			parts["word/"+name] = `<?xml version="1.0" encoding="UTF-8"?><` + root + ` ` + wordDocNS + `>` + f + `</` + root + `>`
			if rng.IntN(5) != 0 {
				parts["[Content_Types].xml"] = strings.Replace(parts["[Content_Types].xml"], "</Types>",
					`<Override PartName="/word/`+name+`" ContentType="`+ctFooter+`"/></Types>`, 1)
			}
		}
		if err := os.WriteFile(p, pkgBytes(t, parts), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command(cmp.Or(os.Getenv("OSWORLD_PYTHON"), "python3"), append([]string{"-c", pythonDocxDump}, paths...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python-docx: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("python-docx answered %d documents of %d", len(lines), len(paths))
	}
	bad := 0
	for i, p := range paths {
		var want any
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]any{"open": "error"}
		if d, err := Open(p); err == nil {
			got = modelJSON(d)
		}
		var gotAny any
		b, _ := json.Marshal(got)
		if err := json.Unmarshal(b, &gotAny); err != nil {
			t.Fatal(err)
		}
		if diff := jsonDiff("", want, gotAny); diff != "" {
			t.Errorf("%s: %s", filepath.Base(p), diff)
			if bad++; bad == 5 {
				t.Fatal("too many differences")
			}
		}
	}
}

// jsonDiff names the first place where python-docx's view and ours
// differ: a raise matches a raise of any kind, and a vMerge of "" matches
// none (the model does not tell them apart; nothing reads it).
func jsonDiff(at string, want, got any) string {
	wm, wIsMap := want.(map[string]any)
	gm, gIsMap := got.(map[string]any)
	if wIsMap && gIsMap {
		if _, ok := wm["raise"]; ok {
			if _, ok := gm["raise"]; ok {
				return ""
			}
		}
		if _, ok := wm["open"]; ok {
			if _, ok := gm["open"]; ok {
				return ""
			}
		}
		for k := range wm {
			if d := jsonDiff(at+"."+k, wm[k], gm[k]); d != "" {
				return d
			}
		}
		return ""
	}
	wl, wIsList := want.([]any)
	gl, gIsList := got.([]any)
	if wIsList && gIsList && len(wl) == len(gl) {
		for i := range wl {
			if d := jsonDiff(fmt.Sprintf("%s[%d]", at, i), wl[i], gl[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if strings.HasSuffix(at, "vmerge") && (want == nil || want == "") && (got == nil || got == "") {
		return ""
	}
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return fmt.Sprintf("%s: python-docx %v, ours %v", at, want, got)
}

// modelJSON is the Document in pythonDocxDump's shape.
func modelJSON(d *Document) map[string]any {
	raised := map[string]any{"raise": "raises"}
	pick := func(v any, raises bool) any {
		if raises {
			return raised
		}
		return v
	}
	para := func(p Paragraph) map[string]any {
		runs := []any{}
		for _, r := range p.Runs {
			var col any
			if r.Color != nil {
				col = fmt.Sprintf("%02X%02X%02X", r.Color[0], r.Color[1], r.Color[2])
			}
			runs = append(runs, map[string]any{"text": r.Text, "name": r.FontName, "pagebreaks": r.PageBreaks,
				"italic":    pick(r.Italic, r.Raises.Has(PropItalic)),
				"strike":    pick(r.Strike, r.Raises.Has(PropStrike)),
				"subscript": pick(r.Subscript, r.Raises.Has(PropSubscript)),
				"size":      pick(r.Size, r.Raises.Has(PropSize)),
				"color":     pick(col, r.Raises.Has(PropColor))})
		}
		var align any
		if p.Alignment != "" {
			align = p.Alignment
		}
		tabs, tabsRaise := []any{}, false
		for _, ts := range p.TabStops {
			tabs = append(tabs, []any{ts.Alignment, ts.Position})
			tabsRaise = tabsRaise || ts.Raises != 0
		}
		return map[string]any{"text": p.Text, "runs": runs,
			"alignment":    pick(align, p.Raises.Has(PropAlignment)),
			"line_spacing": pick(p.LineSpacing, p.Raises.Has(PropLineSpacing)),
			"tabs":         pick(tabs, tabsRaise)}
	}
	where := func(tb *Table, c *Cell) int {
		for r := range tb.Rows {
			for k := range tb.Rows[r].Cells {
				if &tb.Rows[r].Cells[k] == c {
					return r*1000 + k
				}
			}
		}
		return -1
	}
	places := func(tb *Table, cells []*Cell, err error) any {
		if err != nil {
			return raised
		}
		out := []any{}
		for _, c := range cells {
			out = append(out, where(tb, c))
		}
		return out
	}
	paras := []any{}
	for _, p := range d.Paragraphs {
		paras = append(paras, para(p))
	}
	tables := []any{}
	for i := range d.Tables {
		tb := &d.Tables[i]
		rows, rowCells := []any{}, []any{}
		for r, row := range tb.Rows {
			cells := []any{}
			for _, c := range row.Cells {
				cells = append(cells, map[string]any{"span": pick(c.GridSpan, c.Raises.Has(PropGridSpan)), "vmerge": c.VMerge, "text": c.Text()})
			}
			rows = append(rows, cells)
			rc, err := tb.RowCells(r)
			rowCells = append(rowCells, places(tb, rc, err))
		}
		g, err := tb.Grid()
		tables = append(tables, map[string]any{"columns": pick(tb.Columns, tb.Raises.Has(PropColumns)),
			"rows": rows, "grid": places(tb, g, err), "rowcells": rowCells})
	}
	sections := []any{}
	for _, s := range d.Sections {
		footer := []any{}
		for _, p := range s.Footer {
			footer = append(footer, p.Text)
		}
		sections = append(sections, map[string]any{"footer": pick(footer, s.Raises.Has(PropFooter)),
			"page_width":   pick(s.PageWidth, s.Raises.Has(PropPageWidth)),
			"left_margin":  pick(s.LeftMargin, s.Raises.Has(PropLeftMargin)),
			"right_margin": pick(s.RightMargin, s.Raises.Has(PropRightMargin))})
	}
	images := []any{}
	for _, b := range d.Images {
		h := sha256.Sum256(b)
		images = append(images, hex.EncodeToString(h[:]))
	}
	return map[string]any{"paragraphs": paras, "tables": tables, "sections": sections, "images": images}
}

// Attribute values the readers treat apart.
var (
	randomNumbers = []string{"240", "360", "0", "12pt", "1.5", "-240", " 240", "+240", "1e3", "abc", "240.5", "241.5",
		"٢٤٠", "1_000", "inf", "nan", "0x10", "", "2.5cm", "1in", "10mm", "3pc", "2pi", "12 pt", "-1pt", "12px"}
	randomOnOff  = []string{"", "1", "0", "true", "false", "on", "off", "yes", "x", "True"}
	randomColors = []string{"FF0000", "auto", "ff0000", "F00", "GGGGGG", "", "0000001", " FF0000", "+FFFFF", "0x1234", "AUTO", "-1FFFF"}
	randomTexts  = []string{"a", "hello", " sp ", "", "x\ty", "é", "&amp;", "<![CDATA[cd]]>", "a<!-- c -->b", "a<?pi x?>b"}
)

// randomBody is a random w:body and the bodies of the footers it refers
// to (rIdF1...).
func randomBody(rng *rand.Rand) (string, []string) {
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	// attr writes name="value" unless value is "-" (absent).
	attr := func(name string, values ...string) string {
		v := values[rng.IntN(len(values))]
		if v == "-" {
			return ""
		}
		return fmt.Sprintf(` %s="%s"`, name, v)
	}
	with := func(p float64, s func() string) string {
		if rng.Float64() < p {
			return s()
		}
		return ""
	}
	run := func() string {
		var b strings.Builder
		b.WriteString("<w:r>")
		b.WriteString(with(0.7, func() string {
			return "<w:rPr>" +
				with(0.4, func() string { return "<w:i" + attr("w:val", append(randomOnOff, "-")...) + "/>" }) +
				with(0.4, func() string { return "<w:strike" + attr("w:val", append(randomOnOff, "-")...) + "/>" }) +
				with(0.3, func() string {
					return "<w:vertAlign" + attr("w:val", "-", "subscript", "superscript", "baseline", "bogus", "") + "/>"
				}) +
				with(0.4, func() string {
					return "<w:sz" + attr("w:val", "-", "24", "28", "-2", "abc", "24.5", " 24", "2_4", "٢٤", "12pt", "1in", "5mm", "1e2") + "/>"
				}) +
				with(0.4, func() string { return "<w:rFonts" + attr("w:ascii", "-", "Arial", "") + "/>" }) +
				with(0.4, func() string { return "<w:color" + attr("w:val", append(randomColors, "-")...) + "/>" }) +
				"</w:rPr>"
		}))
		for range rng.IntN(5) {
			switch k := rng.IntN(14); {
			case k < 5:
				b.WriteString("<w:t" + attr("xml:space", "-", "preserve") + ">" + pick(randomTexts) + "</w:t>")
			case k == 5:
				b.WriteString("<w:tab/>")
			case k == 6:
				b.WriteString("<w:ptab/>")
			case k == 7:
				b.WriteString("<w:br" + attr("w:type", "-", "textWrapping", "page", "column", "bogus") + "/>")
			case k == 8:
				b.WriteString("<w:cr/>")
			case k == 9:
				b.WriteString("<w:noBreakHyphen/>")
			case k == 10:
				b.WriteString("<w:delText>d</w:delText>")
			case k == 11:
				b.WriteString("<w:t>a<w:x/>b</w:t>")
			case k == 12:
				b.WriteString("<w:softHyphen/>")
			default:
				b.WriteString("<w:lastRenderedPageBreak/>")
			}
		}
		b.WriteString("</w:r>")
		return b.String()
	}
	para := func() string {
		var b strings.Builder
		b.WriteString("<w:p>")
		b.WriteString(with(0.6, func() string {
			s := "<w:pPr>" +
				with(0.5, func() string {
					return "<w:jc" + attr("w:val", "-", "left", "center", "both", "distribute", "start", "end", "bogus", "", "Center", "thaiDistribute") + "/>"
				}) +
				with(0.5, func() string {
					return "<w:spacing" + attr("w:line", append(randomNumbers, "-")...) + attr("w:lineRule", "-", "auto", "exact", "atLeast", "UNMAPPED", "bogus") + "/>"
				})
			if rng.Float64() < 0.4 {
				s += "<w:tabs>"
				for range rng.IntN(4) {
					s += "<w:tab" + attr("w:val", "-", "left", "center", "right", "decimal", "bar", "clear", "start", "num", "bogus") + attr("w:pos", append(randomNumbers, "-")...) + "/>"
				}
				s += "</w:tabs>"
			}
			return s + "</w:pPr>"
		}))
		for range rng.IntN(5) {
			switch k := rng.IntN(10); {
			case k < 6:
				b.WriteString(run())
			case k == 6:
				b.WriteString("<w:hyperlink>" + run() + "</w:hyperlink>")
			case k == 7:
				b.WriteString(`<w:fldSimple w:instr="PAGE">` + run() + "</w:fldSimple>")
			case k == 8:
				b.WriteString(`<w:ins w:id="1">` + run() + "</w:ins>")
			default:
				b.WriteString("<w:sdt><w:sdtContent>" + run() + "</w:sdtContent></w:sdt>")
			}
		}
		b.WriteString("</w:p>")
		return b.String()
	}
	table := func() string {
		var b strings.Builder
		b.WriteString("<w:tbl>")
		if rng.Float64() < 0.9 {
			b.WriteString("<w:tblGrid>" + strings.Repeat("<w:gridCol/>", rng.IntN(4)) + "</w:tblGrid>")
		}
		for range rng.IntN(4) {
			b.WriteString("<w:tr>")
			b.WriteString(with(0.3, func() string {
				return "<w:trPr><w:gridBefore" + attr("w:val", "-", "0", "1", "2", "-1", "x") + "/></w:trPr>"
			}))
			for range rng.IntN(4) {
				b.WriteString("<w:tc>")
				b.WriteString(with(0.6, func() string {
					return "<w:tcPr>" +
						with(0.5, func() string {
							return "<w:gridSpan" + attr("w:val", "-", "1", "2", "3", "0", "-1", "x", " 2", "2.0") + "/>"
						}) +
						with(0.5, func() string {
							return "<w:vMerge" + attr("w:val", "-", "-", "restart", "continue", "continue", "bogus", "") + "/>"
						}) + "</w:tcPr>"
				}))
				for range rng.IntN(3) {
					b.WriteString(para())
				}
				b.WriteString("</w:tc>")
			}
			b.WriteString("</w:tr>")
		}
		b.WriteString("</w:tbl>")
		return b.String()
	}
	footers := make([]string, rng.IntN(3))
	for i := range footers {
		for range rng.IntN(3) {
			footers[i] += para()
		}
	}
	sectPr := func() string {
		s := "<w:sectPr>"
		if len(footers) > 0 && rng.Float64() < 0.6 {
			s += fmt.Sprintf(`<w:footerReference%s r:id="rIdF%d"/>`, attr("w:type", "default", "even", "first"), 1+rng.IntN(len(footers)))
		}
		s += with(0.7, func() string {
			return "<w:pgSz" + attr("w:w", "-", "12240", "12240.5", "8.5in", " 12240", "-5", "abc", "1e4") + "/>"
		})
		s += with(0.7, func() string {
			return "<w:pgMar" + attr("w:left", append(randomNumbers, "-")...) + attr("w:right", append(randomNumbers, "-")...) + "/>"
		})
		return s + "</w:sectPr>"
	}
	var b strings.Builder
	for range rng.IntN(7) {
		switch x := rng.Float64(); {
		case x < 0.65:
			b.WriteString(para())
		case x < 0.9:
			b.WriteString(table())
		default:
			b.WriteString("<w:p><w:pPr>" + sectPr() + "</w:pPr></w:p>")
		}
	}
	if rng.Float64() < 0.8 {
		b.WriteString(sectPr())
	}
	return b.String(), footers
}

// footerRels relates the main part to footer1.xml ... footerN.xml.
func footerRels(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `<Relationship Id="rIdF%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footer" Target="footer%d.xml"/>`, i, i)
	}
	return b.String()
}
