package slides

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// slidesPyDriver writes random presentations with python-pptx and scores
// pairs of them with OSWorld's compare_pptx_files under random options.
// argv: the metrics directory, output directory, seed, number of pairs,
// how many of them LibreOffice also saves. Each pair is a presentation
// and the same one rebuilt or changed in one place (a run's text or
// format, a paragraph's alignment, level or bullet, a shape's position,
// size or presence, a slide's background or notes). It prints
// one JSON list of {"a", "b", "opts", "score"} with {"raise": name} for a
// compare_pptx_files that raises.
const slidesPyDriver = `
import copy, io, json, os, random, contextlib
from pptx import Presentation
from pptx.util import Emu, Pt
from pptx.dml.color import RGBColor
from pptx.enum.text import PP_ALIGN
from pptx.enum.shapes import MSO_SHAPE
from PIL import Image

slides = load("slides", os.path.join(sys.argv[1], "slides.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
png = os.path.join(out, "pic.png")
Image.new("RGB", (8, 6), (200, 30, 30)).save(png)

WORDS = ["Title", "Product Comparison", "alpha", "Beta", "  ", "", "x", "Elaborate on what you want to discuss.", "ΣΑΣ", "a\tb"]
FONTS = [None, "Arial", "Liberation Sans", "DejaVu Serif"]
ALIGNS = [None, PP_ALIGN.LEFT, PP_ALIGN.CENTER, PP_ALIGN.RIGHT, PP_ALIGN.JUSTIFY]

def rrun():
    return {"text": rng.choice(WORDS), "bold": rng.choice([None, True, False]), "italic": rng.choice([None, True, False]),
            "underline": rng.choice([None, True, False]), "size": rng.choice([None, 12, 18, 24]), "font": rng.choice(FONTS),
            "color": rng.choice([None, "FF0000", "000000"]), "strike": rng.choice([None, "sngStrike", "noStrike"])}

def rpara():
    return {"runs": [rrun() for _ in range(rng.randrange(3))], "align": rng.randrange(len(ALIGNS)),
            "level": rng.choice([0, 0, 1, 2]), "bullet": rng.choice([None, None, "•", "-"])}

def rshape():
    kind = rng.choice(["textbox", "textbox", "rect", "table", "picture"])
    return {"kind": kind, "x": rng.choice([0, 914400, 1828800, 4572000]), "y": rng.choice([0, 914400, 2743200]),
            "w": rng.choice([914400, 2743200]), "h": rng.choice([457200, 914400]),
            "paras": [rpara() for _ in range(1 + rng.randrange(3))], "rows": 1 + rng.randrange(2), "cols": 1 + rng.randrange(2)}

def rslide():
    return {"layout": rng.choice([0, 1, 5, 6]), "bg": rng.choice([None, None, "FFFFFF", "00FF00"]),
            "notes": rng.choice([None, None, "speaker notes", "  "]), "title": rng.choice([None, "Title", "Product Comparison"]),
            "shapes": [rshape() for _ in range(rng.randrange(4))]}

def rdeck():
    return {"slides": [rslide() for _ in range(1 + rng.randrange(3))]}

def fill(tf, paras):
    for i, p in enumerate(paras):
        para = tf.paragraphs[0] if i == 0 else tf.add_paragraph()
        if ALIGNS[p["align"]] is not None:
            para.alignment = ALIGNS[p["align"]]
        if p["level"]:
            para.level = p["level"]
        if p["bullet"]:
            pPr = para._p.get_or_add_pPr()
            bu = pPr.makeelement("{http://schemas.openxmlformats.org/drawingml/2006/main}buChar", {"char": p["bullet"]})
            pPr.append(bu)
        for r in p["runs"]:
            run = para.add_run()
            run.text = r["text"]
            f = run.font
            f.bold, f.italic, f.underline = r["bold"], r["italic"], r["underline"]
            if r["size"]:
                f.size = Pt(r["size"])
            if r["font"]:
                f.name = r["font"]
            if r["color"]:
                f.color.rgb = RGBColor.from_string(r["color"])
            if r["strike"]:
                run._r.get_or_add_rPr().set("strike", r["strike"])

def build(deck, path):
    prs = Presentation()
    for s in deck["slides"]:
        slide = prs.slides.add_slide(prs.slide_layouts[s["layout"]])
        if s["bg"]:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = RGBColor.from_string(s["bg"])
        if s["notes"] is not None:
            slide.notes_slide.notes_text_frame.text = s["notes"]
        if s["title"] and slide.shapes.title is not None:
            slide.shapes.title.text = s["title"]
        for sh in s["shapes"]:
            x, y, w, h = Emu(sh["x"]), Emu(sh["y"]), Emu(sh["w"]), Emu(sh["h"])
            if sh["kind"] == "textbox":
                fill(slide.shapes.add_textbox(x, y, w, h).text_frame, sh["paras"])
            elif sh["kind"] == "rect":
                fill(slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, x, y, w, h).text_frame, sh["paras"])
            elif sh["kind"] == "table":
                t = slide.shapes.add_table(sh["rows"], sh["cols"], x, y, w, h).table
                for c in t.iter_cells():
                    fill(c.text_frame, sh["paras"][:1])
            else:
                slide.shapes.add_picture(png, x, y, w, h)
    prs.save(path)

def mutate(deck):
    d = copy.deepcopy(deck)
    s = rng.choice(d["slides"])
    # Most changes are to runs and paragraphs, which the metric checks
    # property by property.
    k = rng.choice([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8])
    runs = [r for sl in d["slides"] for sh in sl["shapes"] for p in sh["paras"] for r in p["runs"]]
    paras = [p for sl in d["slides"] for sh in sl["shapes"] for p in sh["paras"]]
    if k == 0 and runs:
        r = rng.choice(runs)
        key = rng.choice(list(r))
        r[key] = rng.choice([v for v in [rrun()[key] for _ in range(8)] if v != r[key]] or [r[key]])
    elif k == 1 and paras:
        p = rng.choice(paras); key = rng.choice(["align", "level", "bullet"]); p[key] = rpara()[key]
    elif k == 2 and s["shapes"]:
        sh = rng.choice(s["shapes"]); key = rng.choice(["x", "y", "w", "h"]); sh[key] += rng.choice([1, 5000, 914400])
    elif k == 3 and s["shapes"]:
        s["shapes"].pop(rng.randrange(len(s["shapes"])))
    elif k == 4:
        s["shapes"].append(rshape())
    elif k == 5:
        s["bg"] = rslide()["bg"]
    elif k == 6:
        s["notes"] = rslide()["notes"]
    elif k == 7:
        s["title"] = rslide()["title"]
    else:
        d["slides"].append(rslide())
    return d

OPTS = ["examine_number_of_slides", "examine_shape", "examine_text", "examine_indent", "examine_font_name", "examine_font_size",
        "examine_font_bold", "examine_font_italic", "examine_color_rgb", "examine_font_underline", "examine_strike_through",
        "examine_alignment", "examine_title_bottom_position", "examine_table_bottom_position", "examine_run_count",
        "examine_right_position", "examine_top_position", "examine_shape_for_shift_size", "examine_image_size",
        "examine_modify_height", "examine_bullets", "examine_background_color", "examine_note"]
pairs = []
for i in range(n):
    a = rdeck()
    b = a if rng.randrange(3) == 0 else mutate(a)
    pa, pb = os.path.join(out, "a%03d.pptx" % i), os.path.join(out, "b%03d.pptx" % i)
    build(a, pa); build(b, pb)
    pairs.append((pa, pb))
# The first pairs again as LibreOffice Impress saves them, which is what
# an agent's file is: against each other and against python-pptx's.
lo = os.path.join(out, "lo")
files = [p for pair in pairs[:int(sys.argv[5])] for p in pair]
if files:
    import subprocess
    subprocess.run(["soffice", "-env:UserInstallation=file://" + os.path.join(out, "profile"), "--headless",
                    "--convert-to", "pptx", "--outdir", lo] + files, check=True, capture_output=True)
    for pa, pb in pairs[:int(sys.argv[5])]:
        la, lb = os.path.join(lo, os.path.basename(pa)), os.path.join(lo, os.path.basename(pb))
        pairs += [(la, lb), (la, pa), (pb, lb)]
jobs = []
for pa, pb in pairs:
    opts = {k: rng.random() < 0.5 for k in OPTS if rng.random() < 0.25}
    if rng.random() < 0.1:
        opts["approximately_tolerance"] = rng.choice([0.0, 0.01, 0.5])
    opts["enable_debug"] = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(slides.compare_pptx_files(pa, pb, **opts))
    except Exception as e:
        score = {"raise": type(e).__name__}
    jobs.append({"a": pa, "b": pb, "opts": opts, "score": score})
print(json.dumps(jobs))
`

// TestComparePptxMatchesSlidesPy scores random presentation pairs, which
// python-pptx writes, with compare_pptx_files here and with OSWorld's own
// slides.py, and wants the same scores (a raise in slides.py is a 0).
// OSWorld's code is not ours to commit and python-pptx is not in Debian,
// so it runs only when OSWORLD_REF names an OSWorld checkout and
// PYTHON_PPTX a python-pptx 1.0.2 src directory (python3, or
// OSWORLD_PYTHON, with lxml, PIL, XlsxWriter and typing_extensions).
func TestComparePptxMatchesSlidesPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	src := os.Getenv("PYTHON_PPTX")
	if src == "" {
		t.Skip("PYTHON_PPTX does not name a python-pptx source tree")
	}
	// LibreOffice saves a share of the pairs when it is here, as it is in
	// CI's image of this machine.
	lo := "0"
	if _, err := exec.LookPath("soffice"); err == nil {
		lo = "40"
	}
	dir := t.TempDir()
	out := osworldpy.Run(t, slidesPyDriver, []string{src}, metrics, dir, "7", "600", lo)
	var jobs []struct {
		A, B  string
		Opts  map[string]any
		Score any
	}
	if err := json.Unmarshal(out, &jobs); err != nil {
		t.Fatalf("slides.py's answer: %v: %.300s", err, out)
	}
	fn := Metrics()["compare_pptx_files"].Fn
	bad := 0
	seen := map[string]int{}
	for _, j := range jobs {
		seen[fmt.Sprint(j.Score)]++
		delete(j.Opts, "enable_debug")
		want, ok := j.Score.(float64)
		if !ok {
			want = 0 // slides.py raised: OSWorld's run has no reward
		}
		got, err := fn(context.Background(), j.A, j.B, true, j.Opts)
		if err != nil || math.Abs(got-want) > 1e-9 {
			if bad++; bad <= 5 {
				t.Errorf("compare_pptx_files(%s, %s, %v) = %v, %v; slides.py: %v", filepath.Base(j.A), filepath.Base(j.B), j.Opts, got, err, j.Score)
			}
		}
	}
	t.Logf("slides.py's scores: %v", seen)
	if bad > 0 {
		t.Errorf("%d of %d scores differ from slides.py (files kept in %s)", bad, len(jobs), dir)
	}
}
