package metric

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// need fails the test when CI is set and a program is missing, and skips
// it otherwise.
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", prog, err)
		}
		t.Skipf("%s not installed: %v", prog, err)
	}
	return p
}

// write creates a file in dir and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func rules(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

type metricCase struct {
	name     string
	metric   string
	result   any
	expected any
	opts     map[string]any
	want     float64
	wantErr  bool
}

func runCases(t *testing.T, tests []metricCase) {
	t.Helper()
	table := General()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, ok := table[tt.metric]
			if !ok {
				t.Fatalf("%s is not registered", tt.metric)
			}
			got, err := spec.Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%s: error %v, want error %v", tt.metric, err, tt.wantErr)
			}
			// Not "> 1e-9": a NaN score would pass that.
			if !(math.Abs(got-tt.want) <= 1e-9) {
				t.Errorf("%s(%v, %v, %v) = %v, want %v", tt.metric, tt.result, tt.expected, tt.opts, got, tt.want)
			}
		})
	}
}

func TestPythonOperators(t *testing.T) {
	eq := []struct {
		a, b any
		want bool
	}{
		{true, 1.0, true},
		{1, 1.0, true},
		{"1", 1.0, false},
		{nil, nil, true},
		{nil, "", false},
		{[]any{"a", 1.0}, []string{"a"}, false},
		{[]string{"a", "b"}, []any{"a", "b"}, true},
		{map[string]any{"k": []any{1.0}}, map[string]any{"k": []any{true}}, true},
		{map[string]any{"k": 1.0}, map[string]any{"k": 1.0, "j": 2.0}, false},
	}
	for _, tt := range eq {
		if got := PyEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("PyEqual(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	in := []struct {
		needle, container any
		want, wantErr     bool
	}{
		{"ell", "hello", true, false},
		{"x", []any{"x", "y"}, true, false},
		{"ell", []any{"hello"}, false, false},
		{"k", map[string]any{"k": 1.0}, true, false},
		{1.0, "1", false, true},
		{"x", nil, false, true},
	}
	for _, tt := range in {
		got, err := PyIn(tt.needle, tt.container)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("PyIn(%#v, %#v) = %v, %v; want %v, error %v", tt.needle, tt.container, got, err, tt.want, tt.wantErr)
		}
	}
	str := []struct {
		v    any
		want string
	}{
		{nil, "None"},
		{true, "True"},
		{345074.0, "345074.0"},
		{1e16, "1e+16"},
		{1e-5, "1e-05"},
		{0.1, "0.1"},
		{[]any{1.0, "a", nil, true, "it's"}, `[1.0, 'a', None, True, "it's"]`},
		{"plain", "plain"},
	}
	for _, tt := range str {
		if got := PyStr(tt.v); got != tt.want {
			t.Errorf("PyStr(%#v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// pyEqualAll is a library object whose == holds against anything.
type pyEqualAll struct{}

func (pyEqualAll) PyEqual(any) bool { return true }

func TestMatchValueToRule(t *testing.T) {
	tests := []struct {
		value   any
		rule    map[string]any
		want    bool
		wantErr bool
	}{
		{"Anonym\nXYZ Lab", rules("method", "re.S", "ref", `Anonym.XYZ`), true, false},
		{"Anonym\nXYZ Lab", rules("method", "re", "ref", `Anonym.XYZ`), false, false},
		{"DARK theme", rules("method", "re.I", "ref", `dark`), true, false},
		{false, rules("method", "eq", "ref", false), true, false},
		{0.0, rules("method", "eq", "ref", false), true, false},
		{3.0, rules("method", "lt", "ref", 4.0), true, false},
		{"3", rules("method", "lt", "ref", 4.0), false, true},
		{" 2.05 ", rules("method", "approx:0.1", "ref", 2.0), true, false},
		{"abc", rules("method", "approx:0.1", "ref", 2.0), false, false},
		{2.0, rules("method", "range.te", "ref", []any{0.0, 2.0}), true, false},
		{0.0, rules("method", "range.te", "ref", []any{0.0, 2.0}), false, false},
		{`"a,b"`, rules("method", "str_set_eq", "ref", []any{"b", "a"}), true, false},
		{1.0, rules("method", "re", "ref", "1"), false, true},
		{1.0, rules("method", "nope", "ref", 1.0), false, true},
		// Python's `and` never looks at the right bound once the left one
		// fails, so an unorderable right bound is False, not a raise.
		{3.0, rules("method", "range.te", "ref", []any{5.0, "x"}), false, false},
		{3.0, rules("method", "range.tx", "ref", []any{5.0, 9.0}), false, false},
		{6.0, rules("method", "range.tx", "ref", []any{5.0, 9.0}), false, true},
		{6.0, rules("method", "range.te", "ref", []any{5.0, "x"}), false, true},
		// list(ref): a non-string never equals a string, and a string ref
		// is its characters.
		{"a,b", rules("method", "str_list_eq", "ref", []any{"a", "b"}), true, false},
		{"a", rules("method", "str_list_eq", "ref", []any{"a", 1.0}), false, false},
		{"a,b", rules("method", "str_set_eq", "ref", "ba"), true, false},
		{"a", rules("method", "str_set_eq", "ref", 1.0), false, true},
		{"1_000", rules("method", "approx:0.1", "ref", 1000.0), true, false},
		{2.05, rules("method", "approx:0.1:x", "ref", 2.0), true, false},
		{2.05, rules("method", "approx", "ref", 2.0), false, true},
		{pyEqualAll{}, rules("method", "eq", "ref", "anything"), true, false},
		{"anything", rules("method", "ne", "ref", []any{pyEqualAll{}}), true, false},
	}
	for _, tt := range tests {
		got, err := MatchValueToRule(tt.value, tt.rule)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("MatchValueToRule(%#v, %v) = %v, %v; want %v, error %v", tt.value, tt.rule, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSequenceRatio(t *testing.T) {
	// The wants are Python's difflib.SequenceMatcher(None, a, b).ratio().
	mod := func(n, m int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('0' + i%m))
		}
		return out
	}
	tests := []struct {
		name string
		a, b []string
		want float64
	}{
		{"lines", strings.Split("line one\nline two\nline three\nline four", "\n"),
			strings.Split("line one\nline 2\nline three\nline four\nline five", "\n"), 0.6666666666666666},
		{"autojunk", mod(300, 7), mod(250, 5), 0.01818181818181818},
		{"chars", strings.Split("abxcd", ""), strings.Split("abcd", ""), 0.8888888888888888},
		{"empty", nil, nil, 1},
	}
	for _, tt := range tests {
		got, err := SequenceRatio(context.Background(), tt.a, tt.b)
		if err != nil || !(math.Abs(got-tt.want) <= 1e-12) {
			t.Errorf("%s: SequenceRatio = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestGeneralMetrics(t *testing.T) {
	dir := t.TempDir()
	lst := write(t, dir, "ls.txt", "COMPANY\nCOMPANY.msf\nUNIVERSITY.msf\r\nTrash\n")
	diffOut := write(t, dir, "diff.out", "\n")
	diffDirty := write(t, dir, "diff2.out", "< changed\n")
	notUTF8 := write(t, dir, "latin1.txt", "caf\xe9\n")
	csvPath := write(t, dir, "accounts.csv", "url,user\nimap://outlook.office365.com,anonym-x2024@outlook.com\n\"imap://a,b\",x\n")
	// Python reads "imap://c"x as imap://cx and the record goes on; Go's
	// encoding/csv read the rest of the file into one field.
	csvQuotePath := write(t, dir, "quote.csv", "url,user\n\"imap://c\"x,y\nimap://d,z\n")
	manifest := write(t, dir, "manifest.json", `{"name": "happy-extension", "version": "0.0.1", "background": {"scripts": ["background_script.js"]}, "browser_action": {"default_icon": {"64": "icons/icon.png"}}}`)
	yml := write(t, dir, "_config.yml", "name: Test Account\nauthor:\n  name: Test Account\n  email: Test@gmail.com\n  links: [1, 2]\n")
	xul := write(t, dir, "xulstore.json", `{"chrome://messenger/content/messenger.xhtml": {"folderTree": {"mode": "smart,tags"}}}`)
	report := write(t, dir, "report.txt", "Linux 6.1 (host) \t01/25/2024\n\n12:00:01 AM     CPU     %user     %nice   %system   %iowait    %steal     %idle\n12:00:02 AM     all      1.00      0.00      0.50      0.00      0.00     98.50\n12:00:03 AM     all      1.00      0.00      0.50      0.00      0.00     98.50\nAverage:        all      1.00      0.00      0.50      0.00      0.00     98.50\n")
	gotText := write(t, dir, "got.js", "line one\nline two\nline three\nline four\n")
	goldText := write(t, dir, "gold.js", "line one\nline 2\nline three\nline four\nline five\n")
	pyGot := write(t, dir, "got.py", "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\ndef f():\n\treturn 1   \n\n\n")
	pyGold := write(t, dir, "gold.py", "def f():\n    return 1\n")
	pyMarkdown := write(t, dir, "md.py", "```python\ndef f():\n    return 1\n```\n")
	missing := filepath.Join(dir, "missing.txt")

	runCases(t, []metricCase{
		{"exact", "exact_match", "true\n", rules("expected", "true\n"), nil, 1, false},
		{"exact differs", "exact_match", "false\n", rules("expected", "true\n"), nil, 0, false},
		{"exact none", "exact_match", nil, rules("expected", "x"), nil, 0, false},
		{"exact without expected", "exact_match", "x", rules(), nil, 0, true},
		{"in list", "match_in_list", "light", rules("expected", []any{"light", "system"}), nil, 1, false},
		{"not in list", "match_in_list", "dark", rules("expected", []any{"light", "system"}), nil, 0, false},
		{"is in list", "is_in_list", []any{"/a", "/home/user/Desktop/helloExtension"}, rules("expected", "/home/user/Desktop/helloExtension"), nil, 1, false},
		{"is in list miss", "is_in_list", []any{"/home/user/Desktop/helloExtension2"}, rules("expected", "/home/user/Desktop/helloExtension"), nil, 0, false},
		{"is in list none", "is_in_list", nil, rules("expected", "/x"), nil, 0, false},
		{"literal str", "literal_match", 1.0, "1.0", nil, 1, false},
		{"literal case", "literal_match", "ABC", "abc", map[string]any{"ignore_case": true}, 1, false},
		{"literal case strict", "literal_match", "ABC", "abc", nil, 0, false},
		{"literal list", "literal_match", []any{"Yann LeCun", "345074"}, []any{"yann lecun", "345074"}, map[string]any{"type": "list", "ignore_case": true}, 1, false},
		{"literal list length", "literal_match", []any{"a"}, []any{"a", "b"}, map[string]any{"type": "list"}, 0, false},
		{"literal bad type", "literal_match", "a", "a", map[string]any{"type": "set"}, 0, true},
		{"include", "check_include_exclude", "no libreoffice is running\nkilled from terminal\n", rules("include", []any{"no libreoffice is running", "killed from terminal"}, "exclude", []any{"libreoffice is still running"}), nil, 1, false},
		// "not killed from terminal" contains "killed from terminal": the
		// exclude list catches it.
		{"exclude hit", "check_include_exclude", "no libreoffice is running\nnot killed from terminal\n", rules("include", []any{"killed from terminal"}, "exclude", []any{"not killed from terminal"}), nil, 0, false},
		{"include none", "check_include_exclude", nil, rules("include", []any{}), nil, 0, false},
		{"include list result", "check_include_exclude", []any{"vlc.desktop"}, rules("include", []any{"vlc.desktop"}), nil, 1, false},
		{"fuzzy", "fuzzy_match", "abcd", rules("expected", "abce"), nil, 0.75, false},
		{"fuzzy same", "fuzzy_match", "abcd", rules("expected", "abcd"), nil, 1, false},
		{"fuzzy disjoint", "fuzzy_match", "abcd", rules("expected", "wxyz"), nil, 0, false},
		{"fuzzy none", "fuzzy_match", nil, rules("expected", "abcd"), nil, 0, false},
		{"check list", "check_list", lst, rules("expect", []any{`\bCOMPANY\.msf\b`, `\bCOMPANY/?(?!\.msf)`, `\bUNIVERSITY\.msf\b`}), nil, 1, false},
		{"check list lookahead miss", "check_list", lst, rules("expect", []any{`\bUNIVERSITY/?(?!\.msf)`}), nil, 0, false},
		{"check list unexpect", "check_list", diffOut, rules("unexpect", []any{".+"}), nil, 1, false},
		{"check list unexpect hit", "check_list", diffDirty, rules("unexpect", []any{".+"}), nil, 0, false},
		{"check list missing", "check_list", nil, rules("expect", []any{"x"}), nil, 0, false},
		{"check list not utf8", "check_list", notUTF8, rules("expect", []any{"caf"}), nil, 0, false},
		{"check list bad pattern", "check_list", lst, rules("expect", []any{"("}), nil, 0, true},
		{"csv unexpect hit", "check_csv", csvPath, rules("unexpect", []any{map[string]any{"url": "imap://outlook.office365.com", "user": "anonym-x2024@outlook.com"}}), nil, 0, false},
		{"csv unexpect clear", "check_csv", csvPath, rules("unexpect", []any{map[string]any{"url": "imap://outlook.office365.com", "user": "other"}}), nil, 1, false},
		{"csv expect quoted", "check_csv", csvPath, rules("expect", []any{map[string]any{"url": "imap://a,b"}}), nil, 1, false},
		{"csv text after a closing quote", "check_csv", csvQuotePath, rules("expect", []any{map[string]any{"url": "imap://cx", "user": "y"}, map[string]any{"url": "imap://d"}}), nil, 1, false},
		{"csv missing", "check_csv", missing, rules("expect", []any{}), nil, 0, false},
		{"json", "check_json", manifest, rules("expect", []any{
			rules("key", []any{"name"}, "method", "eq", "ref", "happy-extension"),
			rules("key", []any{"background", "scripts"}, "method", "eq", "ref", []any{"background_script.js"}),
			rules("key", []any{"browser_action", "default_icon"}, "method", "eq", "ref", map[string]any{"64": "icons/icon.png"}),
		}), nil, 1, false},
		{"json wrong value", "check_json", manifest, rules("expect", []any{rules("key", []any{"version"}, "method", "eq", "ref", "0.0.2")}), nil, 0, false},
		{"json missing key", "check_json", manifest, rules("expect", []any{rules("key", []any{"browser_action", "default_popup"}, "method", "eq", "ref", "x")}), nil, 0, false},
		{"json unexpect missing key", "check_json", manifest, rules("unexpect", []any{rules("key", []any{"nope"}, "method", "eq", "ref", "x")}), nil, 1, false},
		{"json re", "check_json", xul, rules("expect", []any{rules("key", []any{"chrome://messenger/content/messenger.xhtml", "folderTree", "mode"}, "method", "re", "ref", `\bsmart\b`)}), nil, 1, false},
		{"yaml", "check_json", yml, rules("expect", []any{
			rules("key", []any{"name"}, "method", "eq", "ref", "Test Account"),
			rules("key", []any{"author", "email"}, "method", "eq", "ref", "Test@gmail.com"),
			rules("key", []any{"author", "links"}, "method", "eq", "ref", []any{1.0, 2.0}),
		}), map[string]any{"is_yaml": true}, 1, false},
		{"yaml wrong", "check_json", yml, rules("expect", []any{rules("key", []any{"author", "name"}, "method", "eq", "ref", "Other")}), map[string]any{"is_yaml": true}, 0, false},
		{"json of yaml", "check_json", yml, rules("expect", []any{rules("key", []any{"name"}, "method", "eq", "ref", "Test Account")}), nil, 0, false},
		{"line number", "check_line_number", report, rules("expected", "3"), nil, 1, false},
		{"line number off", "check_line_number", report, rules("expected", "31"), nil, 0, false},
		{"line number missing", "check_line_number", missing, rules("expected", "0"), nil, 0, false},
		{"file contains", "file_contains", report, rules("expected", []any{"CPU", "%user", "%idle"}), nil, 1, false},
		{"file lacks", "file_contains", report, rules("expected", []any{"CPU", "Ping"}), nil, 0, false},
		{"file contains none", "file_contains", nil, rules("expected", []any{"CPU"}), nil, 0, false},
		{"diff ratio", "diff_text_file", gotText, goldText, nil, 0.6666666666666666, false},
		{"diff same", "diff_text_file", goldText, goldText, nil, 1, false},
		{"diff none", "diff_text_file", nil, goldText, nil, 0, false},
		{"diff gold missing", "diff_text_file", gotText, missing, nil, 0, true},
		{"pure python", "compare_python_pure_text", pyGot, pyGold, nil, 1, false},
		{"pure python markdown", "compare_python_pure_text", pyMarkdown, pyGold, nil, 0, false},
		{"pure python none", "compare_python_pure_text", nil, pyGold, nil, 0, false},
		{"utc", "is_utc_0", "               Local time: Thu 2024-01-25 12:56:06 WET\n           Universal time: Thu 2024-01-25 12:56:06 UTC\n                 RTC time: Thu 2024-01-25 12:56:05\n                Time zone: Atlantic/Faroe (WET, +0000)\nSystem clock synchronized: yes\n", nil, nil, 1, false},
		{"not utc", "is_utc_0", "a\nb\nc\n                Time zone: Asia/Tokyo (JST, +0900)\n", nil, nil, 0, false},
		{"utc trailing space", "is_utc_0", "a\nb\nc\nTime zone: Etc/UTC (UTC, +0000) \n", nil, nil, 0, false},
		{"utc short", "is_utc_0", "a\nb\n", nil, nil, 0, false},
	})
}

func TestDirectJSON(t *testing.T) {
	exp := func(m map[string]any, kv ...any) map[string]any {
		return rules(append([]any{"expected", m}, kv...)...)
	}
	runCases(t, []metricCase{
		{"string result", "check_direct_json_object", `{'a': 1, 'b': "x"}`, exp(map[string]any{"a": 1.0}), nil, 1, false},
		{"bool equals int", "check_direct_json_object", map[string]any{"a": true}, exp(map[string]any{"a": 1.0}), nil, 1, false},
		{"value differs", "check_direct_json_object", map[string]any{"a": 2.0}, exp(map[string]any{"a": 1.0}), nil, 0, false},
		{"missing key", "check_direct_json_object", map[string]any{}, exp(map[string]any{"a": nil}), nil, 1, false},
		{"not json", "check_direct_json_object", "Traceback (most recent call last):", exp(map[string]any{"a": 1.0}), nil, 0, false},
		{"list result", "check_direct_json_object", "[1, 2]", exp(map[string]any{"a": 1.0}), nil, 0, false},
		{"none", "check_direct_json_object", nil, exp(map[string]any{"a": 1.0}), nil, 0, false},
		{"evaluation failed", "check_direct_json_object", map[string]any{"a": evaluationFailed}, exp(map[string]any{"a": evaluationFailed}), nil, 0, false},
		// ignore_list_order in the rules (where a task puts it) is not read:
		// the lists compare in order.
		{"rules ignore_list_order", "check_direct_json_object", map[string]any{"m": []any{"b", "a"}}, exp(map[string]any{"m": []any{"a", "b"}}, "ignore_list_order", true), nil, 0, false},
		{"in result substring", "check_direct_json_object", map[string]any{"q": "drip coffee maker reviews"}, exp(map[string]any{"q": "drip coffee maker"}, "expect_in_result", true), nil, 1, false},
		{"in result substring miss", "check_direct_json_object", map[string]any{"q": "coffee"}, exp(map[string]any{"q": "drip coffee maker"}, "expect_in_result", true), nil, 0, false},
		{"in result list of str", "check_direct_json_object", map[string]any{"toStation": "ARN"}, exp(map[string]any{"toStation": []any{"STO", "ARN"}}, "expect_in_result", true), nil, 1, false},
		{"in result list of list", "check_direct_json_object", map[string]any{"toStation": []any{"X", "STO"}}, exp(map[string]any{"toStation": []any{"STO", "ARN"}}, "expect_in_result", true), nil, 1, false},
		{"in result list miss", "check_direct_json_object", map[string]any{"toStation": "CPH"}, exp(map[string]any{"toStation": []any{"STO", "ARN"}}, "expect_in_result", true), nil, 0, false},
		{"in result missing key", "check_direct_json_object", map[string]any{}, exp(map[string]any{"q": "x"}, "expect_in_result", true), nil, 0, false},
		{"in result number", "check_direct_json_object", map[string]any{"n": 1.0}, exp(map[string]any{"n": 1.0}, "expect_in_result", true), nil, 0, false},
		{"script output", "check_direct_json_object", "{'ec07': 'Kili.jpg'}\n", exp(map[string]any{"ec07": []any{"Kili", "Kili.jpg"}}, "expect_in_result", true), nil, 1, false},
	})
}

func TestRunSQLite3(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "global-messages-db.sqlite")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE messages (id INTEGER PRIMARY KEY, folderID INTEGER)",
		"CREATE TABLE messageAttributes (id INTEGER PRIMARY KEY, attributeID INTEGER, value NUMERIC, messageID INTEGER)",
		"INSERT INTO messages (id, folderID) VALUES (1, 13), (2, 13), (3, 7)",
		"INSERT INTO messageAttributes (attributeID, value, messageID) VALUES (58, 1, 1), (58, 1, 2)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	starred := "SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58 AND value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0) = (SELECT COUNT(*) FROM messages WHERE folderID = 13);"
	garbage := write(t, dir, "garbage.sqlite", "not a database at all, but long enough to have a header of sorts ........")
	runCases(t, []metricCase{
		{"all starred", "run_sqlite3", dbPath, rules("sql", starred), nil, 1, false},
		{"not all starred", "run_sqlite3", dbPath, rules("sql", strings.ReplaceAll(starred, "folderID = 13", "folderID = 7")), nil, 0, false},
		{"count", "run_sqlite3", dbPath, rules("sql", "SELECT COUNT(*) FROM messages"), nil, 3, false},
		{"null", "run_sqlite3", dbPath, rules("sql", "SELECT NULL"), nil, 0, false},
		{"no row", "run_sqlite3", dbPath, rules("sql", "SELECT id FROM messages WHERE id > 99"), nil, 0, false},
		{"missing table", "run_sqlite3", dbPath, rules("sql", "SELECT COUNT(*) FROM nope"), nil, 0, false},
		{"missing file", "run_sqlite3", filepath.Join(dir, "none.sqlite"), rules("sql", "SELECT 1"), nil, 0, false},
		{"corrupt file", "run_sqlite3", garbage, rules("sql", "SELECT COUNT(*) FROM messages"), nil, 0, false},
		{"no sql", "run_sqlite3", dbPath, rules(), nil, 0, true},
	})
	// Read-only: a query cannot change the agent's database.
	if _, err := General()["run_sqlite3"].Fn(context.Background(), dbPath, rules("sql", "DELETE FROM messages"), true, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := General()["run_sqlite3"].Fn(context.Background(), dbPath, rules("sql", "SELECT COUNT(*) FROM messages"), true, nil)
	if got != 3 {
		t.Errorf("after a DELETE through run_sqlite3, %v messages remain, want 3", got)
	}
}

// TestRunSQLite3Ends: a query that would run forever is interrupted and
// scores 0.
func TestRunSQLite3Ends(t *testing.T) {
	defer func(d time.Duration) { sqliteTimeout = d }(sqliteTimeout)
	sqliteTimeout = 200 * time.Millisecond
	dbPath := filepath.Join(t.TempDir(), "empty.sqlite")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	start := time.Now()
	got, err := General()["run_sqlite3"].Fn(context.Background(), dbPath, rules("sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"), true, nil)
	if err != nil || got != 0 {
		t.Errorf("endless query = %v, %v; want 0", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("endless query took %v", d)
	}
}

// TestFuzzyPlaceMath scores a .docx that LibreOffice writes.
func TestFuzzyPlaceMath(t *testing.T) {
	soffice := need(t, "soffice")
	dir := t.TempDir()
	src := write(t, dir, "AllLocations.txt", "深圳市福田区正义街1号\n福田区振兴路108号\n\n深圳市福田区振兴路108号\n")
	two := write(t, dir, "Two.txt", "深圳市福田区正义街1号\n福田区振兴路108号\n")
	out := filepath.Join(dir, "out")
	cmd := exec.Command(soffice, "--headless", "-env:UserInstallation=file://"+filepath.Join(dir, "profile"),
		"--convert-to", "docx:MS Word 2007 XML", "--outdir", out, src, two)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v: %s", err, b)
	}
	answers := []any{"深圳市福田区正义街1号", "福田区振兴路108号", "深圳市福田区振兴路108号"}
	runCases(t, []metricCase{
		{"three places", "fuzzy_place_math", filepath.Join(out, "AllLocations.docx"), rules("expected", answers), nil, 1, false},
		{"two places", "fuzzy_place_math", filepath.Join(out, "Two.docx"), rules("expected", answers), nil, 0, false},
		{"partial", "fuzzy_place_math", filepath.Join(out, "AllLocations.docx"), rules("expected", answers[:2]), nil,
			// The third word's best ratio: the 10 characters of the
			// second answer are a subsequence of its 13.
			(1 + 1 + 2.0*10/23) / 3, false},
		{"not a docx", "fuzzy_place_math", src, rules("expected", answers), nil, 0, false},
		{"missing", "fuzzy_place_math", filepath.Join(dir, "none.docx"), rules("expected", answers), nil, 0, false},
	})
}

func TestMatchValueToRuleRaises(t *testing.T) {
	tests := []struct {
		rule   map[string]any
		raises bool
	}{
		{rules("method", "lt", "ref", 1.0), true},
		{rules("method", "nope", "ref", 1.0), true},
		{rules("ref", 1.0), true},
		// An unbalanced pattern is the regex engine's error, not a score.
		{rules("method", "re", "ref", "("), false},
		// rule["ref"] is read by every method: a KeyError (found by
		// TestMatchValueToRuleMatchesUtilsPy; it compared with None).
		{rules("method", "eq"), true},
		{rules("method", "approx:0.1"), true},
	}
	for _, tt := range tests {
		_, err := MatchValueToRule("1", tt.rule)
		if err == nil || errors.Is(err, ErrPyRaises) != tt.raises {
			t.Errorf("MatchValueToRule(\"1\", %v) error = %v; want one that raises: %v", tt.rule, err, tt.raises)
		}
	}
	// ref[1] is read only when the left side holds: a one-item ref is an
	// IndexError then, and False otherwise, as in Python (it always raised
	// here).
	oneItem := rules("method", "range.ee", "ref", []any{0.0})
	if got, err := MatchValueToRule(-1.0, oneItem); got || err != nil {
		t.Errorf("MatchValueToRule(-1, range.ee [0]) = %v, %v; want false, nil", got, err)
	}
	if _, err := MatchValueToRule(1.0, oneItem); !errors.Is(err, ErrPyRaises) {
		t.Errorf("MatchValueToRule(1, range.ee [0]) error = %v; want one that raises", err)
	}
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a\r\nb\rc\x0bd\u2028e\n\nf", []string{"a", "b", "c", "d", "e", "", "f"}},
		{"a\n", []string{"a"}},
		{"a\n\n", []string{"a", ""}},
		{"", nil},
		{"\x1cx\u0085", []string{"", "x"}},
	}
	for _, tt := range tests {
		if got := SplitLines(tt.in); strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("SplitLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {0.1, "0.1"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e300, "1.5e+300"}, {math.NaN(), "nan"}, {math.Inf(-1), "-inf"},
	}
	for _, tt := range tests {
		if got := PyFloatRepr(tt.in); got != tt.want {
			t.Errorf("PyFloatRepr(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
