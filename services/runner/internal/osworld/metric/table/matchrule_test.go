package table

import (
	"errors"
	"testing"
)

// TestMatchRuleOpenpyxlValues covers the values only openpyxl gives a
// rule: the colour descriptor of theme colours, Hyperlink objects and a
// validation's MultiCellRange, and which failures are Python raising.
func TestMatchRuleOpenpyxlValues(t *testing.T) {
	link := hyperlinkObj{coord: "A1", attrs: "ref=A1"}
	eq := func(ref any) map[string]any { return map[string]any{"method": "eq", "ref": ref} }
	tests := []struct {
		name      string
		value     any
		rule      map[string]any
		want      bool
		pyRaises  bool
		wantError bool
	}{
		{"theme colour against a colour string", nonRGB{}, eq("FF000000"), false, false, false},
		{"theme colour against itself", nonRGB{}, eq(nonRGB{}), true, false, false},
		{"hyperlink against its target", link, eq("https://example.com"), false, false, false},
		{"hyperlink against the same link", link, eq(link), true, false, false},
		{"ranges equal no list", multiRange{}, eq([]any{}), false, false, false},
		{"ranges inside the limits", multiRange{[]cellRange{{2, 4, 29, 4}}},
			map[string]any{"method": "spreadsheet_range", "ref": []any{"D2:D29", "D1:D1048576"}}, true, false, false},
		{"spreadsheet_range on a string", "D2:D29",
			map[string]any{"method": "spreadsheet_range", "ref": []any{"D2:D29", "D1:D1048576"}}, false, true, true},
		{"ordering a number and a string", 1.0, map[string]any{"method": "lt", "ref": "a"}, false, true, true},
		{"a pattern the engine rejects", "a", map[string]any{"method": "re", "ref": "("}, false, false, true},
	}
	for _, tt := range tests {
		got, err := matchRule(tt.value, tt.rule)
		if got != tt.want || (err != nil) != tt.wantError || errors.Is(err, errPython) != tt.pyRaises {
			t.Errorf("%s: matchRule = %v, %v; want %v, error %v (Python raising %v)", tt.name, got, err, tt.want, tt.wantError, tt.pyRaises)
		}
	}
}
