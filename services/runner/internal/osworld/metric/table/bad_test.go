package table

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/xuri/excelize/v2"
)

// allRules exercises every rule kind at once.
var allRules = rules(
	map[string]any{"type": "sheet_name"},
	map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"},
	map[string]any{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"},
	map[string]any{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
		"rules": []any{map[string]any{"range": []any{"A1:B3"}, "type": "fuzzy_match"}}},
	map[string]any{"type": "check_cell", "sheet_idx": 0.0, "coordinate": "A1",
		"props": map[string]any{"value": map[string]any{"method": "eq", "ref": "Region"}, "bgcolor": map[string]any{"method": "eq", "ref": "00000000"}}},
	map[string]any{"type": "freeze", "sheet_idx0": 0.0, "sheet_idx1": "EI0"},
	map[string]any{"type": "zoom", "sheet_idx": 0.0, "method": "le", "ref": 100.0},
	map[string]any{"type": "row_props", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"hidden"}},
	map[string]any{"type": "style", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"bgcolor", "font_bold"}},
	map[string]any{"type": "chart", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "chart_props": []any{"type"}},
	map[string]any{"type": "pivot_table", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "pivot_props": []any{"row_fields"}},
	map[string]any{"type": "col_props", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"width"}},
	map[string]any{"type": "filter", "sheet_idx0": 0.0, "sheet_idx1": "EI0"},
	map[string]any{"type": "sparkline", "sheet_idx0": 0.0, "sheet_idx1": "EI0"},
)

// zipWith writes a zip of the given parts; a part named in raw is stored
// as already-deflated bytes with the declared uncompressed size.
func zipWith(t *testing.T, parts map[string]string, raw map[string]struct {
	data []byte
	size uint64
}) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		must(t, err)
		_, err = w.Write([]byte(body))
		must(t, err)
	}
	for name, r := range raw {
		w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate,
			CompressedSize64: uint64(len(r.data)), UncompressedSize64: r.size})
		must(t, err)
		_, err = w.Write(r.data)
		must(t, err)
	}
	must(t, zw.Close())
	return buf.Bytes()
}

// deflated compresses n zero bytes.
func deflated(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := flate.NewWriter(&buf, flate.BestCompression)
	must(t, err)
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		_, err := fw.Write(chunk[:k])
		must(t, err)
		n -= k
	}
	must(t, fw.Close())
	return buf.Bytes()
}

const minimalWorkbook = `<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`
const minimalRels = `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`

func TestBadResultsScoreZero(t *testing.T) {
	dir := t.TempDir()
	good := book(t, "good", nil)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, b, 0o644))
		return p
	}
	goodBytes, err := os.ReadFile(good)
	must(t, err)
	sheetWith := func(body string) []byte {
		return zipWith(t, map[string]string{"xl/workbook.xml": minimalWorkbook, "xl/_rels/workbook.xml.rels": minimalRels,
			"xl/worksheets/sheet1.xml": `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` + body + `</sheetData></worksheet>`}, nil)
	}
	bomb := deflated(t, 8<<20)
	fifo := filepath.Join(dir, "fifo.xlsx")
	must(t, syscall.Mkfifo(fifo, 0o644))
	tests := []struct {
		name   string
		result any
	}{
		{"no result", nil},
		{"missing file", filepath.Join(dir, "absent.xlsx")},
		{"directory", dir},
		{"fifo", fifo},
		{"not a zip", write("text.xlsx", []byte("Region,Sales\nEast,10\n"))},
		{"truncated", write("truncated.xlsx", goodBytes[:len(goodBytes)/2])},
		{"empty zip", write("empty.xlsx", zipWith(t, nil, nil))},
		{"declared bomb", write("bomb.xlsx", zipWith(t, map[string]string{"xl/workbook.xml": minimalWorkbook, "xl/_rels/workbook.xml.rels": minimalRels},
			map[string]struct {
				data []byte
				size uint64
			}{"xl/worksheets/sheet1.xml": {bomb, 1 << 40}}))},
		{"lying size", write("liar.xlsx", zipWith(t, map[string]string{"xl/workbook.xml": minimalWorkbook, "xl/_rels/workbook.xml.rels": minimalRels},
			map[string]struct {
				data []byte
				size uint64
			}{"xl/worksheets/sheet1.xml": {bomb, 1000}}))},
		{"bad shared string", write("shared.xlsx", sheetWith(`<row r="1"><c r="A1" t="s"><v>7</v></c></row>`))},
		{"bad number", write("number.xlsx", sheetWith(`<row r="1"><c r="A1"><v>one</v></c></row>`))},
		{"bad reference", write("ref.xlsx", sheetWith(`<row r="1"><c r="1A"><v>1</v></c></row>`))},
		{"malformed xml", write("xml.xlsx", sheetWith(`<row r="1"><c r="A1"><v>1</c></row>`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compareTable(context.Background(), tt.result, good, true, allRules)
			if err != nil || got != 0 {
				t.Errorf("compare_table(%s) = %v, %v; want 0, nil", tt.name, got, err)
			}
		})
	}
}

func TestBadExpectedIsAnError(t *testing.T) {
	good := book(t, "good", nil)
	bad := filepath.Join(t.TempDir(), "bad.xlsx")
	must(t, os.WriteFile(bad, []byte("not a workbook"), 0o644))
	if _, err := compareTable(context.Background(), good, bad, true, allRules); err == nil || !strings.Contains(err.Error(), "expected workbook") {
		t.Errorf("compare_table with a corrupt expected file: err = %v, want an expected-workbook error", err)
	}
	if _, err := compareTable(context.Background(), good, good, true, map[string]any{}); err == nil {
		t.Errorf("compare_table without rules: want an error")
	}
	if _, err := compareTable(context.Background(), good, good, true, rules(map[string]any{"type": "sparkles"})); err == nil {
		t.Errorf("compare_table with an unknown rule: want an error")
	}
}

// FuzzCompareTable feeds arbitrary bytes as the result workbook through
// every rule kind: nothing may panic, and garbage scores 0 or 1 without
// an error.
func FuzzCompareTable(f *testing.F) {
	dir := f.TempDir()
	ef := excelize.NewFile()
	for i, r := range [][]any{{"Region", "Sales"}, {"East", 10}, {"West", 2.5}} {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := ef.SetSheetRow("Sheet1", cell, &r); err != nil {
			f.Fatal(err)
		}
	}
	expected := filepath.Join(dir, "expected.xlsx")
	if err := ef.SaveAs(expected); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(expected)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "result.xlsx")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := compareTable(context.Background(), p, expected, true, allRules)
		if err != nil {
			t.Fatalf("compare_table on fuzzed result: %v", err)
		}
		if got != 0 && got != 1 {
			t.Fatalf("compare_table = %v, want 0 or 1", got)
		}
	})
}
