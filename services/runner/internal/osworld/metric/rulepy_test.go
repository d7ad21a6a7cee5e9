package metric

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// rulePyDriver draws random values and rules and answers each with
// OSWorld's utils._match_value_to_rule: {"value", "rule", "match"}, with
// "match" true, false or {"raise": name}. argv: metrics directory, seed,
// number of cases. The imports _match_value_to_rule never calls are
// stubbed.
const rulePyDriver = `
import json, random, os
utils = load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
rng = random.Random(int(sys.argv[2]))

def value():
    return rng.choice([None, True, False, 0, 1, 2, 2.5, -1, "", "a", "abc", "ABC", "1", "2.5", " 2 ", "a,b", "'a,b'",
                       '"b,a"', "a\\nb", "1e3", "nan", [], ["a", "b"], ["b", "a"], {"a": 1}])
def rule():
    method = rng.choice(["re", "re.I", "re.M", "re.S", "re.I.M", "re.X", "re.BOGUS", "eq", "ne", "le", "lt", "ge", "gt",
                         "approx:0.1", "approx:1", "approx:x", "approx", "range.ee", "range.te", "range.et", "range.tt",
                         "str_list_eq", "str_set_eq", "bogus"])
    if method.startswith("re"):
        ref = rng.choice(["a", "^a", "b$", "(?i)abc", "A.C", "^$", "\\\\d", "a|b", "[", "1", "^a\\\\nb$"])
    elif method.startswith("range"):
        ref = rng.choice([[0, 2], [1, 1], ["a", "b"], [0], 2])
    elif method.startswith("str_"):
        ref = rng.choice([["a", "b"], ["b", "a"], ["a"], "ab", []])
    else:
        ref = value()
    r = {"method": method, "ref": ref}
    if rng.random() < 0.05:
        del r["ref"]
    return r

cases = []
for _ in range(int(sys.argv[3])):
    v, r = value(), rule()
    try:
        match = bool(utils._match_value_to_rule(v, r))
    except Exception as e:
        match = {"raise": type(e).__name__}
    cases.append({"value": v, "rule": r, "match": match})
print(json.dumps(cases))
`

// TestMatchValueToRuleMatchesUtilsPy answers random values and rules with
// MatchValueToRule and with OSWorld's own _match_value_to_rule (utils.py),
// which check_json, check_thunderbird_prefs, check_mp3_meta and the
// compare_table rules read: every method (re with flags, the comparisons,
// approx, range, str_list_eq, str_set_eq) on values of every JSON type. A
// Python raise must be an error wrapping ErrPyRaises here, but for a
// pattern Python cannot compile, which fails the evaluation. It runs only
// when OSWORLD_REF names an OSWorld checkout (python3 or OSWORLD_PYTHON,
// with lxml and openpyxl, runs it).
func TestMatchValueToRuleMatchesUtilsPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	out := osworldpy.Run(t, rulePyDriver, nil, metrics, "1", "20000")
	var cases []struct {
		Value any
		Rule  map[string]any
		Match any
	}
	if err := json.Unmarshal(out, &cases); err != nil {
		t.Fatalf("utils.py's answer: %v", err)
	}
	bad, matched, raised := 0, 0, 0
	for _, c := range cases {
		got, err := MatchValueToRule(c.Value, c.Rule)
		want, ok := c.Match.(bool)
		switch {
		case !ok && reflect.DeepEqual(c.Match, map[string]any{"raise": "error"}) && err != nil:
			// re.error, a pattern Python cannot compile: it cannot compile
			// here either, and a pattern is the task file's, so the
			// evaluation fails instead of scoring (see RuleErr).
			raised++
		case !ok:
			raised++
			if !errors.Is(err, ErrPyRaises) {
				bad++
				if bad <= 10 {
					t.Errorf("MatchValueToRule(%#v, %v) = %v, %v; utils.py raises %v", c.Value, c.Rule, got, err, c.Match)
				}
			}
		case err != nil || got != want:
			bad++
			if bad <= 10 {
				t.Errorf("MatchValueToRule(%#v, %v) = %v, %v; utils.py: %v", c.Value, c.Rule, got, err, want)
			}
		case want:
			matched++
		}
	}
	t.Logf("%d cases: %d match, %d raise in utils.py", len(cases), matched, raised)
	if bad > 0 {
		t.Errorf("%d of %d answers differ from utils.py", bad, len(cases))
	}
}
