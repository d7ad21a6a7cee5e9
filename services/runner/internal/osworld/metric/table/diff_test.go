package table

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// oracleBatch scores many cases with OSWorld's own code in one Python run
// (see oracle); a Python exception counts as 0.
func oracleBatch(t *testing.T, cases []map[string]any) []float64 {
	t.Helper()
	py := os.Getenv("OSWORLD_PYTHON")
	if py == "" {
		py = "python3"
	}
	var in bytes.Buffer
	for _, c := range cases {
		b, err := json.Marshal(c)
		must(t, err)
		in.Write(append(b, '\n'))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/osworld_oracle.py")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var scores []float64
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var res struct{ Score *float64 }
		must(t, json.Unmarshal([]byte(line), &res))
		s := 0.0
		if res.Score != nil {
			s = *res.Score
		}
		scores = append(scores, s)
	}
	if len(scores) != len(cases) {
		t.Fatalf("oracle gave %d scores for %d cases", len(scores), len(cases))
	}
	return scores
}

// randomCell draws one FODS cell of a column's kind, sometimes of another.
func randomCell(rng *rand.Rand, kind int) string {
	if rng.Intn(6) == 0 {
		kind = rng.Intn(9)
	}
	switch kind {
	case 0:
		return num(fmt.Sprint(rng.Intn(2000) - 1000))
	case 1:
		return num([]string{"1.5", "2.25", "0.1", "1.00004", "1.00006", "3.14159265", "-7.5", "1e-07", "123456789012", "2.5e+20"}[rng.Intn(10)])
	case 2:
		return str([]string{"alpha", "Beta", "123", "1.50", " 7 ", "N/A", "NA", "None", "null", "TRUE", "false", "Zoë", "a b", "nan", "1,000", "-3"}[rng.Intn(16)])
	case 3:
		return date([]string{"2020-01-02", "2021-12-31", "1999-07-15", "2020-01-02T10:30:00", "1900-02-28"}[rng.Intn(5)])
	case 4:
		v := []string{"true", "false"}[rng.Intn(2)]
		return fmt.Sprintf(`<table:table-cell office:value-type="boolean" office:boolean-value="%s"><text:p>%s</text:p></table:table-cell>`, v, strings.ToUpper(v))
	case 5:
		v := []string{"0.25", "1", "0.125"}[rng.Intn(3)]
		return fmt.Sprintf(`<table:table-cell table:style-name="pct" office:value-type="percentage" office:value="%s"><text:p>%s</text:p></table:table-cell>`, v, v)
	case 6:
		return fmt.Sprintf(`<table:table-cell office:value-type="time" office:time-value="PT%02dH%02dM00S"><text:p>t</text:p></table:table-cell>`, rng.Intn(24), rng.Intn(60))
	case 7:
		return []string{
			`<table:table-cell table:formula="of:=1/0" office:value-type="float" office:value="0"><text:p>#DIV/0!</text:p></table:table-cell>`,
			`<table:table-cell table:formula="of:=&quot;&quot;" office:value-type="string" office:string-value=""><text:p></text:p></table:table-cell>`,
			formula("2*3", "6"),
		}[rng.Intn(3)]
	}
	return empty()
}

// TestDifferentialAgainstOSWorld scores random LibreOffice-made workbooks
// against each other with this package and with OSWorld's own code. It
// runs only with OSWORLD_REF set (see oracle).
func TestDifferentialAgainstOSWorld(t *testing.T) {
	if os.Getenv("OSWORLD_REF") == "" {
		t.Skip("OSWORLD_REF is not set")
	}
	seed := int64(7)
	if s := os.Getenv("OSWORLD_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	rng := rand.New(rand.NewSource(seed))
	const docs, rows, cols = 24, 7, 5
	style := `<number:percentage-style style:name="N1"><number:number number:decimal-places="0" number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>
<style:style style:name="pct" style:family="table-cell" style:data-style-name="N1"/>`
	kinds := make([]int, cols)
	for j := range kinds {
		kinds[j] = rng.Intn(9)
	}
	base := make([][]string, rows)
	for i := range base {
		base[i] = make([]string, cols)
		for j := range base[i] {
			if i == 0 {
				// Headers: names, sometimes a repeated name, a number, a
				// date or nothing (pandas' "Unnamed: j").
				switch rng.Intn(6) {
				case 0:
					base[i][j] = str("Name")
				case 1:
					base[i][j] = num([]string{"2019", "1.5", "1"}[rng.Intn(3)])
				case 2:
					base[i][j] = empty()
				case 3:
					base[i][j] = date("2020-01-02")
				default:
					base[i][j] = str([]string{"Name", "Value", "When", "Flag", "Note"}[j])
				}
				continue
			}
			base[i][j] = randomCell(rng, kinds[j])
		}
	}
	src := map[string]string{}
	for d := 0; d < docs; d++ {
		grid := make([][]string, rows)
		for i := range grid {
			grid[i] = append([]string(nil), base[i]...)
		}
		for k := 0; k < d%4; k++ {
			i, j := rng.Intn(rows), rng.Intn(cols)
			grid[i][j] = randomCell(rng, kinds[j])
		}
		var rs []string
		for _, r := range grid {
			rs = append(rs, row(r...))
		}
		// Blank rows before the header and after the data.
		if d%5 == 1 {
			rs = append([]string{row(empty())}, rs...)
		}
		if d%3 == 2 {
			rs = append(rs, row(empty(), empty()), row(empty()))
		}
		src[fmt.Sprintf("d%02d.fods", d)] = fods(style, tbl("Sheet1", rs...))
	}
	files := convert(t, "xlsx", src)
	var cases []map[string]any
	var got []float64
	var names []string
	add := func(name, result, expected string, opts map[string]any) {
		s, err := compareTable(context.Background(), result, expected, true, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases = append(cases, map[string]any{"fn": "compare_table", "result": result, "expected": expected, "options": opts})
		got = append(got, s)
		names = append(names, name)
	}
	for d := 0; d < docs; d++ {
		r := files[fmt.Sprintf("d%02d", d)]
		e := files[fmt.Sprintf("d%02d", (d+1)%docs)]
		add(fmt.Sprintf("sheet_data d%02d", d), r, e, rules(map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"}))
		add(fmt.Sprintf("sheet_data d%02d self", d), r, r, rules(map[string]any{"type": "sheet_data", "sheet_idx0": 0.0, "sheet_idx1": "EI0"}))
		add(fmt.Sprintf("sheet_fuzzy d%02d", d), r, e, rules(map[string]any{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
			"rules": []any{map[string]any{"range": []any{"A1:E7"}, "type": "exact_match"}}}))
		coord := fmt.Sprintf("%c%d", 'A'+rng.Intn(cols), 1+rng.Intn(rows))
		add(fmt.Sprintf("check_cell d%02d %s", d, coord), r, e, rules(map[string]any{"type": "check_cell", "sheet_idx": 0.0, "coordinate": coord,
			"props": map[string]any{"value": map[string]any{"method": "approx:0.01", "ref": 6.0}}}))
		add(fmt.Sprintf("style d%02d", d), r, e, rules(map[string]any{"type": "style", "sheet_idx0": 0.0, "sheet_idx1": "EI0",
			"props": []any{"number_format", "font_bold", "fill_type", "bgcolor"}}))
	}
	want := oracleBatch(t, cases)
	ones := 0
	for i := range cases {
		if got[i] != want[i] {
			t.Errorf("%s: got %v, OSWorld's code gives %v", names[i], got[i], want[i])
		}
		if want[i] == 1 {
			ones++
		}
	}
	t.Logf("%d cases, %d scoring 1", len(cases), ones)
}
