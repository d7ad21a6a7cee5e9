package table

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
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
		"tiny.fods":   fods("", tbl("Sheet1", head, row(str("a"), num("1.50001"), date("2020-01-02")), base[2])),
		"value.fods":  fods("", tbl("Sheet1", head, row(str("a"), num("1.6"), date("2020-01-02")), base[2])),
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
		{"same sheet names", "same", "expected", rules(map[string]any{"type": "sheet_name"}), 1},
		{"fewer sheets", "tiny", "expected", rules(map[string]any{"type": "sheet_name"}), 0},
		{"negative index", "same", "expected", data(-1.0, "EI1"), 1},
		{"all rules must hold", "tiny", "expected", rules(
			map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"},
			map[string]any{"type": "sheet_name"}), 0},
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

const cellStyles = `<style:style style:name="ce1" style:family="table-cell"><style:table-cell-properties fo:background-color="#0000ff"/><style:text-properties fo:color="#ffffff" fo:font-weight="bold"/></style:style>
<style:style style:name="ce2" style:family="table-cell"><style:text-properties fo:color="#ff0000"/></style:style>
<style:style style:name="ce3" style:family="table-cell"><style:table-cell-properties fo:background-color="#ffff00"/></style:style>`

func styled(style, cell string) string {
	return strings.Replace(cell, "<table:table-cell ", `<table:table-cell table:style-name="`+style+`" `, 1)
}

func merged(cell string, cols int) string {
	return strings.Replace(cell, "<table:table-cell ", fmt.Sprintf(`<table:table-cell table:number-columns-spanned="%d" table:number-rows-spanned="1" `, cols), 1) +
		strings.Repeat("<table:covered-table-cell/>", cols-1)
}

func TestCheckCell(t *testing.T) {
	files := convert(t, "xlsx", map[string]string{
		"cells.fods": fods(cellStyles,
			tbl("Sheet1", row(num("191.66666")), row(str("x"), num("2"), num("3"))),
			tbl("Sheet2",
				row(merged(styled("ce1", str("Investment Summary")), 3), str("after")),
				row(styled("ce2", str("red")), str("plain")))),
	})
	f := files["cells"]
	check := func(sheet any, coord string, props map[string]any) map[string]any {
		return rules(map[string]any{"type": "check_cell", "sheet_idx": sheet, "coordinate": coord, "props": props})
	}
	rule := func(method string, ref any) map[string]any { return map[string]any{"method": method, "ref": ref} }
	tests := []struct {
		name string
		opts map[string]any
		want float64
	}{
		{"approx value", check(0.0, "A1", map[string]any{"value": rule("approx:0.001", 191.6667)}), 1},
		{"approx value off", check(0.0, "A1", map[string]any{"value": rule("approx:0.00001", 191.6667)}), 0},
		{"string value", check("RNSheet2", "A1", map[string]any{"value": rule("eq", "Investment Summary")}), 1},
		{"string value differs", check("RNSheet2", "A1", map[string]any{"value": rule("eq", "Summary")}), 0},
		{"number is a float", check(0.0, "B2", map[string]any{"value": rule("eq", 2.0)}), 1},
		{"empty cell is None", check(0.0, "D9", map[string]any{"value": rule("eq", nil)}), 1},
		{"merged cell", check("RNSheet2", "B1", map[string]any{"merge": rule("eq", true)}), 1},
		{"merge top-left is no MergedCell", check("RNSheet2", "A1", map[string]any{"merge": rule("eq", true)}), 0},
		{"outside the merge", check("RNSheet2", "D1", map[string]any{"merge": rule("eq", false)}), 1},
		{"fill and font", check("RNSheet2", "A1", map[string]any{
			"bgcolor": rule("eq", "FF0000FF"), "font_color": rule("eq", "FFFFFFFF"),
			"font_bold": rule("eq", true), "value": rule("eq", "Investment Summary")}), 1},
		{"wrong fill", check("RNSheet2", "A1", map[string]any{"bgcolor": rule("eq", "FFFF0000")}), 0},
		{"not bold", check("RNSheet2", "A2", map[string]any{"font_bold": rule("eq", true)}), 0},
		{"red font", check("RNSheet2", "A2", map[string]any{"font_color": rule("eq", "FFFF0000")}), 1},
		// A font without a colour makes openpyxl raise, which check_cell
		// catches: the colour reads as None.
		{"font without colour", check("RNSheet2", "B2", map[string]any{"font_color": rule("eq", nil)}), 1},
		{"regex", check("RNSheet2", "B2", map[string]any{"value": rule("re.I", "^PLA")}), 1},
		{"font size", check("RNSheet2", "A2", map[string]any{"font_size": rule("eq", 10.0), "font_italic": rule("eq", false)}), 1},
		{"font name", check("RNSheet2", "A2", map[string]any{"font_name": rule("re", "^[A-Z]"), "font_underline": rule("eq", nil)}), 1},
		{"number format of text is None", check("RNSheet2", "A2", map[string]any{"number_format": rule("eq", nil)}), 1},
		{"number format of a number", check(0.0, "B2", map[string]any{"number_format": rule("eq", "General")}), 1},
		// Ordering None raises in Python; the metric scores 0.
		{"ordering None", check(0.0, "Z9", map[string]any{"value": rule("lt", 3.0)}), 0},
		{"missing sheet", check("RNNope", "A1", map[string]any{"value": rule("eq", nil)}), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, f, nil, tt.opts); got != tt.want {
				t.Errorf("check_cell = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStyleAndPrintAndFuzzy(t *testing.T) {
	red := func(c string) string { return styled("ce2", c) }
	yellow := func(c string) string { return styled("ce3", c) }
	files := convert(t, "xlsx", map[string]string{
		"expected.fods": fods(cellStyles, tbl("Sheet1", row(red(num("1")), red(str("a"))), row(yellow(str("b")), str("c")))),
		"same.fods":     fods(cellStyles, tbl("Sheet1", row(red(num("1")), red(str("a"))), row(yellow(str("b")), str("c")))),
		"fill.fods":     fods(cellStyles, tbl("Sheet1", row(red(num("1")), red(str("a"))), row(str("b"), str("c")))),
		"fuzzy.fods": fods("", tbl("Sheet1",
			row(str("Name"), str("Street"), str("Phone")),
			row(str(" Ann "), str("12 Main Rd"), str("+1 (555) 123-4567")),
			row(str("Bob"), str("3 High St"), str("555 987"))),
		),
		"fuzzygold.fods": fods("", tbl("Sheet1",
			row(str("name"), str("street"), str("phone")),
			row(str("Ann"), str("12 main road"), str("15551234567")),
			row(str("Bob"), str("3 High Street"), str("555987"))),
		),
	})
	csvDir := t.TempDir()
	writeCSV := func(name, body string) string {
		p := csvDir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// sheet_print reads the CSV export beside each workbook, which must
	// itself load.
	book, err := os.ReadFile(files["same"])
	if err != nil {
		t.Fatal(err)
	}
	writeCSV = func(name, body string) string {
		p := csvDir + "/" + name
		if strings.HasSuffix(name, ".xlsx") {
			body = string(book)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	resX := writeCSV("res.xlsx", "")
	writeCSV("res-Sheet1.csv", "a,1.50\r\nb,2.00\r\n\r\n")
	goldX := writeCSV("gold.xlsx", "")
	writeCSV("gold-Sheet1.csv", "a,1.50\nb,2.00\n")
	otherX := writeCSV("other.xlsx", "")
	writeCSV("other-Sheet1.csv", "A,1.5\nB,2\n")
	upperX := writeCSV("upper.xlsx", "")
	writeCSV("upper-Sheet1.csv", "A,1.50\nB,2.00\n")
	style := func(props ...any) map[string]any {
		return rules(map[string]any{"type": "style", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": props})
	}
	print := func(ic bool) map[string]any {
		return rules(map[string]any{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "ignore_case": ic})
	}
	fuzzy := func(rls ...any) map[string]any {
		return rules(map[string]any{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "rules": rls})
	}
	tests := []struct {
		name             string
		result, expected string
		opts             map[string]any
		want             float64
	}{
		{"same fills", files["same"], files["expected"], style("bgcolor"), 1},
		{"missing fill", files["fill"], files["expected"], style("bgcolor"), 0},
		{"fill type", files["fill"], files["expected"], style("fill_type"), 1},
		// Cells whose font has no colour make openpyxl raise.
		{"font colour raises", files["same"], files["expected"], style("font_color"), 0},
		{"print same", resX, goldX, print(false), 1},
		{"print differs", otherX, goldX, print(false), 0},
		{"print ignore case", upperX, goldX, print(true), 1},
		{"print case differs", upperX, goldX, print(false), 0},
		{"print csv missing", goldX + ".nope", goldX, print(false), 0},
		{"fuzzy exact", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"A3:A3"}, "type": "exact_match"}), 1},
		{"fuzzy trims", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"A2:A3"}, "type": "exact_match", "trim_leadings": " ", "trim_trailings": " "}), 1},
		{"fuzzy untrimmed", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"A2:A3"}, "type": "exact_match"}), 0},
		{"fuzzy header includes", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"A1:C1"}, "type": "includes", "ignore_case": true}), 1},
		{"fuzzy ratio", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"B2:B3"}, "type": "fuzzy_match", "threshold": 85.0,
				"normalization": []any{[]any{"Rd", "Road"}, []any{"St", "Street"}}, "ignore_case": true}), 1},
		{"fuzzy ratio strict", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"B2:B3"}, "type": "fuzzy_match", "threshold": 99.0, "ignore_case": true}), 0},
		{"fuzzy ignore chars", files["fuzzy"], files["fuzzygold"], fuzzy(
			map[string]any{"range": []any{"C2:C3"}, "type": "includes", "trim_leadings": "+ ", "ignore_chars": " ()-"}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, tt.result, tt.expected, tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

// OSWorld reads the result with openpyxl, which cannot open ODS: an ODS
// result scores 0 even with the same data. A list of paths (a multi-file
// getter) is scored by its first path, the one OSWorld's getters give.
func TestResultForms(t *testing.T) {
	doc := fods("", tbl("Sheet1", row(str("a"), str("b")), row(num("1"), num("2"))))
	xlsx := convert(t, "xlsx", map[string]string{"book.fods": doc})["book"]
	ods := convert(t, "ods", map[string]string{"book.fods": doc})["book"]
	data := rules(map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"})
	tests := []struct {
		name   string
		result any
		want   float64
	}{
		{"xlsx", xlsx, 1},
		{"ods", ods, 0},
		{"list of paths", []any{xlsx, ods}, 1},
		{"list starting with a missing file", []any{nil, xlsx}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compareTable(context.Background(), tt.result, xlsx, true, data)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("compare_table(%v) = %v, want %v", tt.result, got, tt.want)
			}
		})
	}
}

func TestHyperlinkProperty(t *testing.T) {
	linked := book(t, "linked", func(f *excelize.File) {
		must(t, f.SetCellHyperLink("Sheet1", "A2", "https://example.com/", "External"))
		must(t, f.SetCellHyperLink("Sheet1", "G7", "https://example.org/", "External"))
	})
	check := func(coord string, ref any) map[string]any {
		return rules(map[string]any{"type": "check_cell", "sheet_idx": 0.0, "coordinate": coord,
			"props": map[string]any{"hyperlink": map[string]any{"method": "eq", "ref": ref}}})
	}
	tests := []struct {
		name string
		opts map[string]any
		want float64
	}{
		// openpyxl gives a Hyperlink object, which equals no string.
		{"linked cell", check("A2", "https://example.com/"), 0},
		{"plain cell", check("A3", ""), 1},
		{"empty cell", check("H9", nil), 1},
		// openpyxl gives an empty linked cell the link as its value.
		{"empty linked cell", check("G7", nil), 0},
		{"same links", rules(map[string]any{"type": "style", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"hyperlink"}}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exp any
			if tt.name == "same links" {
				exp = linked
			}
			if got := score(t, linked, exp, tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSheetPrintOfLibreOfficeExports(t *testing.T) {
	// Two decimals as shown: the printed values differ where the stored
	// ones do not.
	twoDecimals := `<number:number-style style:name="N2"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1"/></number:number-style>
<style:style style:name="two" style:family="table-cell" style:data-style-name="N2"/>`
	sheet := func(style string) string {
		cell := func(v string) string {
			if style == "" {
				return num(v)
			}
			return styled(style, num(v))
		}
		return fods(twoDecimals, tbl("Sheet1", row(str("Item"), str("Price")), row(str("a"), cell("1.5")), row(str("b"), cell("2"))))
	}
	files := convert(t, "xlsx", map[string]string{"gold.fods": sheet("two"), "same.fods": sheet("two"), "plain.fods": sheet("")})
	for _, f := range files {
		exportCSV(t, f)
	}
	print := rules(map[string]any{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"})
	data := rules(map[string]any{"type": "sheet_data", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"})
	tests := []struct {
		name, result string
		opts         map[string]any
		want         float64
	}{
		{"same printed values", "same", print, 1},
		{"other printed values", "plain", print, 0},
		{"same stored values", "plain", data, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files["gold"], tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}
