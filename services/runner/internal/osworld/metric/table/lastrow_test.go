package table

import (
	"slices"
	"strings"
	"testing"
)

// TestLastRow: content_from_vm_file's last_row is the last data row as
// pandas' astype(str) gives it: the Scholar task's row of a name and
// counts (ints stay ints), a float column's ints with ".0", an empty cell
// "nan"; a sheet with a header only has no last row. Each row's want is
// what pandas 1.5.3 gave.
func TestLastRow(t *testing.T) {
	// Dates need a date format, or LibreOffice writes their numbers.
	const dateStyle = `<number:date-style style:name="D1"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/></number:date-style>
<style:style style:name="dt" style:family="table-cell" style:data-style-name="D1"/>`
	styledDate := func(d string) string {
		return strings.Replace(date(d), `office:value-type`, `table:style-name="dt" office:value-type`, 1)
	}
	head := row(str("Name"), str("Citations"), str("h-index"), str("Ratio"))
	files := convert(t, "xlsx", map[string]string{
		"scholar.fods": fods("", tbl("Sheet1", head,
			row(str("Geoffrey Hinton"), num("900000"), num("190"), num("1.5")),
			row(str("Yann LeCun"), num("345074"), num("147"), num("2")))),
		"gap.fods":    fods("", tbl("Sheet1", head, row(str("A"), num("1"), empty(), num("0.5")))),
		"header.fods": fods("", tbl("Sheet1", head)),
		"nat.fods": fods(dateStyle, tbl("Sheet1", row(str("Name"), str("When"), str("Long")),
			row(str("A"), styledDate("2020-01-02"), styledDate("2020-01-02T10:30:00.5")), row(str("B"), empty(), styledDate("2021-12-31")))),
		"dates.fods": fods(dateStyle, tbl("Sheet1", row(str("When"), str("Long")),
			row(styledDate("2020-01-02"), styledDate("2020-01-02T10:30:00.5")), row(styledDate("2021-12-31"), empty()))),
		"timestamps.fods": fods(dateStyle, tbl("Sheet1", row(str("When"), str("Long")),
			row(styledDate("2020-01-02"), styledDate("2021-12-31")), row(styledDate("2021-12-31T10:30:00.5"), styledDate("2022-01-01")))),
		"numbers.fods": fods("", tbl("Sheet1", row(str("Count"), str("Ratio")), row(num("147"), num("0.5")))),
		"ints.fods":    fods("", tbl("Sheet1", row(str("Count")), row(num("147")))),
	})
	tests := []struct {
		file   string
		want   []string
		wantOK bool
	}{
		{"scholar", []string{"Yann LeCun", "345074", "147", "2.0"}, true},
		{"gap", []string{"A", "1", "nan", "0.5"}, true},
		{"header", nil, false},
		// A missing date is NaT; a date alone in a row of other types
		// prints as a Timestamp, in a row of dates as they print together.
		{"nat", []string{"B", "NaT", "2021-12-31 00:00:00"}, true},
		{"dates", []string{"2021-12-31", "NaT"}, true},
		{"timestamps", []string{"2021-12-31 10:30:00.500", "2022-01-01 00:00:00.000"}, true},
		// The row of an int and a float column is float64.
		{"numbers", []string{"147.0", "0.5"}, true},
		{"ints", []string{"147"}, true},
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

// TestTimedeltaStr pins str() of durations as Python 3.11 and pandas
// 1.5.3 print them: a datetime.timedelta, a pandas Timedelta, and a
// Series of Timedeltas under astype(str).
func TestTimedeltaStr(t *testing.T) {
	const h, s = 3600e6, 1e6
	tests := []struct {
		us         int64
		pandas, py string
	}{
		{2 * h, "0 days 02:00:00", "2:00:00"},
		{24 * h, "1 days 00:00:00", "1 day, 0:00:00"},
		{1.5 * s, "0 days 00:00:01.500000", "0:00:01.500000"},
		{-2 * h, "-1 days +22:00:00", "-1 day, 22:00:00"},
		{26 * h, "1 days 02:00:00", "1 day, 2:00:00"},
		{0, "0 days 00:00:00", "0:00:00"},
		{1000, "0 days 00:00:00.001000", "0:00:00.001000"},
		{-50 * h, "-3 days +22:00:00", "-3 days, 22:00:00"},
	}
	for _, tt := range tests {
		if got := timedeltaLong(tt.us); got != tt.pandas {
			t.Errorf("Timedelta(%dus) = %q, want %q", tt.us, got, tt.pandas)
		}
		if got := pyTimedeltaStr(tt.us); got != tt.py {
			t.Errorf("timedelta(%dus) = %q, want %q", tt.us, got, tt.py)
		}
	}
	delta := func(us int64) pyVal { return pyVal{k: kDelta, i: us} }
	if got := timedeltaSeriesStr([]pyVal{delta(24 * h), delta(48 * h)}); !slices.Equal(got, []string{"1 days", "2 days"}) {
		t.Errorf("whole days = %q", got)
	}
	if got := timedeltaSeriesStr([]pyVal{delta(1000), {k: kNaN}}); !slices.Equal(got, []string{"0 days 00:00:00.001000", "NaT"}) {
		t.Errorf("with NaT = %q", got)
	}
}
