package docs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestZerosSayWhy: where a document does not open or python-docx raises,
// the metric scores 0 as OSWorld's does and notes why; a 0 for a wrong
// value notes nothing.
func TestZerosSayWhy(t *testing.T) {
	dir := t.TempDir()
	run := func(rpr, text string) string {
		return `<w:r><w:rPr>` + rpr + `</w:rPr><w:t>` + text + `</w:t></w:r>`
	}
	for name, body := range map[string]string{
		"italic-yes.docx":    `<w:p>` + run(`<w:i w:val="yes"/>`, "a") + `</w:p>`,
		"spacing-bogus.docx": `<w:p><w:pPr><w:spacing w:lineRule="bogus"/></w:pPr></w:p>`,
		"spacing-240.docx":   `<w:p><w:pPr><w:spacing w:line="240"/></w:pPr></w:p>`,
		"table-nogrid.docx":  `<w:tbl><w:tr><w:tc><w:p>` + run("", "a") + `</w:p></w:tc></w:tr></w:tbl>`,
		"merge-on-top.docx":  `<w:tbl><w:tblGrid><w:gridCol/></w:tblGrid><w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p>` + run("", "apple") + `</w:p></w:tc></w:tr></w:tbl>`,
		"hello.docx":         `<w:p>` + run("", "hello") + `</w:p>`,
		"goodbye.docx":       `<w:p>` + run("", "goodbye") + `</w:p>`,
	} {
		writeWordXML(t, dir, name, body)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.docx"), []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, metric     string
		result, expected string
		wantNote         string // "" for no note
	}{
		{"a run's italic raises", "check_italic_font_size_14", "italic-yes.docx", "italic-yes.docx", "python-docx raises reading a run's italic"},
		{"line spacing raises", "compare_line_spacing", "spacing-bogus.docx", "spacing-240.docx", "python-docx raises reading paragraph 1's line spacing"},
		{"a table without a grid", "compare_docx_tables", "table-nogrid.docx", "table-nogrid.docx", "python-docx raises reading table 1's columns"},
		{"a merge with no cell above", "evaluate_colored_words_in_tables", "merge-on-top.docx", "merge-on-top.docx", "python-docx raises reading row 1's cells"},
		{"a file that is no .docx", "compare_docx_files", "broken.docx", "hello.docx", "broken.docx does not open as a .docx: open zip: zip: not a valid zip file"},
		{"a .docx against an .odt", "compare_docx_files", "hello.docx", "hello.odt", "hello.docx and hello.odt are not both .docx or both .odt"},
		{"a wrong text", "compare_docx_files", "goodbye.docx", "hello.docx", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, notes := metric.WithNotes(context.Background())
			res, exp := filepath.Join(dir, tt.result), filepath.Join(dir, tt.expected)
			got, err := Metrics()[tt.metric].Fn(ctx, res, exp, true, nil)
			if err != nil || got != 0 {
				t.Fatalf("%s = %v, %v; want 0", tt.metric, got, err)
			}
			n := notes.List()
			switch {
			case tt.wantNote == "" && len(n) > 0:
				t.Errorf("notes = %q; want none", n)
			case tt.wantNote != "" && (len(n) != 1 || !strings.Contains(n[0], tt.wantNote)):
				t.Errorf("notes = %q; want one containing %q", n, tt.wantNote)
			}
		})
	}
}

// TestIgnoreCaseLowersAsPython: compare_docx_files' ignore_case lowers
// with Python's str.lower(), whose final sigma and İ differ from
// strings.ToLower (found by TestMetricsMatchDocsPy).
func TestIgnoreCaseLowersAsPython(t *testing.T) {
	dir := t.TempDir()
	p := func(text string) string { return `<w:p><w:r><w:t>` + text + `</w:t></w:r></w:p>` }
	// Σ at a word's end lowers to ς (U+03C2), elsewhere to σ (U+03C3).
	writeWordXML(t, dir, "upper.docx", p("ΟΔΟΣ İzmir"))
	writeWordXML(t, dir, "final.docx", p("οδο\u03c2 i\u0307zmir"))
	writeWordXML(t, dir, "lower.docx", p("οδο\u03c3 izmir"))
	for _, tt := range []struct {
		expected string
		want     float64
	}{{"final.docx", 1}, {"lower.docx", 0}} {
		got, err := Metrics()["compare_docx_files"].Fn(context.Background(), filepath.Join(dir, "upper.docx"),
			filepath.Join(dir, tt.expected), true, map[string]any{"ignore_case": true})
		if err != nil || got != tt.want {
			t.Errorf("compare_docx_files(upper.docx, %s, ignore_case) = %v, %v; want %v", tt.expected, got, err, tt.want)
		}
	}
}
