package metric

import (
	"context"
	"math"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// generalPyDriver draws random getter results and rules, scores them with
// the value metrics of OSWorld's general.py and prints them as JSON:
// {"metric", "result", "expected", "options", "score"}, with {"raise":
// name} for a raise. argv: metrics directory, seed, number of cases. Its
// imports that these metrics never call are stubbed.
const generalPyDriver = `
import json, random, io, contextlib, os
stub("pdfplumber"); stub("docx", Document=None)
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
general = load("general", os.path.join(sys.argv[1], "general.py"))
rng = random.Random(int(sys.argv[2]))

KEYS = ["a", "b", "ignore_list_order"]
def scalar():
    return rng.choice([None, True, False, 0, 1, 2, 1.0, 2.5, "", "a", "b", "ab", "1", "True", "a b", "'a'"])
def value(depth=0):
    k = rng.randrange(6 if depth < 2 else 3)
    if k < 3:
        return scalar()
    if k < 5:
        return [value(depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(KEYS): value(depth + 1) for _ in range(rng.randrange(3))}
def jsontext(v):
    # check_direct_json_object reads a string result as JSON after
    # swapping ' for ": give it JSON with single quotes now and then.
    s = json.dumps(v)
    return s.replace('"', "'") if rng.random() < 0.5 else " " + s + " "

cases = []
for _ in range(int(sys.argv[3])):
    m = rng.choice(["check_direct_json_object", "check_include_exclude", "exact_match", "match_in_list",
                    "is_in_list", "literal_match"])
    result, rules, options = value(), None, {}
    if m == "check_direct_json_object":
        exp = {rng.choice(KEYS): value(1) for _ in range(1 + rng.randrange(2))}
        if rng.random() < 0.5:
            result = dict((k, rng.choice([exp[k], value(1)])) for k in exp)
        if rng.random() < 0.3:
            result = jsontext(result)
        rules = {"expected": exp}
        if rng.random() < 0.4:
            rules["expect_in_result"] = rng.choice([True, False])
    elif m == "check_include_exclude":
        result = rng.choice([value(), "a b c", "ab", "", None])
        rules = {k: [rng.choice(["a", "b", "c", "ab", "x", 1])
                     for _ in range(rng.randrange(3))] for k in ["include", "exclude"] if rng.random() < 0.8}
    elif m == "literal_match":
        rules = value()
        options = {k: v for k, v in [("type", rng.choice(["str", "list"])), ("ignore_case", rng.choice([True, False]))] if rng.random() < 0.7}
    else:
        rules = {"expected": rng.choice([value(), result])}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if m == "literal_match":
                score = float(general.literal_match(result, rules, **options))
            else:
                score = float(getattr(general, m)(result, rules))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": rules, "options": options, "score": score})
print(json.dumps(cases))
`

// TestValueMetricsMatchGeneralPy scores random getter results and rules
// with check_direct_json_object (22 published tasks), check_include_exclude
// (21), exact_match (18), match_in_list, is_in_list and literal_match here
// and with OSWorld's own general.py, and wants the same scores (a raise
// is a 0). The values mix None, booleans, numbers, strings, lists and
// dicts, so Python's == and in across types decide. OSWorld's code is not
// ours to commit, so it runs only when OSWORLD_REF names an OSWorld
// checkout (run by python3 or OSWORLD_PYTHON, with PyYAML and lxml).
//
// JSON carries Python's 1 and 1.0 alike, so a case whose score depends
// on str() of a whole number (literal_match) is passed over.
func TestValueMetricsMatchGeneralPy(t *testing.T) {
	out := osworldpy.Run(t, generalPyDriver, nil, osworldpy.MetricsDir(t), "3", "20000")
	var cases []osworldpy.Case
	for _, c := range osworldpy.Cases(t, out) {
		if c.Metric == "literal_match" && (hasWholeFloat(c.Result) || hasWholeFloat(c.Expected)) {
			continue
		}
		cases = append(cases, c)
	}
	osworldpy.Compare(t, cases, func(c osworldpy.Case) (float64, error) {
		return General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}

// hasWholeFloat reports whether v holds a number without a fraction,
// which JSON cannot tell apart from Python's int.
func hasWholeFloat(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == math.Trunc(x)
	case []any:
		for _, e := range x {
			if hasWholeFloat(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasWholeFloat(e) {
				return true
			}
		}
	}
	return false
}
