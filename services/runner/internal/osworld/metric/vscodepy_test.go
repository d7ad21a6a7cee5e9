package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// vscodePyDriver writes random files and scores them with the file metrics
// of OSWorld's vscode.py, printing {"metric", "result", "expected",
// "options", "score"} as JSON ({"raise": name} for a raise). argv: metrics
// directory, output directory, seed, number of cases. The files are made
// of JSON, a comment line, Python's whitespace and newlines, case, numbers
// float() reads or refuses, and now and then in the result a byte that is
// not UTF-8.
const vscodePyDriver = `
import json, random, os, io, contextlib
stub("PyPDF2")
vscode = load("vscode", os.path.join(sys.argv[1], "vscode.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

PIECES = [b'{"a": 1}', b'{"a": 1, "b": [1, 2]}', b'[{"key": "ctrl+k", "command": "x"}]', b'{"b": {"c": true}}',
          b"// comment\n", b"\n", b"\r\n", b"\r", b" ", b"\t", b"\xc2\xa0", b"\x1c", b"Hello", b"hello", b"HELLO",
          b"3.14", b" 3.14159 ", b"1e3", b"nan", b"inf", b"1_000", b"-0", b"answer: 3.14", b'"a"', b"\xff",
          b"\xce\xa3", b"\xc4\xb0", b"{", b"}", b","]
def content():
    return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(5)))
def value():
    return rng.choice([1, "x", True, None, [1, 2], {"c": True}, {"key": "ctrl+k", "command": "x"}, "ctrl+k"])

cases = []
for i in range(n):
    a, b = os.path.join(out, "a%05d.txt" % i), os.path.join(out, "b%05d.txt" % i)
    # The expected file is the task's: always UTF-8 (one that is not
    # fails the evaluation here, as a task's own fault).
    m = rng.choice(["check_json_settings", "check_json_keybindings", "compare_text_file", "compare_config",
                    "compare_result_files", "is_extension_installed", "compare_zip_files"])
    ca = content()
    if m in ("check_json_settings", "check_json_keybindings") and rng.random() < 0.7:
        # Settings and keybindings as VS Code writes them: JSON, the
        # keybindings after a comment line.
        obj = {k: value() for k in ["a", "b"] if rng.random() < 0.7}
        if m == "check_json_keybindings":
            obj = [value() for _ in range(rng.randrange(3))]
        ca = rng.choice([b"", b"// comment\n", b" "]) + json.dumps(obj).encode() + rng.choice([b"", b"\n", b","])
    cb = ca.replace(b"\xff", b"") if rng.random() < 0.3 else content().replace(b"\xff", b"")
    for p, c in [(a, ca), (b, cb)]:
        with open(p, "wb") as f:
            f.write(c)
    result, expected, options = rng.choice([a, a, a, None]), b, {}
    if m == "check_json_settings":
        expected = {"expected": {rng.choice(["a", "b"]): value() for _ in range(rng.randrange(3))}}
    elif m == "check_json_keybindings":
        expected = {"expected": value()}
    elif m == "compare_text_file":
        options = {k: rng.choice([True, False]) for k in ["ignore_blanks", "ignore_case"] if rng.random() < 0.6}
    elif m == "compare_zip_files":
        # Archives of a few members (folders, case, the same name twice);
        # no PDFs, which vscode.py reads with PyPDF2, not here.
        import zipfile
        names = ["a.txt", "A.txt", "d/", "d/b.py", "main.py", "main.py"]
        # A folder's entry holds no data, as zip tools write it (Go's zip
        # reader refuses one that does; Python's reads it).
        members = [(nm, b"" if nm.endswith("/") else rng.choice([b"", b"x", b"print(1)\n", b"\xff"])) for nm in rng.sample(names, rng.randrange(4))]
        def write_zip(path, ms):
            with zipfile.ZipFile(path, "w") as z:
                for nm, data in ms:
                    z.writestr(nm, data)
        write_zip(a, members if rng.random() < 0.5 else [(nm, d if nm.endswith("/") else rng.choice([d, b"y"])) for nm, d in members])
        write_zip(b, members)
        if rng.random() < 0.1:
            with open(a, "wb") as f:
                f.write(b"not a zip")
        result, expected = rng.choice([a, a, a, None]), b
    elif m == "is_extension_installed":
        # The output of "code --list-extensions | grep NAME", or of ls.
        result = rng.choice([None, "", "ms-python.python\n", "ms-python.python\nmattn.lisp\n", "MS-Python.Python\n", "project.code-workspace\n"])
        expected = {"type": rng.choice(["contain", "not_contain", "other"]),
                    "expected": rng.choice(["ms-python.python", "mattn.lisp", "project.code-workspace", "", "\n"])}
    elif m == "compare_config":
        expected = {"expected": rng.choice([cb.decode("utf-8", "replace"), '{"a": 1}', '{"b": {}}', "", "Hello"])}
        options = {k: rng.choice([True, False]) for k in ["containment_ok"] if rng.random() < 0.5}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(getattr(vscode, m)(result, expected, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": expected, "options": options, "score": score})
print(json.dumps(cases))
`

// TestFileMetricsMatchVSCodePy scores random files with check_json_settings
// (7 published tasks), check_json_keybindings, compare_text_file (6),
// compare_config, compare_result_files, is_extension_installed (6) and
// compare_zip_files here and in OSWorld's vscode.py,
// and wants the same scores (a raise is a 0). It runs only when
// OSWORLD_REF names an OSWorld checkout (python3 or OSWORLD_PYTHON runs
// it), as OSWorld's code is not ours to commit.
func TestFileMetricsMatchVSCodePy(t *testing.T) {
	out := osworldpy.Run(t, vscodePyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		got, err := General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
		if _, raised := c.Want(); raised && err != nil && c.Metric == "is_extension_installed" {
			return 0, nil // NotImplementedError on a rule type of the task's: the evaluation fails
		}
		return got, err
	})
}
