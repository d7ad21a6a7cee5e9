package metric

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The metrics of OSWorld's metrics/thunderbird.py: a profile's prefs.js,
// its message filters (msgFilterRules.dat) and its mail folders.

// prefLine is OSWorld's pattern for one prefs.js line (after strip):
// user_pref("key", value); where the key may hold escaped quotes.
var prefLine = mustPyre(`^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$`)

// Pref is one user_pref line of a prefs.js file.
type Pref struct {
	// Key is the pref name as written (escapes kept, as OSWorld compares).
	Key string
	// Value is the JSON-decoded value.
	Value any
}

// ParsePrefs reads prefs.js text as check_thunderbird_prefs does: each
// stripped line matching user_pref("key", value); with value decoded as
// JSON. Other lines are skipped. A value that is not JSON is an error,
// where OSWorld's json.loads raises.
func ParsePrefs(text string) ([]Pref, error) {
	var out []Pref
	for _, line := range pyLines(text) {
		m, err := prefLine.Match(PyStrip(line))
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(m.Named("val")), &v); err != nil {
			return nil, fmt.Errorf("pref %s: value is not JSON: %w", m.Named("key"), err)
		}
		out = append(out, Pref{Key: m.Named("key"), Value: v})
	}
	return out, nil
}

// metricThunderbirdPrefs checks prefs.js against rules {"expect": {key:
// {method, ref}}, "unexpect": {...}}: every expected pref must be present
// and match (the last line of a key counts), and no unexpected one may.
func metricThunderbirdPrefs(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	expect, _ := pyDict(r["expect"])
	unexpect, _ := pyDict(r["unexpect"])
	text, ok, err := readPyFile(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	prefs, err := ParsePrefs(text)
	if err != nil {
		return 0, Because(ctx, err)
	}
	matched := map[string]bool{}
	unexpectOK := true
	for _, p := range prefs {
		if rule, ok := expect[p.Key]; ok {
			rm, _ := pyDict(rule)
			m, err := MatchValueToRule(p.Value, rm)
			if err != nil {
				return 0, RuleErr(ctx, err)
			}
			matched[p.Key] = m
		} else if rule, ok := unexpect[p.Key]; ok && unexpectOK {
			rm, _ := pyDict(rule)
			m, err := MatchValueToRule(p.Value, rm)
			if err != nil {
				return 0, RuleErr(ctx, err)
			}
			unexpectOK = !m
		}
	}
	for k := range expect {
		if !matched[k] {
			return 0, nil
		}
	}
	return Bool(unexpectOK), nil
}

// filterCondition is OSWorld's pattern for the conditions of a filter:
// "AND (subject,contains,discount)" terms, or ALL.
var filterCondition = mustPyre(`\b(?:AND|OR) \((?:[\w ]+),(?:[\w ']+),(?:"(?:(?:[^"]|")+)"|(?:[^)]+))\)|\bALL\b`)

// filterFields maps the msgFilterRules.dat line prefixes OSWorld reads to
// the keys of a filter record.
var filterFields = []struct{ prefix, key string }{
	{"name=", "name"},
	{"enabled=", "enabled"},
	{"type=", "type"},
	{"action=", "action"},
	{"actionValue=", "actionValue"},
	{"condition=", "condition"},
}

// ParseFilters reads msgFilterRules.dat text as check_thunderbird_filter
// does: a "name=" line starts a filter, the quoted values of the lines
// after it fill it in, and its "condition=" line (split into terms)
// completes it. A filter field before any name is an error, where
// OSWorld's code raises.
func ParseFilters(text string) ([]map[string]any, error) {
	unquote := strings.NewReplacer(`\"`, `"`).Replace
	var (
		out []map[string]any
		cur map[string]any
	)
	for _, line := range pyLines(text) {
		for _, f := range filterFields {
			if !strings.HasPrefix(line, f.prefix) {
				continue
			}
			// OSWorld slices off `key="` and the two last characters (`"`
			// and the newline), counting characters.
			v := strings.ReplaceAll(unquote(pySlice(line, len(f.prefix)+1, -2)), `\\`, `\`)
			if f.key == "name" {
				cur = map[string]any{}
			} else if cur == nil {
				return nil, fmt.Errorf("filter %s before any name", f.key)
			}
			if f.key != "condition" {
				cur[f.key] = v
				break
			}
			terms, err := filterCondition.FindAll(v)
			if err != nil {
				return nil, err
			}
			conds := make([]any, len(terms))
			for i, t := range terms {
				conds[i] = t[0]
			}
			cur["condition"] = conds
			// The same map is appended: a field after the condition line
			// changes the filter already listed, as in OSWorld.
			out = append(out, cur)
			break
		}
	}
	return out, nil
}

// pySlice is Python's s[start:end] over characters, end negative.
func pySlice(s string, start, end int) string {
	rs := []rune(s)
	e := len(rs) + end
	if start >= len(rs) || e <= start {
		return ""
	}
	return string(rs[start:e])
}

// metricThunderbirdFilter scores msgFilterRules.dat with expectRecords:
// each rules["expect"] record is held by some filter, no
// rules["unexpect"] record by any.
func metricThunderbirdFilter(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	return expectRecords(ctx, result, expected, ParseFilters)
}

// metricThunderbirdFolder is check_thunderbird_folder, kept as OSWorld
// runs it. Its reader splits a folder file on "FROM - " and then skips
// every part that is not blank (the test reads `if mail.strip():
// continue`, the inverse of what the docstring describes), so a folder
// file reads as one "FROM - " per blank part: a file without that
// upper-case marker (Thunderbird's mbox lines start "From - ") compares
// equal to any other such file, and an empty file only to an empty one.
// Both published tasks score that way, so the metric does too. Result and
// expected are one path or aligned lists; a missing result scores 0.
func metricThunderbirdFolder(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	removeDup := true
	if v, ok := opts["remove_duplicate"]; ok {
		removeDup = Truthy(v)
	}
	preds, golds := []any{result}, []any{expected}
	if l, ok := pyList(expected); ok {
		golds = l
		if preds, ok = pyList(result); !ok {
			return 0, nil
		}
	}
	for i := 0; i < len(preds) && i < len(golds); i++ {
		if preds[i] == nil {
			return 0, nil
		}
		a, ok, err := readFolder(preds[i], removeDup)
		if err != nil || !ok {
			return 0, Because(ctx, err)
		}
		b, ok, err := readFolder(golds[i], removeDup)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("check_thunderbird_folder: expected file %v missing", golds[i])
		}
		if a != b {
			return 0, nil
		}
	}
	return 1, nil
}

// readFolder is OSWorld's read_thunderbird_folder_file. Only blank parts
// survive its filter, so the status and key normalisation it would apply
// to a message has nothing to change and the deleted-message test nothing
// to find: each part is "FROM - " plus its stripped (empty) text.
func readFolder(path any, removeDup bool) (string, bool, error) {
	text, ok, err := ReadPyText(path)
	if err != nil || !ok {
		return "", ok, err
	}
	var msgs []string
	for _, part := range strings.Split(PyStrip(text), "FROM - ") {
		if PyStrip(part) != "" {
			continue
		}
		msgs = append(msgs, "FROM - ")
	}
	if removeDup {
		msgs = slices.Compact(msgs)
	}
	return strings.Join(msgs, "\n"), true, nil
}
