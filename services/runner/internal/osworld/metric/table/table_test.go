package table

import (
	"fmt"
	"strings"
	"testing"
)

// FODS cell and row builders.
func num(v string) string {
	return fmt.Sprintf(`<table:table-cell office:value-type="float" office:value="%s"><text:p>%s</text:p></table:table-cell>`, v, v)
}
func str(s string) string {
	return fmt.Sprintf(`<table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell>`, s)
}
func date(d string) string {
	return fmt.Sprintf(`<table:table-cell office:value-type="date" office:date-value="%s"><text:p>%s</text:p></table:table-cell>`, d, d)
}
func formula(f, v string) string {
	return fmt.Sprintf(`<table:table-cell table:formula="of:=%s" office:value-type="float" office:value="%s"><text:p>%s</text:p></table:table-cell>`, f, v, v)
}
func empty() string { return `<table:table-cell/>` }
func row(cells ...string) string {
	return "<table:table-row>" + strings.Join(cells, "") + "</table:table-row>"
}
func tbl(name string, rows ...string) string {
	return fmt.Sprintf(`<table:table table:name="%s">%s</table:table>`, name, strings.Join(rows, ""))
}

func TestSheetData(t *testing.T) {
	head := row(str("Name"), str("Amount"), str("When"))
	base := []string{head, row(str("a"), num("1.5"), date("2020-01-02")), row(str("b"), num("2"), date("2021-03-04"))}
	src := map[string]string{
		"expected.fods": fods("", tbl("Sheet1", base...), tbl("Sheet2", row(str("x")), row(num("1")))),
		"same.fods":     fods("", tbl("Sheet1", base...), tbl("Sheet2", row(str("x")), row(num("1")))),
		// Beyond the fourth decimal pandas' round(4) hides the difference.
		"tiny.fods": fods("", tbl("Sheet1", head, row(str("a"), num("1.50001"), date("2020-01-02")), base[2])),
		"value.fods": fods("", tbl("Sheet1", head, row(str("a"), num("1.6"), date("2020-01-02")), base[2])),
		"header.fods": fods("", tbl("Sheet1", row(str("Name"), str("Total"), str("When")), base[1], base[2])),
		"date.fods":   fods("", tbl("Sheet1", head, row(str("a"), num("1.5"), date("2020-01-03")), base[2])),
		// A blank row inside the data is a row of NaN to pandas.
		"blank.fods": fods("", tbl("Sheet1", head, base[1], row(empty()), base[2])),
		// Text that reads as numbers is a number column to pandas.
		"textnum.fods": fods("", tbl("Sheet1", base...), tbl("Sheet2", row(str("x")), row(str("1")))),
		// A float column against an int column: different dtypes.
		"float.fods": fods("", tbl("Sheet1", base...), tbl("Sheet2", row(str("x")), row(num("1.25")))),
		// A formula counts by its cached value.
		"formula.fods": fods("", tbl("Sheet1", head, row(str("a"), formula("0.5+1", "1.5"), date("2020-01-02")), base[2])),
		// "N/A" is NaN to pandas, as an empty cell is.
		"na.fods":      fods("", tbl("Sheet1", head, row(str("a"), str("N/A"), date("2020-01-02")))),
		"naempty.fods": fods("", tbl("Sheet1", head, row(str("a"), empty(), date("2020-01-02")))),
	}
	files := convert(t, "xlsx", src)
	data := func(i0, i1 any) map[string]any {
		return rules(map[string]any{"type": "sheet_data", "sheet_idx0": i0, "sheet_idx1": i1})
	}
	tests := []struct {
		name, result, expected string
		opts                   map[string]any
		want                   float64
	}{
		{"same", "same", "expected", data(0.0, "EI0"), 1},
		{"same by name", "same", "expected", data("RNSheet2", "ENSheet2"), 1},
		{"below precision", "tiny", "expected", data("RI0", "EI0"), 1},
		{"other value", "value", "expected", data(0.0, "EI0"), 0},
		{"other header", "header", "expected", data(0.0, "EI0"), 0},
		{"other date", "date", "expected", data(0.0, "EI0"), 0},
		{"blank row", "blank", "expected", data(0.0, "EI0"), 0},
		{"numeric text", "textnum", "expected", data("RNSheet2", "ENSheet2"), 1},
		{"float against int", "float", "expected", data("RNSheet2", "ENSheet2"), 0},
		{"formula value", "formula", "expected", data(0.0, "EI0"), 1},
		{"NA string is NaN", "na", "naempty", data(0.0, "EI0"), 1},
		{"missing sheet", "tiny", "expected", data("RNSheet2", "ENSheet2"), 0},
		{"index out of range", "tiny", "expected", data(5.0, "EI0"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files[tt.expected], tt.opts); got != tt.want {
				t.Errorf("compare_table(%s, %s) = %v, want %v", tt.result, tt.expected, got, tt.want)
			}
		})
	}
}
