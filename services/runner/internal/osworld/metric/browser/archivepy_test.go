package browser

import (
	"context"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// archivePyDriver writes random pairs of archives (zip, tar, tar.gz and
// tar.bz2, with folders, empty ones among them) of short text files and
// scores them with compare_archive of OSWorld's chrome.py, file_type text
// (vscode.py's compare_text_file on each pair), printing {"metric",
// "result", "expected", "options", "score"} as JSON ({"raise": name} for a
// raise). argv: metrics directory, output directory, seed, number of
// cases.
const archivePyDriver = `
import json, random, os, io, zipfile, tarfile, contextlib
stub("bs4", BeautifulSoup=None, Tag=None); stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz"))
stub("fitz"); stub("imagehash"); stub("borb", pdf=stub("borb.pdf", Document=None, PDF=None)); stub("PyPDF2")
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
load(PKG + ".vscode", os.path.join(sys.argv[1], "vscode.py"))
chrome = load(PKG + ".chrome", os.path.join(sys.argv[1], "chrome.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

NAMES = ["a.txt", "b.txt", "B.txt", "\u00e9.txt", "d/", "d/c.txt", "d/e.txt", "d/sub/f.txt", "slides/", "slides/1.txt", "slides/2.txt", "z/", "x..y.txt", "d/./g.txt"]
TEXTS = [b"hello\n", b"Hello\n", b"hello", b"hello\n\n", b" hello \t\n", b"", b"two\nlines\n", b"TWO\nLINES", b"\xff"]

def members():
    return {name: (None if name.endswith("/") else rng.choice(TEXTS)) for name in rng.sample(NAMES, rng.randrange(len(NAMES) + 1))}

def write(path, ms):
    if path.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as z:
            for name, data in ms.items():
                z.writestr(name, data or b"")
        return
    mode = {".tar": "w", ".tar.gz": "w:gz", ".tgz": "w:gz", ".tar.bz2": "w:bz2"}[next(e for e in [".tar.gz", ".tgz", ".tar.bz2", ".tar"] if path.endswith(e))]
    with tarfile.open(path, mode) as t:
        for name, data in ms.items():
            info = tarfile.TarInfo(name.rstrip("/"))
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))

cases = []
for i in range(n):
    ext = rng.choice([".zip", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2"])
    gold = members()
    pred = dict(gold)
    for _ in range(rng.randrange(3)):
        k = rng.choice(NAMES)
        if rng.random() < 0.5:
            pred.pop(k, None)
        else:
            pred[k] = None if k.endswith("/") else rng.choice(TEXTS)
    g, p = os.path.join(out, "g%05d%s" % (i, ext)), os.path.join(out, "p%05d%s" % (i, ext))
    write(g, gold)
    write(p, pred)
    options = {"file_type": "text"}
    if rng.random() < 0.5:
        options["file_path"] = rng.choice(["d", "slides", "z", "missing"])
    for k in ["ignore_blanks", "ignore_case"]:
        if rng.random() < 0.3:
            options[k] = rng.random() < 0.5
    result = rng.choice([p, p, p, None])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(chrome.compare_archive(result, g, **dict(options)))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "compare_archive", "result": result, "expected": g, "options": options, "score": score})
print(json.dumps(cases))
`

// TestCompareArchiveMatchesChromePy scores random archive pairs with
// compare_archive (3 published tasks, which compare PDFs inside; here text
// files, so that only the unpacking, the listing and the mean are
// compared) here and in OSWorld's chrome.py, and wants the same scores (a
// raise is a 0, or a failed evaluation where the gold archive is at
// fault). It runs only when OSWORLD_REF names an OSWorld checkout
// (see TestURLMetricsMatchChromePy).
func TestCompareArchiveMatchesChromePy(t *testing.T) {
	SetPeers(func(name string) (metric.Func, bool) {
		d, ok := metric.General()[name]
		return d.Fn, ok
	})
	out := osworldpy.Run(t, archivePyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "3000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		got, err := Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
		if _, raised := c.Want(); raised && err != nil && strings.Contains(err.Error(), "expected archive") {
			// The gold archive is the task's: where it lacks file_path the
			// evaluation fails here, as OSWorld's raises.
			return 0, nil
		}
		return got, err
	})
}
