package docs

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"
)

// writeWordXML writes dir/name, a .docx whose w:body is body, as XML no
// word processor writes but a script can.
func writeWordXML(t *testing.T, dir, name, body string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, part := range [][2]string{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			body + `</w:body></w:document>`},
	} {
		w, err := zw.Create(part[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(part[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsFailWherePythonDocxRaises: where python-docx raises on a
// property a metric reads, OSWorld's metric fails and the task scores 0,
// even when both documents hold the same unreadable value. Each case's
// score is what OSWorld's docs.py gave with python-docx 1.2.0.
func TestMetricsFailWherePythonDocxRaises(t *testing.T) {
	dir := t.TempDir()
	run := func(rpr, text string) string {
		return `<w:r><w:rPr>` + rpr + `</w:rPr><w:t>` + text + `</w:t></w:r>`
	}
	tc := func(props, rpr, text string) string {
		return `<w:tc><w:tcPr>` + props + `</w:tcPr><w:p>` + run(rpr, text) + `</w:p></w:tc>`
	}
	grid := `<w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid>`
	red, green := `<w:color w:val="FF0000"/>`, `<w:color w:val="00FF00"/>`
	docs := map[string]string{
		"italic-yes.docx":       `<w:p>` + run(`<w:i w:val="yes"/>`, "a") + `</w:p>`,
		"italic-14.docx":        `<w:p>` + run(`<w:i w:val="on"/><w:sz w:val="2_8"/>`, "a") + `</w:p>`,
		"spacing-bogus.docx":    `<w:p><w:pPr><w:spacing w:lineRule="bogus"/></w:pPr></w:p>`,
		"spacing-240.5.docx":    `<w:p><w:pPr><w:spacing w:line="240.5"/></w:pPr></w:p>`,
		"spacing-240.docx":      `<w:p><w:pPr><w:spacing w:line="240"/></w:pPr></w:p>`,
		"table-nogrid.docx":     `<w:tbl><w:tr>` + tc("", "", "a") + `</w:tr></w:tbl>`,
		"table-grid.docx":       `<w:tbl>` + grid + `<w:tr>` + tc("", "", "a") + tc("", "", "b") + `</w:tr></w:tbl>`,
		"tabs-bogus.docx":       `<w:p><w:pPr><w:tabs><w:tab w:val="bogus" w:pos="720"/></w:tabs></w:pPr>` + run("", "x") + `</w:p><w:sectPr><w:pgSz w:w="12240"/><w:pgMar w:left="1440" w:right="1440"/></w:sectPr>`,
		"tabs-clear-nopos.docx": `<w:p><w:pPr><w:tabs><w:tab w:val="clear"/></w:tabs></w:pPr>` + run("", "x") + `</w:p><w:sectPr><w:pgSz w:w="12240"/><w:pgMar w:left="1440" w:right="1440"/></w:sectPr>`,
		"sub-raises.docx":       `<w:p>` + run(`<w:vertAlign/>`, "a") + run(`<w:vertAlign w:val="subscript"/>`, "b") + `</w:p>`,
		"sub-false-then.docx":   `<w:p>` + run(`<w:vertAlign w:val="baseline"/>`, "a") + run(`<w:vertAlign w:val="subscript"/>`, "b") + `</w:p>`,
		// A cell spanning zero columns is not in row.cells, so its wrong
		// colour is never read.
		"colors-span0.docx": `<w:tbl>` + grid + `<w:tr>` + tc("", red, "apple") + tc(`<w:gridSpan w:val="0"/>`, green, "apple") + `</w:tr></w:tbl>`,
		// A continuation in the first row has no cell above: row.cells raises.
		"colors-merge-top.docx": `<w:tbl>` + grid + `<w:tr>` + tc(`<w:vMerge/>`, red, "apple") + `</w:tr></w:tbl>`,
		// A continuation reads the cell above (red), not its own (green).
		"colors-merge.docx": `<w:tbl>` + grid + `<w:tr>` + tc(`<w:vMerge w:val="restart"/>`, red, "apple") + `</w:tr><w:tr>` + tc(`<w:vMerge/>`, green, "apple") + `</w:tr></w:tbl>`,
	}
	for name, body := range docs {
		writeWordXML(t, dir, name, body)
	}
	runMetricCases(t, dir, []metricCase{
		{"italic value python-docx refuses", "check_italic_font_size_14", "@italic-yes.docx", "@italic-yes.docx", nil, 0, false},
		{"size read by int()", "check_italic_font_size_14", "@italic-14.docx", "@italic-14.docx", nil, 1, false},
		{"line rule python-docx refuses on both sides", "compare_line_spacing", "@spacing-bogus.docx", "@spacing-bogus.docx", nil, 0, false},
		{"line rounded to even twips", "compare_line_spacing", "@spacing-240.5.docx", "@spacing-240.docx", nil, 1, false},
		{"tables without a grid on both sides", "compare_docx_tables", "@table-nogrid.docx", "@table-nogrid.docx", nil, 0, false},
		{"tables with a grid", "compare_docx_tables", "@table-grid.docx", "@table-grid.docx", nil, 1, false},
		{"tab alignment python-docx refuses", "check_tabstops", "@tabs-bogus.docx", "@tabs-bogus.docx", nil, 0, false},
		{"a clear tab's position is never read", "check_tabstops", "@tabs-clear-nopos.docx", "@tabs-clear-nopos.docx", nil, 1, false},
		{"first run's subscript raises", "compare_subscript_contains", "@sub-raises.docx", "@sub-raises.docx", nil, 0, false},
		{"second document's raise not read after a False", "compare_subscript_contains", "@sub-false-then.docx", "@sub-raises.docx", nil, 1, false},
		{"cell spanning no column", "evaluate_colored_words_in_tables", "@colors-span0.docx", "@colors-span0.docx", nil, 1, false},
		{"continuation in the first row", "evaluate_colored_words_in_tables", "@colors-merge-top.docx", "@colors-merge-top.docx", nil, 0, false},
		{"continuation reads the cell above", "evaluate_colored_words_in_tables", "@colors-merge.docx", "@colors-merge.docx", nil, 1, false},
	})
}
