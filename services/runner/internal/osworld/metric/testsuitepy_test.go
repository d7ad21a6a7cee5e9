package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// testSuitePyDriver writes folders laid out as the two published tasks
// leave the episode's cache folder (the agent's modules, saved by a
// multi vm_file whose result is only the first of them, beside the task's
// test_suite.py) and scores them with check_python_file_by_test_suite of
// OSWorld's vscode.py, printing osworldpy.Case JSON. argv: metrics
// directory, output directory, seed, number of cases. The suites return
// every kind of value, raise at load or call, miss their function, or
// exit; the modules they import are there, broken, or missing.
const testSuitePyDriver = `
import json, random, os, io, contextlib
stub("PyPDF2")
vscode = load("vscode", os.path.join(sys.argv[1], "vscode.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

RETURNS = ["True", "False", "1", "0", "0.5", "2", "-1", "float('nan')", "float('inf')", "-float('inf')", "None", "''",
           "'x'", "[]", "[0]", "1+0j", "0j", "10**400", "Fraction(1, 3)", "Decimal('0.25')", "b''", "(1,)",
           "board.width == 10", "board.width", "piece.size() / 8", "len(board.rows)"]
MODULES = {
    "settings.py": ["WIDTH = 10\nROWS = 3\n", "WIDTH = 12\nROWS = 3\n", "WIDTH = \n", ""],
    "board.py": ["import settings\nclass Board:\n    def __init__(self):\n        self.width = settings.WIDTH\n        self.rows = [0] * settings.ROWS\n",
                 "class Board:\n    pass\n", "raise ImportError('no')\n"],
    "piece.py": ["def size():\n    return 4\n", "def size():\n    raise ValueError('bad')\n", "import nothing_here\n"],
}
cases = []
for i in range(n):
    d = os.path.join(out, "c%05d" % i)
    os.makedirs(d)
    for name, variants in MODULES.items():
        if rng.random() < 0.85:
            with open(os.path.join(d, name), "w") as f:
                f.write(rng.choice(variants))
    fn = rng.choice(["test", "test", "test", "check", "missing", "value"])
    head = rng.choice(["from fractions import Fraction\nfrom decimal import Decimal\n", "from fractions import Fraction\nfrom decimal import Decimal\nimport board as _b\n",
                       "raise RuntimeError('load')\n", "def broken(:\n", "import sys\nsys.exit(3)\n" if rng.random() < 0.2 else ""])
    body = head + ("def %s():\n    import board, piece\n    board = board.Board()\n    piece = piece\n    return %s\n"
                   % (rng.choice(["test", "check"]), rng.choice(RETURNS)))
    body += rng.choice(["", "value = 3\n", "def check():\n    raise KeyError('k')\n"])
    suite = os.path.join(d, "test_suite.py")
    if rng.random() < 0.97:
        with open(suite, "w") as f:
            f.write(body)
    result = os.path.join(d, "board.py")
    opts = {} if fn == "test" and rng.random() < 0.5 else {"test_function_name": fn}
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            score = float(vscode.check_python_file_by_test_suite(result, suite, **opts))
    except BaseException as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "check_python_file_by_test_suite", "result": result, "expected": suite, "options": opts, "score": score})
print(json.dumps(cases))
`

// TestTestSuiteMatchesVSCodePy runs random test suites through
// check_python_file_by_test_suite (2 published tasks) here, in the Python
// sandbox, and in OSWorld's vscode.py, and wants the same scores (a raise,
// as a suite's sys.exit is there, is a 0). It runs only when OSWORLD_REF
// names an OSWorld checkout, and needs the sandbox.
func TestTestSuiteMatchesVSCodePy(t *testing.T) {
	dir := osworldpy.MetricsDir(t)
	sandboxtest.Need(t)
	out := osworldpy.Run(t, testSuitePyDriver, nil, dir, t.TempDir(), "1", "300")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
