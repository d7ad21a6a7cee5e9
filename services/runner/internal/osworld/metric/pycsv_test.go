package metric

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestDictRowsAsPython(t *testing.T) {
	long := strings.Repeat("x", pyCSVFieldLimit)
	tests := []struct {
		name, text string
		want       []map[string]any
		wantErr    bool
	}{
		{"plain", "a,b\n1,2\n", []map[string]any{{"a": "1", "b": "2"}}, false},
		{"after the closing quote", "a,b\n\"x\"y,2\n", []map[string]any{{"a": "xy", "b": "2"}}, false},
		{"spaces after the closing quote", "a,b\n\"x\"  ,2\n", []map[string]any{{"a": "x  ", "b": "2"}}, false},
		{"quote inside a field", "a,b\nx\"y,2\n", []map[string]any{{"a": "x\"y", "b": "2"}}, false},
		{"quote after a space", "a,b\n \"x\",2\n", []map[string]any{{"a": " \"x\"", "b": "2"}}, false},
		{"doubled quote", "a,b\n\"x\"\"y\",2\n", []map[string]any{{"a": "x\"y", "b": "2"}}, false},
		{"newline in quotes", "a,b\n\"x\ny\",2\n", []map[string]any{{"a": "x\ny", "b": "2"}}, false},
		{"open quote at the end", "a,b\n\"abc\n", []map[string]any{{"a": "abc\n", "b": nil}}, false},
		{"open quote, no newline", "a,b\n\"abc", []map[string]any{{"a": "abc", "b": nil}}, false},
		{"quotes after a closed quote", "a,b\n\"a\"b\"c\",2\n", []map[string]any{{"a": "ab\"c\"", "b": "2"}}, false},
		{"extra field left out", "a,b\n1,2,3\n", []map[string]any{{"a": "1", "b": "2"}}, false},
		{"missing field is None", "a,b\n1\n", []map[string]any{{"a": "1", "b": nil}}, false},
		{"empty line skipped", "a,b\n\n1,2\n", []map[string]any{{"a": "1", "b": "2"}}, false},
		{"empty first line names no field", "\n\na,b\n1,2\n", []map[string]any{{}, {}}, false},
		{"later name wins", "a,a\n1,2\n", []map[string]any{{"a": "2"}}, false},
		{"empty name", "a,b,\n1,2,3\n", []map[string]any{{"a": "1", "b": "2", "": "3"}}, false},
		{"no newline at the end", "a,b\n1,2", []map[string]any{{"a": "1", "b": "2"}}, false},
		{"NUL", "a,b\nx\x00y,2\n", []map[string]any{{"a": "x\x00y", "b": "2"}}, false},
		{"header only", "a,b\n", nil, false},
		{"empty", "", nil, false},
		{"field at the limit", "a\n" + long + "\n", []map[string]any{{"a": long}}, false},
		{"field over the limit", "a\n" + long + "x\n", nil, true},
		{"quoted field over the limit", "a\n\"" + long + "x\"\n", nil, true},
		// The limit counts characters, not bytes.
		{"limit in characters", "a\n" + strings.Repeat("é", pyCSVFieldLimit) + "\n", []map[string]any{{"a": strings.Repeat("é", pyCSVFieldLimit)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dictRows(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("dictRows err = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("dictRows = %q, want %q", got, tt.want)
			}
		})
	}
}

// pythonDictRows is the oracle: it reads a JSON list of texts on stdin and
// writes, for each, csv.DictReader's rows (fields past the names, keyed
// None, left out as dictRows does) or the error.
const pythonDictRows = `
import csv, io, json, sys
out = []
for text in json.load(sys.stdin):
    try:
        out.append({"rows": [{k: v for k, v in r.items() if k is not None} for r in csv.DictReader(io.StringIO(text, newline=None))]})
    except csv.Error as e:
        out.append({"err": str(e)})
json.dump(out, sys.stdout)
`

// TestDictRowsMatchPython compares dictRows with Python's own csv module on
// texts made of the characters the reader treats apart. Python 3.11 is the
// reference (it reads NUL as a character; 3.10 refused it). Without
// python3 the test fails in CI and is skipped elsewhere.
func TestDictRowsMatchPython(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "b", ",", ",", "\"", "\"", "\n", "\n", " ", "é", "\x00", "\r"}
	texts := randomTexts(rng, alphabet, 3000, 24)
	var want []struct {
		Rows []map[string]any `json:"rows"`
		Err  string           `json:"err"`
	}
	askPython(t, pythonDictRows, texts, &want)
	if len(want) != len(texts) {
		t.Fatalf("python3 answered %d texts of %d", len(want), len(texts))
	}
	bad := 0
	for i, text := range texts {
		// io.StringIO with newline=None reads \r and \r\n as \n, as
		// open() does and as ReadPyText does before dictRows.
		got, err := dictRows(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"))
		w := want[i]
		switch {
		case (err != nil) != (w.Err != ""):
			t.Errorf("%q: dictRows err = %v, Python's %q", text, err, w.Err)
		case err == nil && !reflect.DeepEqual(got, w.Rows) && !(len(got) == 0 && len(w.Rows) == 0):
			t.Errorf("%q: dictRows = %q, Python's %q", text, got, w.Rows)
		default:
			continue
		}
		if bad++; bad == 10 {
			t.Fatal("too many differences")
		}
	}
}
