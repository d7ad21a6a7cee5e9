package table

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// lastRowFilePy runs OSWorld's content_from_vm_file getter
// (getters/file.py, in the getters directory argv[1]) with file_content
// "last_row" on each xlsx file named after it, its get_vm_file giving the
// file itself, and prints each answer as one JSON line: the list, or
// {"raise": name}.
const lastRowFilePy = `
import json, os, types
import pandas as pd
stub("requests")
file = load("osworld_file_getters", os.path.join(sys.argv[1], "file.py"))
file.get_vm_file = lambda env, config: config["path"]
# pandas 2 (OSWorld pins 2.2) reads "None" as NA; Debian's 1.5.3 is told to.
file.pd = types.SimpleNamespace(read_excel=lambda p: pd.read_excel(p, na_values=["None"]))
for path in sys.argv[2:]:
    try:
        print(json.dumps(file.get_content_from_vm_file(None, {"path": path, "file_type": "xlsx", "file_content": "last_row"})))
    except Exception as e:
        print(json.dumps({"raise": type(e).__name__}))
`

// TestLastRowMatchesFilePy reads random LibreOffice-made workbooks with
// LastRow and with OSWorld's content_from_vm_file getter (pandas), and
// wants the same strings. The columns hold one kind of value each or, now and
// then, another, so that pandas reads them as ints, floats, booleans,
// dates, times or objects, and the row as their common type. OSWorld's
// code is not ours to commit, so it runs only when OSWORLD_REF names a
// checkout (OSWORLD_PYTHON with pandas and openpyxl). Debian 12's pandas
// is 1.5.3; OSWorld pins 2.2.
func TestLastRowMatchesFilePy(t *testing.T) {
	getters := osworldpy.GettersDir(t)
	rng := rand.New(rand.NewSource(3))
	// Dates and times in a date, date-time or time format, which openpyxl
	// reads as datetimes and times. Not durations ("[h]:mm:ss"): the
	// reader here follows openpyxl 3.1, which reads them as timedeltas,
	// where Debian's 3.0.9 gives times.
	style := `<number:percentage-style style:name="N1"><number:number number:decimal-places="0" number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>
<style:style style:name="pct" style:family="table-cell" style:data-style-name="N1"/>
<number:date-style style:name="D1"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/></number:date-style>
<style:style style:name="dt" style:family="table-cell" style:data-style-name="D1"/>
<number:date-style style:name="D2"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/><number:text> </number:text><number:hours number:style="long"/><number:text>:</number:text><number:minutes number:style="long"/><number:text>:</number:text><number:seconds number:style="long" number:decimal-places="3"/></number:date-style>
<style:style style:name="dtt" style:family="table-cell" style:data-style-name="D2"/>
<number:time-style style:name="T1"><number:hours number:style="long"/><number:text>:</number:text><number:minutes number:style="long"/></number:time-style>
<style:style style:name="tm" style:family="table-cell" style:data-style-name="T1"/>`
	styled := func(cell string) string {
		cell = strings.Replace(cell, `office:value-type="date"`, `table:style-name="`+[]string{"dt", "dtt"}[rng.Intn(2)]+`" office:value-type="date"`, 1)
		return strings.Replace(cell, `office:value-type="time"`, `table:style-name="tm" office:value-type="time"`, 1)
	}
	src := map[string]string{}
	for d := range 150 {
		cols := 1 + rng.Intn(4)
		kinds := make([]int, cols)
		for j := range kinds {
			kinds[j] = rng.Intn(9)
		}
		var rows []string
		head := make([]string, cols)
		for j := range head {
			head[j] = str(fmt.Sprintf("c%d", j))
		}
		rows = append(rows, row(head...))
		for range rng.Intn(5) {
			cells := make([]string, cols)
			for j := range cells {
				cells[j] = styled(randomCell(rng, kinds[j]))
			}
			rows = append(rows, row(cells...))
		}
		src[fmt.Sprintf("w%03d.fods", d)] = fods(style, tbl("Sheet1", rows...))
	}
	files := convert(t, "xlsx", src)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = files[n]
	}
	out := osworldpy.Run(t, lastRowFilePy, nil, append([]string{getters}, paths...)...)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("pandas answered %d files of %d", len(lines), len(paths))
	}
	bad, rowsSeen := 0, 0
	for i, p := range paths {
		var want any
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := LastRow(p)
		var g any = map[string]any{"raise": "none"}
		if err == nil && ok {
			l := make([]any, len(got))
			for k, s := range got {
				l[k] = s
			}
			g = l
			rowsSeen++
		}
		_, wRaise := want.(map[string]any)
		_, gRaise := g.(map[string]any)
		if wRaise && gRaise || fmt.Sprint(want) == fmt.Sprint(g) && !wRaise && !gRaise {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s: LastRow %q (ok %v, %v); pandas %q", names[i], got, ok, err, want)
		}
	}
	t.Logf("%d workbooks, %d with a last row", len(paths), rowsSeen)
	if rowsSeen == 0 || rowsSeen == len(paths) {
		t.Errorf("%d of %d workbooks had a last row: the comparison wants both kinds", rowsSeen, len(paths))
	}
	if bad > 0 {
		t.Errorf("%d of %d last rows differ from pandas'", bad, len(paths))
	}
}
