package docs

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// defaultFontPyDriver writes random LibreOffice registry files and scores
// them with find_default_font of OSWorld's docs.py (ElementTree), printing
// osworldpy.Case JSON. argv: metrics directory, output directory, seed,
// number of cases.
const defaultFontPyDriver = `
import json, random, os, io, contextlib
stub("easyocr")
stub("skimage", color=stub("skimage.color", deltaE_ciede2000=None, rgb2lab=None))
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
docs = load("docs", os.path.join(sys.argv[1], "docs.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
FONTS = ["Times New Roman", "Liberation Serif", "", " Times New Roman", "times new roman"]
def item():
    path = pick(["/org.openoffice.Office.Writer/DefaultFont", "/org.openoffice.Office.Writer/DefaultFont", "/org.openoffice.Office.Writer"])
    props = []
    for _ in range(rng.randrange(3)):
        name = pick(["Standard", "Standard", "Heading"])
        values = "".join(pick(["<value>%s</value>" % pick(FONTS), "<value/>", "<value>%s<x/>tail</value>" % pick(FONTS), "<v>x</v>"]) for _ in range(rng.randrange(3)))
        props.append('<prop oor:name="%s" oor:op="fuse">%s</prop>' % (name, values))
    wrap = pick(["%s", "<node>%s</node>"])
    return '<item oor:path="%s">%s</item>' % (path, wrap % "".join(props))
def xcu():
    k = rng.randrange(12)
    if k == 0: return "not xml"
    if k == 1: return ""
    body = "".join(item() for _ in range(rng.randrange(4)))
    root = pick(["oor:items", "oor:items", "item"])
    return '<?xml version="1.0" encoding="UTF-8"?><%s xmlns:oor="http://openoffice.org/2001/registry">%s</%s>' % (root, body, root)
cases = []
for i in range(n):
    result = os.path.join(out, "r%05d.xcu" % i)
    with open(result, "w") as f:
        f.write(xcu())
    if rng.random() < 0.05:
        result = None
    rules = {"font_name": pick(FONTS[:2])}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(docs.find_default_font(result, rules))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "find_default_font", "result": result, "expected": rules, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestDefaultFontMatchesDocsPy scores random LibreOffice registry files
// with find_default_font (1 published task) here and in OSWorld's docs.py,
// and wants the same scores. It runs as TestMetricsMatchDocsPy does
// (OSWORLD_REF, PYTHON_DOCX).
func TestDefaultFontMatchesDocsPy(t *testing.T) {
	metrics, src := pythonDocx(t)
	out := osworldpy.Run(t, defaultFontPyDriver, []string{src}, metrics, t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
