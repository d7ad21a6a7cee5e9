package slides

import (
	"context"
	"os"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// deckChecksPyDriver builds random presentations with python-pptx (slide
// sizes either way round, slide backgrounds solid, inherited from a master
// that is solid or not, or another fill; a picture placed and sized at
// random, or stretched over the slide) and scores them with
// check_slide_orientation_Portrait, evaluate_presentation_fill_to_rgb_distance
// and check_image_stretch_and_center of OSWorld's slides.py, printing
// osworldpy.Case JSON. argv: metrics directory, output directory, seed,
// number of cases.
const deckChecksPyDriver = `
import json, random, os, io, contextlib
from pptx import Presentation
from pptx.util import Emu, Inches
from pptx.dml.color import RGBColor
from PIL import Image
slides = load("slides", os.path.join(sys.argv[1], "slides.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
pngs = []
for k, c in enumerate([(200, 30, 30), (30, 30, 200)]):
    pngs.append(os.path.join(out, "pic%d.png" % k))
    Image.new("RGB", (8, 6), c).save(pngs[-1])
COLORS = ["FFFFFF", "0000FF", "0000FE", "FF0000", "000000"]
def build(path, seed_pic=None):
    prs = Presentation()
    w, h = pick([(Inches(10), Inches(7.5)), (Inches(7.5), Inches(10)), (Inches(13.333), Inches(7.5)), (Inches(8), Inches(8))])
    prs.slide_width, prs.slide_height = w, h
    if rng.random() < 0.5:
        mf = prs.slide_master.background.fill
        k = rng.randrange(3)
        if k == 0:
            mf.solid(); mf.fore_color.rgb = RGBColor.from_string(pick(COLORS))
        elif k == 1:
            mf.gradient()
    for _ in range(1 + rng.randrange(3)):
        s = prs.slides.add_slide(prs.slide_layouts[pick([0, 5, 6])])
        k = rng.randrange(4)
        if k == 0:
            s.background.fill.solid(); s.background.fill.fore_color.rgb = RGBColor.from_string(pick(COLORS))
        elif k == 1:
            s.background.fill.background()
        elif k == 2:
            s.background.fill.patterned()
        pic = seed_pic if seed_pic is not None else pick(pngs)
        for _ in range(rng.randrange(3)):
            if rng.random() < 0.5:
                # Stretched over the slide, give or take.
                d = pick([0, Inches(0.2), Inches(0.6)])
                s.shapes.add_picture(pic, Emu(pick([0, d])), Emu(pick([0, d])), Emu(w - pick([0, d])), Emu(h - pick([0, d])))
            else:
                s.shapes.add_picture(pic, Emu(rng.randrange(int(w))), Emu(rng.randrange(int(h))), Emu(Inches(2)), Emu(Inches(1)))
    prs.save(path)
cases = []
for i in range(n):
    m = pick(["check_slide_orientation_Portrait", "evaluate_presentation_fill_to_rgb_distance", "check_image_stretch_and_center"])
    a = os.path.join(out, "a%05d.pptx" % i)
    build(a)
    args, expected = [a], None
    if m == "evaluate_presentation_fill_to_rgb_distance":
        expected = {"rgb": [0, 0, 255]}
        if rng.random() < 0.7:
            expected["original_rgb"] = [255, 255, 255]
        args.append(expected)
    elif m == "check_image_stretch_and_center":
        b = os.path.join(out, "b%05d.pptx" % i)
        build(b)
        expected = b
        args.append(b)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(getattr(slides, m)(*args))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": a, "expected": expected, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestDeckChecksMatchSlidesPy scores random python-pptx presentations with
// check_slide_orientation_Portrait, evaluate_presentation_fill_to_rgb_distance
// and check_image_stretch_and_center (1 published task each) here and in
// OSWorld's slides.py on python-pptx 1.x, and wants the same scores (a
// raise is a 0). It runs as TestComparePptxMatchesSlidesPy does
// (OSWORLD_REF, PYTHON_PPTX).
func TestDeckChecksMatchSlidesPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	src := os.Getenv("PYTHON_PPTX")
	if src == "" {
		t.Skip("PYTHON_PPTX does not name a python-pptx source tree")
	}
	out := osworldpy.Run(t, deckChecksPyDriver, []string{src}, metrics, t.TempDir(), "1", "1500")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, c.Expected != nil, c.Options)
	})
}
