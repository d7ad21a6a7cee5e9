package table

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/xuri/excelize/v2"
)

func TestCompareCSV(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	// The result is a real export: LibreOffice converts a CSV-born sheet
	// back to CSV.
	files := convert(t, "csv", map[string]string{"export.fods": fods("", tbl("Sheet1",
		row(str("Name"), str("Amount")), row(str("Zoë"), num("1.5")), row(str("b"), num("2"))))})
	export := files["export"]
	gold := write("gold.csv", "Name,Amount\nZoë,1.5\nb,2\n")
	goldBOM := write("bom.csv", "\ufeffName,Amount\r\nZoë,1.5\r\nb,2\r\n")
	latin1 := write("latin1.csv", "Name,Amount\nZo\xeb,1.5\nb,2\n")
	spaced := write("spaced.csv", "Name,Amount  \n  Zoë,1.5\nb,2\n")
	upper := write("upper.csv", "NAME,AMOUNT\nZOË,1.5\nB,2\n")
	other := write("other.csv", "Name,Amount\nZoë,1.5\nb,3\n")
	tests := []struct {
		name     string
		result   any
		expected any
		opts     map[string]any
		want     float64
	}{
		{"same", export, gold, nil, 1},
		{"BOM and CRLF", export, goldBOM, nil, 1},
		// Bytes that are not UTF-8 are read as Latin-1: the same text here.
		{"Latin-1", latin1, gold, nil, 1},
		{"blanks count when strict", spaced, gold, nil, 0},
		{"blanks ignored when not strict", spaced, gold, map[string]any{"strict": false}, 1},
		{"case counts", upper, gold, nil, 0},
		{"ignore case", upper, gold, map[string]any{"ignore_case": true}, 1},
		{"other value", other, gold, nil, 0},
		{"any of several", other, []any{filepath.Join(dir, "absent.csv"), gold, other}, nil, 1},
		{"none of several", other, []any{gold, goldBOM}, nil, 0},
		{"missing result", filepath.Join(dir, "absent.csv"), gold, nil, 0},
		{"no result", nil, gold, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts == nil {
				opts = map[string]any{}
			}
			got, err := compareCSV(context.Background(), tt.result, tt.expected, true, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("compare_csv = %v, want %v", got, tt.want)
			}
			oracle(t, "compare_csv", tt.result, tt.expected, opts, got)
		})
	}
}

func TestCompareConferenceCityInOrder(t *testing.T) {
	cities := []string{"Scottsdale", "Atlanta", "Stateline, NV", "Banff", "Beijing", "Montréal", "San Diego",
		"Lille", "Montreal", "San Juan", "New York City", "Barcelona", "Toulon", "Sydney", "Long Beach",
		"Vancouver", "Stockholm", "Montréal", "New Orleans", "Los Angeles", "Vancouver, BC"}
	sheet := func(cs []string) string {
		rows := []string{row(str("Year"), str("Conference"), str("City"))}
		for i, c := range cs {
			rows = append(rows, row(num("2000"), str("C"+string(rune('A'+i))), str(c)))
		}
		return fods("", tbl("Sheet1", rows...))
	}
	swapped := append([]string(nil), cities...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	short := cities[:20]
	files := convert(t, "xlsx", map[string]string{"right.fods": sheet(cities), "swapped.fods": sheet(swapped), "short.fods": sheet(short)})
	// A boolean cell (LibreOffice writes TRUE as the number 1, so excelize
	// makes this one) in C2, then the cities from C3 on.
	files["boolean"] = book(t, "boolean", func(f *excelize.File) {
		for i, c := range cities {
			v := any(c)
			if i == 0 {
				v = true
			}
			must(t, f.SetCellValue("Sheet1", fmt.Sprintf("C%d", 2+i), v))
		}
	})
	expected := map[string]any{"expected": []any{"Scottsdale", "Atlanta", []any{"Lake Tahoe", "Stateline"},
		[]any{"Banff", "Alberta's Rockies"}, "Beijing", []any{"Montreal", "Montréal"}, "San Diego", "Lille",
		[]any{"Montreal", "Montréal"}, "San Juan", []any{"New York", "NYC"}, "Barcelona", "Toulon", "Sydney",
		[]any{"Los Angeles", "Long Beach", "LA"}, "Vancouver", "Stockholm", []any{"Montreal", "Montréal"},
		"New Orleans", []any{"Los Angeles", "Long Beach", "LA"}, "Vancouver"}}
	initials := ""
	for _, c := range cities {
		initials += c[:1]
	}
	// A name that is not a string is str()'d: True matches a TRUE cell,
	// which openpyxl reads as True; None matches nothing.
	withFirst := func(e any) map[string]any {
		l := append([]any{e}, expected["expected"].([]any)[1:]...)
		return map[string]any{"expected": l}
	}
	tests := []struct {
		name     string
		result   any
		expected map[string]any
		want     float64
	}{
		{"in order", files["right"], expected, 1},
		{"swapped", files["swapped"], expected, 0},
		{"one city short", files["short"], expected, 0},
		{"missing file", filepath.Join(t.TempDir(), "absent.xlsx"), expected, 0},
		{"True names a TRUE cell", files["boolean"], withFirst([]any{"Nowhere", true}), 1},
		{"None names nothing", files["boolean"], withFirst([]any{nil}), 0},
		// Python indexes a string by character: each city holds its own
		// first letter.
		{"a string of the cities' first letters", files["right"], map[string]any{"expected": initials}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expected := tt.expected
			got, err := compareConferenceCityInOrder(context.Background(), tt.result, expected, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("compare_conference_city_in_order = %v, want %v", got, tt.want)
			}
			if tt.name != "missing file" {
				oracle(t, "compare_conference_city_in_order", tt.result, expected, nil, got)
			}
		})
	}
	// A KeyError outside the metric's try: the evaluation fails.
	if got, err := compareConferenceCityInOrder(context.Background(), files["right"], map[string]any{"cities": []any{}}, true, nil); err == nil {
		t.Errorf("rules without \"expected\" = %v, nil; want an error", got)
	}
}
