package table

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestTablesOverCap: a workbook or CSV file over a size cap of the readers
// here, which openpyxl, pandas or Python's open() would read, is not
// scored: the metric returns an error wrapping metric.ErrOverCap that
// names the cap. It scored 0. The inputs are cheap: one cell at Excel's
// last row and column (a pandas frame of 2^34 cells), a sparse file.
func TestTablesOverCap(t *testing.T) {
	dir := t.TempDir()
	good := book(t, "good", nil)
	far := filepath.Join(dir, "far.xlsx")
	must(t, os.WriteFile(far, zipWith(t, map[string]string{"xl/workbook.xml": minimalWorkbook, "xl/_rels/workbook.xml.rels": minimalRels,
		"xl/worksheets/sheet1.xml": `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>` +
			`<row r="1048576"><c r="XFD1048576"><v>1</v></c></row></sheetData></worksheet>`}, nil), 0o644))
	sparse := filepath.Join(dir, "big.csv")
	must(t, os.WriteFile(sparse, nil, 0o644))
	must(t, os.Truncate(sparse, metric.MaxFile+1))
	small := filepath.Join(dir, "small.csv")
	must(t, os.WriteFile(small, []byte("a,b\n"), 0o644))
	sheetData := rules(map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"})
	tests := []struct {
		name             string
		metric           string
		result, expected any
		opts             map[string]any
		wantText         string
	}{
		{"compare_table, a sheet over the frame cap", "compare_table", far, good, sheetData, "grid over 20971520 cells"},
		{"compare_csv, a result over 64 MiB", "compare_csv", sparse, small, nil, "over 67108864 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, tt.opts)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, tt.wantText)
			}
		})
	}
}
