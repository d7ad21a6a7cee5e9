package slides

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// xmlChecksPyDriver writes random presentations' slide and master XML
// (transitions of every kind and none, placeholders with and without
// colours, colours in runs and elsewhere, values that are not colours)
// into zip files, and scores them with check_transition and
// check_page_number_colors of OSWorld's slides.py (zipfile, ElementTree),
// printing osworldpy.Case JSON. argv: metrics directory, output directory,
// seed, number of cases.
const xmlChecksPyDriver = slidesPyWithoutPptx + `
import json, random, os, io, contextlib, zipfile
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
NS = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
COLORS = ["FF0000", "C00000", "0000FF", "00B050", "000000", "333333", "FF00FF", "ff0000", "#FF0000", "F00", "GG0000", ""]
def slide():
    tr = pick(["", "<p:transition><p:dissolve/></p:transition>", "<p:transition spd='slow'><p:fade/></p:transition>",
               "<p:transition><p:wipe dir='r'/></p:transition>", "<p:transition/>",
               "<mc:AlternateContent xmlns:mc='http://schemas.openxmlformats.org/markup-compatibility/2006'><mc:Choice Requires='p14'><p:transition><p:dissolve/></p:transition></mc:Choice></mc:AlternateContent>",
               "<p:transition><p:x><p:dissolve/></p:x></p:transition>"])
    return '<p:sld %s><p:cSld><p:spTree/></p:cSld>%s</p:sld>' % (NS, tr)
def color():
    return '<a:solidFill><a:srgbClr val="%s"/></a:solidFill>' % pick(COLORS)
def ph():
    typ = pick(["sldNum", "ftr", "dt", "title", "body", None])
    attr = ' type="%s"' % typ if typ else ""
    inner = pick(["", color(), "<a:x>%s</a:x>" % color()])
    return '<p:sp><p:nvSpPr><p:nvPr><p:ph%s>%s</p:ph></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:rPr>%s</a:rPr><a:t>1</a:t></a:r></a:p></p:txBody></p:sp>' % (
        attr, inner, pick(["", color()]))
def master():
    return '<p:sldMaster %s><p:cSld><p:bg><p:bgPr>%s</p:bgPr></p:bg><p:spTree>%s</p:spTree></p:cSld></p:sldMaster>' % (
        NS, pick(["", color()]), "".join(ph() for _ in range(rng.randrange(4))))
cases = []
for i in range(n):
    p = os.path.join(out, "d%05d.pptx" % i)
    with zipfile.ZipFile(p, "w") as z:
        for k in range(rng.randrange(4)):
            z.writestr("ppt/slides/slide%d.xml" % (k + 1), slide())
        if rng.random() < 0.9:
            z.writestr("ppt/slideMasters/slideMaster1.xml", master())
    m = pick(["check_transition", "check_page_number_colors"])
    if m == "check_transition":
        rules = {"slide_idx": pick([0, 0, 1, 2]), "transition_type": pick(["dissolve", "fade", "wipe"])}
    else:
        rules = {"color": pick(["red", "blue", "green", "black", "purple"])}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(getattr(slides, m)(p, rules))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": p, "expected": rules, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestXMLChecksMatchSlidesPy scores random slide and master XML with
// check_transition (1 published task) and check_page_number_colors (1,
// with its four fallbacks for where the number's colour is) here and in
// OSWorld's slides.py, and wants the same scores (a raise is a 0). It runs
// only when OSWORLD_REF names an OSWorld checkout.
func TestXMLChecksMatchSlidesPy(t *testing.T) {
	out := osworldpy.Run(t, xmlChecksPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
