package table

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// book writes a workbook with excelize: a small sales table on Sheet1,
// then whatever build adds.
func book(t *testing.T, name string, build func(f *excelize.File)) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	rows := [][]any{
		{"Region", "Product", "Sales", "Status"},
		{"East", "Pen", 10, "Pass"},
		{"West", "Pen", 20, "Fail"},
		{"East", "Ink", 30, "Held"},
		{"West", "Ink", 40, "Pass"},
	}
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	if build != nil {
		build(f)
	}
	p := filepath.Join(t.TempDir(), name+".xlsx")
	if err := f.SaveAs(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSheetProperties(t *testing.T) {
	freeze := func(x, y int, cell string) func(f *excelize.File) {
		return func(f *excelize.File) {
			must(t, f.SetPanes("Sheet1", &excelize.Panes{Freeze: true, XSplit: x, YSplit: y, TopLeftCell: cell, ActivePane: "bottomRight"}))
		}
	}
	zoom := func(z float64) func(f *excelize.File) {
		return func(f *excelize.File) { must(t, f.SetSheetView("Sheet1", 0, &excelize.ViewOptions{ZoomScale: &z})) }
	}
	list := func(sqref string, items ...string) func(f *excelize.File) {
		return func(f *excelize.File) {
			dv := excelize.NewDataValidation(true)
			dv.Sqref = sqref
			must(t, dv.SetDropList(items))
			must(t, f.AddDataValidation("Sheet1", dv))
		}
	}
	hide := func(rows ...int) func(f *excelize.File) {
		return func(f *excelize.File) {
			for _, r := range rows {
				must(t, f.SetRowVisible("Sheet1", r, false))
			}
		}
	}
	plain := book(t, "plain", nil)
	frozen := book(t, "frozen", freeze(1, 1, "B2"))
	// The same frozen split scrolled elsewhere: topLeftCell differs.
	scrolled := book(t, "scrolled", freeze(1, 1, "C40"))
	frozenCol := book(t, "frozenCol", freeze(2, 0, "C1"))
	zoomed := book(t, "zoomed", zoom(250))
	big := book(t, "big", zoom(300))
	dvGood := book(t, "dvGood", list("D2:D29", "Pass", "Fail", "Held"))
	dvShort := book(t, "dvShort", list("D2:D10", "Pass", "Fail", "Held"))
	dvItems := book(t, "dvItems", list("D2:D29", "Pass", "Fail"))
	hidden := book(t, "hidden", hide(3, 5))
	hiddenOther := book(t, "hiddenOther", hide(3))

	freezeRule := rules(map[string]any{"type": "freeze", "sheet_idx0": 0.0, "sheet_idx1": "EI0"})
	zoomRule := rules(map[string]any{"type": "zoom", "sheet_idx": 0.0, "method": "lt", "ref": 260.0})
	dvRule := rules(map[string]any{"type": "data_validation", "sheet_idx": 0.0, "dv_props": []any{map[string]any{
		"ranges":   map[string]any{"method": "spreadsheet_range", "ref": []any{"D2:D29", "D1:D1048576"}},
		"type":     map[string]any{"method": "eq", "ref": "list"},
		"formula1": map[string]any{"method": "str_set_eq", "ref": []any{"Pass", "Fail", "Held"}},
	}}})
	rowRule := rules(map[string]any{"type": "row_props", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"hidden"}})
	tests := []struct {
		name             string
		result, expected string
		opts             map[string]any
		want             float64
	}{
		{"freeze same", frozen, frozen, freezeRule, 1},
		{"freeze scrolled", scrolled, frozen, freezeRule, 1},
		{"freeze other split", frozenCol, frozen, freezeRule, 0},
		{"no freeze", plain, frozen, freezeRule, 0},
		{"zoom below", zoomed, "", zoomRule, 1},
		{"zoom above", big, "", zoomRule, 0},
		{"zoom default 100", plain, "", zoomRule, 1},
		{"validation", dvGood, "", dvRule, 1},
		{"validation range too short", dvShort, "", dvRule, 0},
		{"validation items", dvItems, "", dvRule, 0},
		// Fewer validations than dv_props fails before any is matched.
		{"no validation", plain, "", dvRule, 0},
		{"hidden rows", hidden, hidden, rowRule, 1},
		{"other hidden rows", hiddenOther, hidden, rowRule, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exp any
			if tt.expected != "" {
				exp = tt.expected
			}
			if got := score(t, tt.result, exp, tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChartsAndPivots(t *testing.T) {
	chart := func(typ excelize.ChartType, title, values string) func(f *excelize.File) {
		return func(f *excelize.File) {
			must(t, f.AddChart("Sheet1", "F1", &excelize.Chart{
				Type:   typ,
				Series: []excelize.ChartSeries{{Name: "Sheet1!$C$1", Categories: "Sheet1!$A$2:$A$5", Values: values}},
				Title:  excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: title}}},
			}))
		}
	}
	pivot := func(rows, cols []string, data string) func(f *excelize.File) {
		return func(f *excelize.File) {
			_, err := f.NewSheet("Sheet2")
			must(t, err)
			var rs, cs []excelize.PivotTableField
			for _, r := range rows {
				rs = append(rs, excelize.PivotTableField{Data: r})
			}
			for _, c := range cols {
				cs = append(cs, excelize.PivotTableField{Data: c})
			}
			must(t, f.AddPivotTable(&excelize.PivotTableOptions{
				DataRange: "Sheet1!A1:C5", PivotTableRange: "Sheet2!A1:E12",
				Rows: rs, Columns: cs, Data: []excelize.PivotTableField{{Data: data, Subtotal: "Sum"}},
				RowGrandTotals: true, ColGrandTotals: true, ShowRowHeaders: true,
			}))
		}
	}
	colChart := book(t, "col", chart(excelize.Col, "Sales", "Sheet1!$C$2:$C$5"))
	colChart2 := book(t, "col2", chart(excelize.Col, "Sales", "Sheet1!$C$2:$C$5"))
	barChart := book(t, "bar", chart(excelize.Bar, "Sales", "Sheet1!$C$2:$C$5"))
	lineChart := book(t, "line", chart(excelize.Line, "Sales", "Sheet1!$C$2:$C$5"))
	retitled := book(t, "retitled", chart(excelize.Col, "Totals", "Sheet1!$C$2:$C$5"))
	otherData := book(t, "otherData", chart(excelize.Col, "Sales", "Sheet1!$C$2:$C$4"))
	noChart := book(t, "noChart", nil)
	pv := book(t, "pivot", pivot([]string{"Region"}, []string{"Product"}, "Sales"))
	pvSame := book(t, "pivotSame", pivot([]string{"Region"}, []string{"Product"}, "Sales"))
	pvSwapped := book(t, "pivotSwapped", pivot([]string{"Product"}, []string{"Region"}, "Sales"))

	chartRule := func(props ...any) map[string]any {
		return rules(map[string]any{"type": "chart", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "chart_props": props})
	}
	pivotRule := rules(map[string]any{"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
		"pivot_props": []any{"col_fields", "filter", "row_fields", "data_fields"}})
	tests := []struct {
		name             string
		result, expected string
		opts             map[string]any
		want             float64
	}{
		{"same chart", colChart2, colChart, chartRule("type", "title"), 1},
		{"other type", lineChart, colChart, chartRule("type"), 0},
		{"bar direction", barChart, colChart, chartRule("type", "direction"), 0},
		{"column direction", colChart2, colChart, chartRule("type", "direction"), 1},
		{"other title", retitled, colChart, chartRule("type", "title"), 0},
		{"title not asked", retitled, colChart, chartRule("type"), 1},
		{"other series", otherData, colChart, chartRule("type"), 0},
		{"no chart", noChart, colChart, chartRule("type"), 0},
		{"same pivot", pvSame, pv, pivotRule, 1},
		{"swapped pivot", pvSwapped, pv, pivotRule, 0},
		{"no pivot", noChart, pv, pivotRule, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, tt.result, tt.expected, tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

// pilot is a FODS document with the sales table on Sheet1 and a
// LibreOffice data pilot (pivot table) of it on Sheet2; fields maps a
// source column to its orientation (row, column, page, data).
func pilot(fields ...[2]string) string {
	var fs []string
	for _, f := range fields {
		switch f[1] {
		case "data":
			fs = append(fs, fmt.Sprintf(`<table:data-pilot-field table:source-field-name="%s" table:orientation="data" table:function="sum"/>`, f[0]))
		default:
			fs = append(fs, fmt.Sprintf(`<table:data-pilot-field table:source-field-name="%s" table:orientation="%s"><table:data-pilot-level/></table:data-pilot-field>`, f[0], f[1]))
		}
	}
	fs = append(fs, `<table:data-pilot-field table:source-field-name="" table:is-data-layout-field="true" table:orientation="column"><table:data-pilot-level/></table:data-pilot-field>`)
	data := tbl("Sheet1",
		row(str("Region"), str("Product"), str("Sales"), str("Status")),
		row(str("East"), str("Pen"), num("10"), str("Pass")),
		row(str("West"), str("Pen"), num("20"), str("Fail")),
		row(str("East"), str("Ink"), num("30"), str("Held")))
	return fods("", data, tbl("Sheet2", row(empty())),
		`<table:data-pilot-tables><table:data-pilot-table table:name="DataPilot1" table:target-range-address="Sheet2.A1:Sheet2.E9" table:buttons="Sheet2.A1">
<table:source-cell-range table:cell-range-address="Sheet1.A1:Sheet1.D4"/>`+strings.Join(fs, "")+`</table:data-pilot-table></table:data-pilot-tables>`)
}

func TestLibreOfficePivot(t *testing.T) {
	files := convert(t, "xlsx", map[string]string{
		"gold.fods":    pilot([2]string{"Region", "row"}, [2]string{"Product", "column"}, [2]string{"Sales", "data"}),
		"same.fods":    pilot([2]string{"Region", "row"}, [2]string{"Product", "column"}, [2]string{"Sales", "data"}),
		"swapped.fods": pilot([2]string{"Product", "row"}, [2]string{"Region", "column"}, [2]string{"Sales", "data"}),
		"filter.fods":  pilot([2]string{"Region", "row"}, [2]string{"Product", "column"}, [2]string{"Status", "page"}, [2]string{"Sales", "data"}),
		"filter2.fods": pilot([2]string{"Region", "row"}, [2]string{"Product", "column"}, [2]string{"Status", "page"}, [2]string{"Sales", "data"}),
	})
	pivotRule := rules(map[string]any{"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
		"pivot_props": []any{"col_fields", "filter", "row_fields", "data_fields"}})
	allProps := rules(map[string]any{"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
		"pivot_props": []any{"name", "show_total", "show_empty_row", "show_empty_col", "show_headers", "location",
			"selection", "ordered", "row_fields", "col_fields", "data_fields", "data_fields_name"}})
	tests := []struct {
		name, result, expected string
		opts                   map[string]any
		want                   float64
	}{
		{"same pivot", "same", "gold", pivotRule, 1},
		{"rows and columns swapped", "swapped", "gold", pivotRule, 0},
		{"extra filter", "filter", "gold", pivotRule, 0},
		{"same filter", "filter2", "filter", pivotRule, 1},
		{"every property", "same", "gold", allProps, 1},
		{"every property, other layout", "filter", "gold", allProps, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files[tt.expected], tt.opts); got != tt.want {
				t.Errorf("pivot_table = %v, want %v", got, tt.want)
			}
		})
	}
}

// chartDoc is a FODS document with a LibreOffice chart of the sales of
// Sheet1: class is "bar", "line" or "pie"; horizontal bars with
// vertical=true (LibreOffice's name for it).
func chartDoc(class string, vertical bool, title, values string) string {
	obj := fmt.Sprintf(`<table:table-cell><draw:frame draw:z-index="0" svg:width="8cm" svg:height="6cm" svg:x="0cm" svg:y="0cm"><draw:object>
<office:document office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.chart">
<office:automatic-styles><style:style style:name="pa" style:family="chart"><style:chart-properties chart:vertical="%t"/></style:style></office:automatic-styles>
<office:body><office:chart><chart:chart chart:class="chart:%s" svg:width="8cm" svg:height="6cm">
<chart:title><text:p>%s</text:p></chart:title><chart:legend chart:legend-position="end"/>
<chart:plot-area chart:style-name="pa" table:cell-range-address="Sheet1.A1:Sheet1.B3" chart:data-source-has-labels="both">
<chart:axis chart:dimension="x" chart:name="primary-x"><chart:categories table:cell-range-address="Sheet1.A2:Sheet1.A3"/></chart:axis>
<chart:axis chart:dimension="y" chart:name="primary-y"/>
<chart:series chart:values-cell-range-address="%s" chart:label-cell-address="Sheet1.B1" chart:class="chart:%s"/>
</chart:plot-area></chart:chart></office:chart></office:body></office:document></draw:object></draw:frame></table:table-cell>`,
		vertical, class, title, values, class)
	doc := fods("", tbl("Sheet1",
		row(str("Region"), str("Sales"), obj),
		row(str("East"), num("10")),
		row(str("West"), num("20"))))
	return strings.Replace(doc, "<office:document ", `<office:document xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" `, 1)
}

func TestLibreOfficeChart(t *testing.T) {
	const vals = "Sheet1.B2:Sheet1.B3"
	files := convert(t, "xlsx", map[string]string{
		"gold.fods":       chartDoc("bar", false, "Sales", vals),
		"same.fods":       chartDoc("bar", false, "Sales", vals),
		"horizontal.fods": chartDoc("bar", true, "Sales", vals),
		"line.fods":       chartDoc("line", false, "Sales", vals),
		"retitled.fods":   chartDoc("bar", false, "Totals", vals),
		"shorter.fods":    chartDoc("bar", false, "Sales", "Sheet1.B2:Sheet1.B2"),
	})
	chartRule := func(props ...any) map[string]any {
		return rules(map[string]any{"type": "chart", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "chart_props": props})
	}
	tests := []struct {
		name, result, expected string
		opts                   map[string]any
		want                   float64
	}{
		{"same", "same", "gold", chartRule("type", "title", "legend"), 1},
		{"column against bar", "horizontal", "gold", chartRule("type", "direction"), 0},
		{"type only", "horizontal", "gold", chartRule("type"), 1},
		{"line", "line", "gold", chartRule("type"), 0},
		{"title", "retitled", "gold", chartRule("type", "title"), 0},
		{"series", "shorter", "gold", chartRule("type"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files[tt.expected], tt.opts); got != tt.want {
				t.Errorf("chart = %v, want %v", got, tt.want)
			}
		})
	}
}

// LibreOffice's headless conversion drops view settings (panes, zoom),
// so freeze and zoom are tested on excelize-written workbooks only.

func TestLibreOfficeHiddenRows(t *testing.T) {
	sheet := func(hidden ...int) string {
		var rs []string
		for i := 1; i <= 6; i++ {
			r := row(str(fmt.Sprint("r", i)), num(fmt.Sprint(i)))
			if slices.Contains(hidden, i) {
				r = strings.Replace(r, "<table:table-row>", `<table:table-row table:visibility="collapse">`, 1)
			}
			rs = append(rs, r)
		}
		return fods("", tbl("Sheet1", rs...))
	}
	files := convert(t, "xlsx", map[string]string{
		"hidden.fods":    sheet(3, 5),
		"hidden2.fods":   sheet(3, 5),
		"hiddenOne.fods": sheet(3),
	})
	rowRule := rules(map[string]any{"type": "row_props", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": []any{"hidden"}})
	tests := []struct {
		name, result, expected string
		opts                   map[string]any
		want                   float64
	}{
		{"same hidden rows", "hidden2", "hidden", rowRule, 1},
		{"other hidden rows", "hiddenOne", "hidden", rowRule, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exp any
			if tt.expected != "" {
				exp = files[tt.expected]
			}
			if got := score(t, files[tt.result], exp, tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

// validated is a FODS document whose Sheet1 column D, rows 2 to 1+rows,
// carries a LibreOffice list validation of items.
func validated(rows int, items ...string) string {
	quoted := make([]string, len(items))
	for i, it := range items {
		quoted[i] = "&quot;" + it + "&quot;"
	}
	val := `<table:content-validations><table:content-validation table:name="val1" table:condition="of:cell-content-is-in-list(` +
		strings.Join(quoted, ";") + `)" table:allow-empty-cell="true" table:base-cell-address="Sheet1.D2"/></table:content-validations>`
	head := row(str("Id"), str("Name"), str("Mark"), str("Result"))
	body := fmt.Sprintf(`<table:table-row table:number-rows-repeated="%d">%s%s%s<table:table-cell table:content-validation-name="val1"/></table:table-row>`,
		rows, empty(), empty(), empty())
	return fods("", val+tbl("Sheet1", head, body))
}

func TestLibreOfficeValidation(t *testing.T) {
	files := convert(t, "xlsx", map[string]string{
		"good.fods":  validated(28, "Pass", "Fail", "Held"),
		"short.fods": validated(10, "Pass", "Fail", "Held"),
		"items.fods": validated(28, "Pass", "Fail"),
	})
	dvRule := rules(map[string]any{"type": "data_validation", "sheet_idx": 0.0, "dv_props": []any{map[string]any{
		"ranges":   map[string]any{"method": "spreadsheet_range", "ref": []any{"D2:D29", "D1:D1048576"}},
		"type":     map[string]any{"method": "eq", "ref": "list"},
		"formula1": map[string]any{"method": "str_set_eq", "ref": []any{"Pass", "Fail", "Held"}},
	}}})
	tests := []struct {
		name, result string
		want         float64
	}{
		{"list on D2:D29", "good", 1},
		{"list on D2:D11", "short", 0},
		{"other items", "items", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], nil, dvRule); got != tt.want {
				t.Errorf("data_validation = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestColumnsFiltersSparklines(t *testing.T) {
	widths := func(w float64, hide bool) func(f *excelize.File) {
		return func(f *excelize.File) {
			must(t, f.SetColWidth("Sheet1", "B", "C", w))
			must(t, f.SetColVisible("Sheet1", "D", !hide))
		}
	}
	filter := func(ref string, opts ...excelize.AutoFilterOptions) func(f *excelize.File) {
		return func(f *excelize.File) { must(t, f.AutoFilter("Sheet1", ref, opts)) }
	}
	spark := func(loc, rng string) func(f *excelize.File) {
		return func(f *excelize.File) {
			must(t, f.AddSparkline("Sheet1", &excelize.SparklineOptions{Location: []string{loc}, Range: []string{rng}}))
		}
	}
	files := map[string]string{
		"narrow":      book(t, "narrow", widths(20, true)),
		"narrow2":     book(t, "narrow2", widths(20, true)),
		"wide":        book(t, "wide", widths(30, true)),
		"shown":       book(t, "shown", widths(20, false)),
		"filtered":    book(t, "filtered", filter("A1:D5", excelize.AutoFilterOptions{Column: "C", Expression: "x > 15"})),
		"filtered2":   book(t, "filtered2", filter("A1:D5", excelize.AutoFilterOptions{Column: "C", Expression: "x > 15"})),
		"otherFilter": book(t, "otherFilter", filter("A1:D5", excelize.AutoFilterOptions{Column: "C", Expression: "x > 25"})),
		"bareFilter":  book(t, "bareFilter", filter("A1:D5")),
		"spark":       book(t, "spark", spark("E2", "Sheet1!C2:C5")),
		"spark2":      book(t, "spark2", spark("E2", "Sheet1!C2:C5")),
		"otherSpark":  book(t, "otherSpark", spark("E2", "Sheet1!C2:C4")),
		"plain":       book(t, "plain", nil),
	}
	rule := func(typ string, extra map[string]any) map[string]any {
		r := map[string]any{"type": typ, "sheet_idx0": 0.0, "sheet_idx1": "EI0"}
		for k, v := range extra {
			r[k] = v
		}
		return rules(r)
	}
	cols := rule("col_props", map[string]any{"props": []any{"width", "hidden", "min", "max", "auto_size"}})
	tests := []struct {
		name, result, expected string
		opts                   map[string]any
		want                   float64
	}{
		{"same columns", "narrow2", "narrow", cols, 1},
		{"other width", "wide", "narrow", cols, 0},
		{"width not asked", "wide", "narrow", rule("col_props", map[string]any{"props": []any{"hidden"}}), 1},
		{"shown column", "shown", "narrow", cols, 0},
		{"same filter", "filtered2", "filtered", rule("filter", nil), 1},
		{"other criterion", "otherFilter", "filtered", rule("filter", nil), 0},
		{"no criterion", "bareFilter", "filtered", rule("filter", nil), 0},
		{"no filter", "plain", "filtered", rule("filter", nil), 0},
		{"no filters", "plain", "plain", rule("filter", nil), 1},
		{"same sparkline", "spark2", "spark", rule("sparkline", nil), 1},
		{"other sparkline", "otherSpark", "spark", rule("sparkline", nil), 0},
		{"no sparkline", "plain", "spark", rule("sparkline", nil), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files[tt.expected], tt.opts); got != tt.want {
				t.Errorf("compare_table = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLibreOfficeAutoFilter(t *testing.T) {
	doc := func(filtered bool) string {
		data := tbl("Sheet1",
			row(str("Region"), str("Sales")), row(str("East"), num("10")), row(str("West"), num("20")))
		if !filtered {
			return fods("", data)
		}
		return fods("", data, `<table:database-ranges><table:database-range table:name="__Anonymous_Sheet_DB__0" table:target-range-address="Sheet1.A1:Sheet1.B3" table:display-filter-buttons="true"/></table:database-ranges>`)
	}
	files := convert(t, "xlsx", map[string]string{"on.fods": doc(true), "on2.fods": doc(true), "off.fods": doc(false)})
	filterRule := rules(map[string]any{"type": "filter", "sheet_idx0": 0.0, "sheet_idx1": "EI0"})
	tests := []struct {
		name, result, expected string
		want                   float64
	}{
		{"same autofilter", "on2", "on", 1},
		{"no autofilter", "off", "on", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := score(t, files[tt.result], files[tt.expected], filterRule); got != tt.want {
				t.Errorf("filter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStyleWithConditionalFormats(t *testing.T) {
	scale := book(t, "scale", func(f *excelize.File) {
		must(t, f.SetConditionalFormat("Sheet1", "C2:C5", []excelize.ConditionalFormatOptions{
			{Type: "2_color_scale", Criteria: "=", MinType: "min", MaxType: "max", MinColor: "#F8696B", MaxColor: "#63BE7B"}}))
	})
	cellIs := book(t, "cellIs", func(f *excelize.File) {
		red, err := f.NewConditionalStyle(&excelize.Style{Fill: excelize.Fill{Type: "pattern", Color: []string{"#FF0000"}, Pattern: 1}})
		must(t, err)
		must(t, f.SetConditionalFormat("Sheet1", "C2:C5", []excelize.ConditionalFormatOptions{
			{Type: "cell", Criteria: ">", Format: &red, Value: "15"}}))
	})
	style := func(props ...any) map[string]any {
		return rules(map[string]any{"type": "style", "sheet_idx0": 0.0, "sheet_idx1": "EI0", "props": props})
	}
	// A color scale is a type OSWorld skips: the style rule is exact.
	if got := score(t, scale, scale, style("bgcolor", "font_bold")); got != 1 {
		t.Errorf("style over a color scale = %v, want 1", got)
	}
	// A formula-based format needs OSWorld's formula engine: an error.
	if _, err := compareTable(context.Background(), cellIs, cellIs, true, style("bgcolor")); err == nil {
		t.Errorf("style over a cellIs format: want an error")
	}
	// Merged-cell and hyperlink properties do not depend on the formats.
	if got := score(t, cellIs, cellIs, style("merge")); got != 1 {
		t.Errorf("merge over a cellIs format = %v, want 1", got)
	}
}
