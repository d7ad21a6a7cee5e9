package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// thunderbirdPyDriver writes random prefs.js, msgFilterRules.dat and mail
// folder files and scores them with OSWorld's thunderbird.py, printing
// {"metric", "result", "expected", "options", "score"} as JSON
// ({"raise": name} for a raise). argv: metrics directory, output
// directory, seed, number of cases.
const thunderbirdPyDriver = `
import json, random, os, io, contextlib
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
tb = load(PKG + ".thunderbird", os.path.join(sys.argv[1], "thunderbird.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

KEYS = ["mail.a", "mail.b", "mail.q\\\"x"]
VALS = ['true', 'false', '1', '2.5', '"x"', '"a\\"b"', "'x'", 'x', '"1"', '[1]', '-3']
def prefs():
    lines = []
    for _ in range(rng.randrange(5)):
        l = 'user_pref("%s", %s);' % (rng.choice(KEYS), rng.choice(VALS))
        l = rng.choice([l, l, " " + l + " ", l[:-1], "// " + l, "#x"])
        lines.append(l + rng.choice(["\n", "\r\n"]))
    return "".join(lines)
CONDS = ['AND (subject,contains,"hi")', 'OR (from,is,a@b.c)', 'ALL', 'AND (subject,contains,"a\\"b")',
         'AND (body,doesn\'t contain,x)', 'NOT (x,y,z)']
def filters():
    lines = []
    for _ in range(rng.randrange(3)):
        block = ['name="%s"' % rng.choice(["F1", "F2", 'q\\"x']), 'enabled="%s"' % rng.choice(["yes", "no"]),
                 'type="17"', 'action="%s"' % rng.choice(["Move to folder", "Mark read"]),
                 'actionValue="%s"' % rng.choice(["mailbox://x/Inbox", ""]),
                 'condition="%s"' % " ".join(rng.sample(CONDS, rng.randrange(1, 3)))]
        if rng.random() < 0.2:
            block.pop(rng.randrange(len(block)))
        lines += block
    return "".join(l + "\n" for l in lines)
MAILS = ["FROM - Mon\nX-Mozilla-Status: 0001\nSubject: a\n\nbody\n", "FROM - Tue\nX-Mozilla-Status: 0009\nSubject: b\n\nx\n",
         "From - Wed\nSubject: c\n\ny\n", "FROM - Mon\nX-Mozilla-Status: 0001\nSubject: a\n\nbody\n", ""]
def folder():
    return "".join(rng.choice(MAILS) for _ in range(rng.randrange(4)))

cases = []
for i in range(n):
    m = rng.choice(["check_thunderbird_prefs", "check_thunderbird_filter", "check_thunderbird_folder"])
    a, b = os.path.join(out, "a%05d.txt" % i), os.path.join(out, "b%05d.txt" % i)
    make = {"check_thunderbird_prefs": prefs, "check_thunderbird_filter": filters, "check_thunderbird_folder": folder}[m]
    ca = make()
    cb = ca if rng.random() < 0.3 else make()
    for p, c in [(a, ca), (b, cb)]:
        with open(p, "w", newline="") as f:
            f.write(c)
    result, expected, options = rng.choice([a, a, a, None]), b, {}
    if m == "check_thunderbird_prefs":
        rule = lambda: {"method": rng.choice(["eq", "re", "ne"]), "ref": json.loads(rng.choice(['true', '1', '"x"', '2.5', '"a\\"b"']))}
        expected = {k: {rng.choice(KEYS): rule() for _ in range(rng.randrange(3))}
                    for k in ["expect", "unexpect"] if rng.random() < 0.8}
    elif m == "check_thunderbird_filter":
        rec = lambda: rng.choice([{"name": "F1"}, {"enabled": "yes", "action": "Move to folder"}, {"actionValue": ""},
                                  {"condition": ['AND (subject,contains,"hi")']}, {"name": 'q"x'}])
        expected = {k: [rec() for _ in range(rng.randrange(3))] for k in ["expect", "unexpect"] if rng.random() < 0.8}
    else:
        options = {k: rng.choice([True, False]) for k in ["remove_deleted", "remove_duplicate", "ignore_status", "ignore_keys"] if rng.random() < 0.4}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(getattr(tb, m)(result, expected, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": expected, "options": options, "score": score})
print(json.dumps(cases))
`

// TestThunderbirdMetricsMatchPy scores random prefs.js files
// (check_thunderbird_prefs, 4 published tasks), filter files
// (check_thunderbird_filter, 2) and mail folders (check_thunderbird_folder,
// 2) here and in OSWorld's thunderbird.py, and wants the same scores (a
// raise is a 0). It runs only when OSWORLD_REF names an OSWorld checkout
// (python3 or OSWORLD_PYTHON, with lxml and openpyxl, runs it).
func TestThunderbirdMetricsMatchPy(t *testing.T) {
	out := osworldpy.Run(t, thunderbirdPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
