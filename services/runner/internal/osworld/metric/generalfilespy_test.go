package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// generalFilesPyDriver writes random files and scores them with the file
// metrics of OSWorld's general.py (its utils.py loaded for the rule
// matching), printing {"metric", "result", "expected", "options",
// "score"} as JSON ({"raise": name} for a raise). argv: metrics
// directory, output directory, seed, number of cases.
const generalFilesPyDriver = `
import json, random, os, io, contextlib
stub("pdfplumber"); stub("docx", Document=None)
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
general = load("general", os.path.join(sys.argv[1], "general.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

LINES = [b"12:34:56 done", b"24:00:00 late", b"23:59:60", b"#!/usr/bin/env python3", b"# -*- coding: utf-8 -*-",
         b"def f():", b"\treturn 1", b"    return 1", b"", b"  ", b"x = 1  ", b"a,b", b"1,2", b"\"q,1\",2", b"Ab",
         b"\xc2\xa0", b"\x1c", b"\xff", b"name: Test", b"name: yes", b"author:", b"  name: A", b"  email: a@b.c",
         b"name: Test", b"n: 1:20", b"d: 2024-01-02", b"o: 010", b"---", b"{\"a\": {\"b\": 1}}", b"[1, 2]", b"\t- x"]
ENDS = [b"\n", b"\r\n", b"\r"]
def content():
    parts = []
    for _ in range(rng.randrange(6)):
        parts.append(rng.choice(LINES) + rng.choice(ENDS))
    return b"".join(parts)
def yaml_doc():
    d = {"name": rng.choice(["Test Account", "x"]), "author": {"name": rng.choice(["Test Account", "y"]), "email": "Test@gmail.com"}}
    text = "name: %s\nauthor:\n  name: %s\n  email: %s\n" % (d["name"], d["author"]["name"], d["author"]["email"])
    extra = rng.choice(["", "name: dup\n", "flag: yes\n", "t: 1:20\n", "---\nb: 2\n", "a: &x {k: 1}\nb: *x\n",
                        "<<: {m: 1}\n", "\tbad: tab\n", "date: 2024-01-02\n", "o: 0o17\n", "list:\n- a\n- b\n"])
    return (text + extra if rng.random() < 0.5 else extra + text).encode()

cases = []
for i in range(n):
    m = rng.choice(["diff_text_file", "check_list", "file_contains", "check_line_number", "compare_python_pure_text",
                    "check_json", "check_json", "check_csv"])
    a, b = os.path.join(out, "a%05d.txt" % i), os.path.join(out, "b%05d.txt" % i)
    ca = content()
    if m == "check_json" and rng.random() < 0.6:
        ca = yaml_doc() if rng.random() < 0.6 else json.dumps({"a": {"b": rng.choice([1, "x", True])}, "name": "Test Account"}).encode()
    cb = (ca if rng.random() < 0.3 else content()).replace(b"\xff", b"")
    for p, c in [(a, ca), (b, cb)]:
        with open(p, "wb") as f:
            f.write(c)
    result, expected, options = rng.choice([a, a, a, None]), b, {}
    if m == "check_list":
        pats = ["\\\\d", "^def", "Ab$", "return", "(", "x"]
        expected = {k: rng.sample(pats, rng.randrange(3)) for k in ["expect", "unexpect"] if rng.random() < 0.8}
    elif m == "file_contains":
        expected = {"expected": rng.sample(["Ab", "return", "12:34", "\\n", "x = 1"], rng.randrange(3))}
    elif m == "check_line_number":
        expected = {"expected": rng.choice([0, 1, 2, "1", "x"])}
    elif m == "check_json":
        rule = lambda: {"key": rng.choice([["name"], ["author", "name"], ["author", "email"], ["a", "b"], ["flag"], ["t"], ["missing"], ["list", 0]]),
                        "method": rng.choice(["eq", "re"]), "ref": rng.choice(["Test Account", "Test@gmail.com", 1, True, 80, "x", "^T"])}
        expected = {k: [rule() for _ in range(rng.randrange(3))] for k in ["expect", "unexpect"] if rng.random() < 0.8}
        if rng.random() < 0.5:
            options = {"is_yaml": True}
    elif m == "check_csv":
        expected = {k: [rng.choice([{"a": "1"}, {"a": "1", "b": "2"}, {"1": "a"}, {"q,1": "2"}])] for k in ["expect", "unexpect"] if rng.random() < 0.7}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(getattr(general, m)(result, expected, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": expected, "options": options, "score": score})
print(json.dumps(cases))
`

// TestFileMetricsMatchGeneralPy scores random files with diff_text_file (5
// published tasks), check_list (8), file_contains, check_line_number,
// compare_python_pure_text, check_json (JSON and YAML) and check_csv here
// and in OSWorld's general.py, and wants the same scores (a raise is a
// 0, and a pattern Python cannot compile fails the evaluation here). It
// runs only when OSWORLD_REF names an OSWorld checkout (python3 or
// OSWORLD_PYTHON, with PyYAML, lxml and openpyxl, runs it).
func TestFileMetricsMatchGeneralPy(t *testing.T) {
	out := osworldpy.Run(t, generalFilesPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	cases := osworldpy.Cases(t, out)
	osworldpy.Compare(t, cases, func(c osworldpy.Case) (float64, error) {
		got, err := General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
		if _, raised := c.Want(); err != nil && raised && c.Metric == "check_list" {
			return 0, nil // re.error: the pattern is the task's, and the evaluation fails
		}
		return got, err
	})
}
