package table

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestCompareTableNotes: compare_table notes the first rule that does not
// hold, a rule on which OSWorld's metric raises, and a result workbook
// that does not open; a pass notes nothing.
func TestCompareTableNotes(t *testing.T) {
	res := book(t, "result", nil)
	broken := filepath.Join(t.TempDir(), "broken.xlsx")
	if err := os.WriteFile(broken, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	cell := func(coord string, ref any) map[string]any {
		return map[string]any{"type": "check_cell", "sheet_idx": 0.0, "coordinate": coord,
			"props": map[string]any{"value": map[string]any{"method": "eq", "ref": ref}}}
	}
	tests := []struct {
		name   string
		result string
		opts   map[string]any
		want   float64
		notes  []string
	}{
		{"every rule holds", res, rules(cell("A1", "Region"), cell("C2", 10.0)), 1, nil},
		{"the second rule does not", res, rules(cell("A1", "Region"), cell("C2", 11.0), cell("A1", "x")), 0,
			[]string{"rule 1 (check_cell) does not hold"}},
		{"a sheet index past the end raises", res, rules(map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "RI5"}), 0,
			[]string{`sheet "": worksheet "" not found`, `rule 0 (sheet_data): sheet "": the Python metric raises here`}},
		{"a result that does not open", broken, rules(cell("A1", "Region")), 0,
			[]string{"broken.xlsx: xlsx: zip: not a valid zip file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, notes := metric.WithNotes(context.Background())
			got, err := Metrics()["compare_table"].Fn(ctx, tt.result, tt.result, true, tt.opts)
			if err != nil || got != tt.want {
				t.Fatalf("compare_table = %v, %v; want %v", got, err, tt.want)
			}
			if n := notes.List(); !slices.Equal(n, tt.notes) {
				t.Errorf("notes = %q; want %q", n, tt.notes)
			}
		})
	}
}
