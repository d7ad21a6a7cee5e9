package slides

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// slidesPyWithoutPptx loads OSWorld's slides.py for checks that read XML
// and never python-pptx, whose imports it stubs (python-pptx is not in
// Debian).
const slidesPyWithoutPptx = `
import os
stub("pptx", Presentation=None); stub("pptx.util", Inches=None); stub("pptx.enum"); stub("pptx.enum.shapes", MSO_SHAPE_TYPE=None)
slides = load("slides", os.path.join(sys.argv[1], "slides.py"))
`

// configPyDriver writes random LibreOffice registry files and accessibility
// trees and scores them with check_presenter_console_disable and
// check_left_panel of OSWorld's slides.py (ElementTree), printing
// osworldpy.Case JSON. argv: metrics directory, output directory, seed,
// number of cases.
const configPyDriver = slidesPyWithoutPptx + `
import json, random, os, io, contextlib
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
OOR = 'xmlns:oor="http://openoffice.org/2001/registry"'
def item(save):
    if save:
        path = pick(["/org.openoffice.Office.Common/Save/Document", "/org.openoffice.Office.Common/Save/Document", "/org.openoffice.Office.Common/Save"])
    else:
        path = pick(["/org.openoffice.Office.Impress/Misc/Start", "/org.openoffice.Office.Impress/Misc", "/org.openoffice.Office.Impress/Misc/Start/"])
    props = []
    for _ in range(rng.randrange(3)):
        if save:
            name = pick(["AutoSaveTimeIntervall", "AutoSaveTimeIntervall", "AutoSave"])
            values = "".join(pick(["<value>10</value>", "<value>3</value>", "<value> 10 </value>", "<value>+10</value>", "<value>1_0</value>",
                                   "<value>10.0</value>", "<value>ten</value>", "<value/>", "<value>1<x/>0</value>", "<node><value>10</value></node>", ""])
                             for _ in range(rng.randrange(3)))
        else:
            name = pick(["EnablePresenterScreen", "EnablePresenterScreen", "Other"])
            values = "".join(pick(["<value>false</value>", "<value>FALSE</value>", "<value>true</value>", "<value/>", "<value> false</value>", "<value>False<x/></value>", ""]) for _ in range(rng.randrange(3)))
        props.append('<prop oor:name="%s" oor:op="fuse">%s</prop>' % (name, values))
    wrap = pick(["%s", "<node>%s</node>"])
    return '<item oor:path="%s">%s</item>' % (path, wrap % "".join(props))
def xcu(save):
    k = rng.randrange(12)
    if k == 0: return "not xml"
    if k == 1: return ""
    body = "".join(item(save) for _ in range(rng.randrange(4)))
    root = pick(["oor:items", "oor:items", "item"])
    return '<?xml version="1.0" encoding="UTF-8"?><%s %s>%s</%s>' % (root, OOR, body, root)
def tree():
    frames = "".join('<document-frame name="%s"/>' % pick(["Slides View", "Outline View", "slides view", ""]) for _ in range(rng.randrange(3)))
    root = pick(["desktop-frame", "document-frame"])
    return pick(['<%s name="Slides View">%s</%s>' % (root, frames, root), '<%s>%s</%s>' % (root, frames, root), '<%s><panel>%s</panel></%s>' % (root, frames, root), "<oops"])
cases = []
for i in range(n):
    m = pick(["check_presenter_console_disable", "check_left_panel", "check_auto_saving_time"])
    rules = None
    if m == "check_left_panel":
        result = tree()
    else:
        result = os.path.join(out, "r%05d.xcu" % i)
        with open(result, "w") as f:
            f.write(xcu(m == "check_auto_saving_time"))
        if rng.random() < 0.02:
            result = os.path.join(out, "missing.xcu")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if m == "check_auto_saving_time":
                rules = {"minutes": pick([10, 3, 10.0, True])}
                score = slides.check_auto_saving_time(result, rules)
                score = None if score is None else float(score)
            else:
                score = float(getattr(slides, m)(result))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": rules, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestConfigMetricsMatchSlidesPy scores random LibreOffice registry files
// with check_presenter_console_disable and check_auto_saving_time (1
// published task each) and accessibility trees with check_left_panel (1)
// here and in OSWorld's slides.py, and wants the same scores (a raise, or
// a None the check returns, is a 0). It runs only when OSWORLD_REF names
// an OSWorld checkout.
func TestConfigMetricsMatchSlidesPy(t *testing.T) {
	out := osworldpy.Run(t, configPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, false, c.Options)
	})
}
