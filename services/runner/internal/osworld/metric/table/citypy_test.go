package table

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// TestCityOrderMatchesTablePy scores random LibreOffice-made workbooks with
// compare_conference_city_in_order here and in OSWorld's table.py (openpyxl
// reading C2:C22 of the active sheet), against random expected lists: city
// names with accents, punctuation, other scripts and case, numbers, dates,
// booleans, formulas and empty cells; lists of names, names that are not
// strings, and lists too short. It runs only with OSWORLD_REF set (see
// oracle); OSWORLD_SEED picks the draw.
func TestCityOrderMatchesTablePy(t *testing.T) {
	if os.Getenv("OSWORLD_REF") == "" {
		t.Skip("OSWORLD_REF is not set")
	}
	seed := int64(3)
	if s := os.Getenv("OSWORLD_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	rng := rand.New(rand.NewSource(seed))
	names := []string{"Montréal", "Montreal", "MONTREAL, QC", "São Paulo", "Sao-Paulo", "İstanbul", "Istanbul", "Zürich",
		"ZURICH", "Straße", "Strasse", "Москва", "北京", "Beijing", "New York City", "NYC", "Lake Tahoe (Stateline)",
		"Stateline, NV", "St. Louis", "Saint Louis", "Ｔｏｋｙｏ", "Tokyo", "ﬁnland", "finland", "2019", "Lille", " ", "-", ""}
	// Half the workbooks hold names only but for one cell of another kind
	// at most, so that whole lists can match.
	cell := func(clean bool) string {
		if clean && rng.Intn(30) > 0 {
			// Not the last three names, which no name matches.
			return str(names[rng.Intn(len(names)-3)])
		}
		switch rng.Intn(12) {
		case 0:
			return num([]string{"2019", "1.5", "0", "-3"}[rng.Intn(4)])
		case 1:
			return date([]string{"2020-01-02", "2019-07-15T10:30:00"}[rng.Intn(2)])
		case 2:
			v := []string{"true", "false"}[rng.Intn(2)]
			return fmt.Sprintf(`<table:table-cell office:value-type="boolean" office:boolean-value="%s"><text:p>%s</text:p></table:table-cell>`, v, strings.ToUpper(v))
		case 3:
			return formula("2*3", "6")
		case 4:
			return empty()
		}
		return str(names[rng.Intn(len(names))])
	}
	entry := func() any {
		switch rng.Intn(10) {
		case 0:
			l := []any{}
			for range rng.Intn(3) {
				l = append(l, names[rng.Intn(len(names))])
			}
			return l
		case 1:
			return []any{2019.0, nil, true, names[rng.Intn(len(names))]}[rng.Intn(4)]
		case 2:
			return []any{names[rng.Intn(len(names))], []any{true, false, nil, 1.5}[rng.Intn(4)]}
		}
		return names[rng.Intn(len(names))]
	}
	const docs = 40
	src := map[string]string{}
	cities := make([][]string, docs)
	for d := range docs {
		rows := []string{row(str("Year"), str("Conference"), str("City"))}
		clean := d%2 == 0
		n := 18 + rng.Intn(6)
		if clean {
			n = 21 + rng.Intn(3)
		}
		for i := range n {
			c := cell(clean)
			cities[d] = append(cities[d], c)
			rows = append(rows, row(num("2000"), str(fmt.Sprint("C", i)), c))
		}
		src[fmt.Sprintf("c%02d.fods", d)] = fods("", tbl("Sheet1", rows...))
	}
	files := convert(t, "xlsx", src)
	var cases []map[string]any
	var got []float64
	ones := 0
	for d := range docs {
		for k := range 25 {
			var want []any
			n := 21
			if rng.Intn(8) == 0 {
				n = rng.Intn(21)
			}
			for i := range n {
				// Mostly the text the cell shows, so that whole lists match.
				if c := cities[d]; i < len(c) && rng.Intn(80) > 0 && strings.Contains(c[i], "<text:p>") {
					name := c[i][strings.Index(c[i], "<text:p>")+len("<text:p>") : strings.Index(c[i], "</text:p>")]
					want = append(want, name)
					continue
				}
				want = append(want, entry())
			}
			expected := map[string]any{"expected": want}
			if k == 0 && d%10 == 0 {
				expected = map[string]any{"expected": strings.Repeat("x", 21)}
			}
			result := files[fmt.Sprintf("c%02d", d)]
			s, err := compareConferenceCityInOrder(context.Background(), result, expected, true, nil)
			if err != nil {
				t.Fatalf("c%02d: %v", d, err)
			}
			cases = append(cases, map[string]any{"fn": "compare_conference_city_in_order", "result": result, "expected": expected})
			got = append(got, s)
		}
	}
	want := oracleBatch(t, cases)
	for i := range cases {
		if got[i] != want[i] {
			t.Errorf("%s with %v: got %v, OSWorld's code gives %v", cases[i]["result"], cases[i]["expected"], got[i], want[i])
		}
		if want[i] == 1 {
			ones++
		}
	}
	t.Logf("%d cases, %d scoring 1", len(cases), ones)
}
