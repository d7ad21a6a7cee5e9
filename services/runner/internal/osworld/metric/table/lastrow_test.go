package table

import (
	"slices"
	"testing"
)

// TestLastRow: content_from_vm_file's last_row is the last data row as
// pandas' astype(str) gives it: the Scholar task's row of a name and
// counts (ints stay ints), a float column's ints with ".0", an empty cell
// "nan"; a sheet with a header only has no last row.
func TestLastRow(t *testing.T) {
	head := row(str("Name"), str("Citations"), str("h-index"), str("Ratio"))
	files := convert(t, "xlsx", map[string]string{
		"scholar.fods": fods("", tbl("Sheet1", head,
			row(str("Geoffrey Hinton"), num("900000"), num("190"), num("1.5")),
			row(str("Yann LeCun"), num("345074"), num("147"), num("2")))),
		"gap.fods":    fods("", tbl("Sheet1", head, row(str("A"), num("1"), empty(), num("0.5")))),
		"header.fods": fods("", tbl("Sheet1", head)),
	})
	tests := []struct {
		file   string
		want   []string
		wantOK bool
	}{
		{"scholar", []string{"Yann LeCun", "345074", "147", "2.0"}, true},
		{"gap", []string{"A", "1", "nan", "0.5"}, true},
		{"header", nil, false},
	}
	for _, tt := range tests {
		got, ok, err := LastRow(files[tt.file])
		if err != nil {
			t.Fatalf("LastRow(%s): %v", tt.file, err)
		}
		if ok != tt.wantOK || !slices.Equal(got, tt.want) {
			t.Errorf("LastRow(%s) = %q, %v; want %q, %v", tt.file, got, ok, tt.want, tt.wantOK)
		}
	}
	if _, _, err := LastRow("/nonexistent.xlsx"); err == nil {
		t.Error("LastRow of a missing file: no error")
	}
}
