package table

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// csvPyDriver writes random CSV files and scores them with OSWorld's
// table.compare_csv, printing osworldpy.Case JSON. The files mix a BOM,
// every line break str.splitlines() knows, Python's whitespace, case
// beyond ASCII and bytes that are not UTF-8 (read as Latin-1 there).
// argv: metrics directory, output directory, seed, number of cases.
const csvPyDriver = `
import json, random, os, io, contextlib
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
table = load("table", os.path.join(sys.argv[1], "table.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

PIECES = [b"a,b", b"1,2", b"A,B", b" a,b ", b"\xc2\xa0x", b"\xce\xa3\xce\x91\xce\xa3", b"\xc4\xb0", b"\xe9", b"\xff",
          b"\xef\xbb\xbf", b"", b"x"]
BREAKS = [b"\n", b"\r\n", b"\r", b"\x1c", b"\x0b", b"\xc2\x85", b"\xe2\x80\xa8"]
def content():
    return b"".join(rng.choice(PIECES) + rng.choice(BREAKS) for _ in range(rng.randrange(4)))

cases = []
for i in range(n):
    a = os.path.join(out, "a%05d.csv" % i)
    bs = [os.path.join(out, "b%05d_%d.csv" % (i, k)) for k in range(rng.choice([1, 1, 2]))]
    ca = content()
    with open(a, "wb") as f:
        f.write(ca)
    for b in bs:
        with open(b, "wb") as f:
            f.write(ca if rng.random() < 0.3 else content())
    expected = bs[0] if len(bs) == 1 and rng.random() < 0.5 else bs + ([os.path.join(out, "missing.csv")] if rng.random() < 0.2 else [])
    options = {k: rng.choice([True, False]) for k in ["strict", "ignore_case"] if rng.random() < 0.6}
    result = rng.choice([a, a, a, None, os.path.join(out, "missing.csv")])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(table.compare_csv(result, expected, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "compare_csv", "result": result, "expected": expected, "options": options, "score": score})
print(json.dumps(cases))
`

// TestCompareCSVMatchesTablePy scores random CSV files with compare_csv (4
// published tasks) here and in OSWorld's table.py (its encoding
// fallbacks, str.splitlines, strip and lower), and wants the same scores.
// It runs only when OSWORLD_REF names an OSWorld checkout (OSWORLD_PYTHON
// with pandas and openpyxl).
func TestCompareCSVMatchesTablePy(t *testing.T) {
	out := osworldpy.Run(t, csvPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
