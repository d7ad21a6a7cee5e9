package media

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// pdfPagesPyDriver writes random PDFs by hand, each with a page tree made
// of what pypdf's _flatten tells apart (typed and untyped nodes, a /Type
// that is no name or another name, kids that are null, empty, a number or
// a page listed twice, a node without /Kids or with /Kids that is no
// array, a loop, a chain deeper than pypdf walks, a declared /Count that
// lies), some encrypted by pypdf, and files that are no PDF, and scores
// them with pdf.py's check_pdf_pages against random relations, printing
// osworldpy.Case JSON. argv: metrics directory, output directory, seed,
// number of cases.
const pdfPagesPyDriver = `
import json, random, os, io, contextlib
import pypdf
pdf = load("pdf", os.path.join(sys.argv[1], "pdf.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

def write(path, objs, extra=b""):
    data = b"%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(data))
        data += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(data)
    data += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    data += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    data += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, extra, xref)
    with open(path, "wb") as f:
        f.write(data)

def tree():
    # Objects 1 (catalog) and 2 (the root of the page tree) first; the
    # rest are made as the tree grows.
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", None]
    pages = []

    def node(depth, parent):
        k = rng.randrange(12)
        if k == 5 and pages and depth <= 3:
            return b"%d 0 R" % rng.choice(pages)  # a page listed twice
        if k == 6 and depth <= 3:
            return rng.choice([b"null", b"<< >>", b"0", b"5", b"(text)", b"[ ]"])
        i = len(objs) + 1
        objs.append(None)
        if depth > 3 or k < 5 or k == 5 or k == 6:
            kind = rng.choice([b"/Type /Page ", b"/Type /Page ", b"", b"/Type /Foo ", b"/Type (Page) "])
            objs[i - 1] = b"<< " + kind + b"/Parent %d 0 R /MediaBox [0 0 10 10] >>" % parent
            pages.append(i)
            return b"%d 0 R" % i
        kids = b" ".join(node(depth + 1, i) for _ in range(rng.randrange(4)))
        kind = rng.choice([b"/Type /Pages ", b"/Type /Pages ", b"", b"/Type (Pages) "])
        kidsEntry = rng.choice([b"/Kids [ " + kids + b" ] "] * 6 + [b"", b"/Kids null ", b"/Kids 3 "])
        if k == 7:
            kidsEntry = b"/Kids [ " + kids + b" %d 0 R ] " % rng.choice([2, parent])  # a loop
        objs[i - 1] = b"<< " + kind + kidsEntry + b"/Count %d /Parent %d 0 R >>" % (rng.randrange(9), parent)
        return b"%d 0 R" % i

    kids = b" ".join(node(1, 2) for _ in range(rng.randrange(1, 5)))
    if rng.random() < 0.05:
        # A chain deeper than pypdf's walk.
        first = len(objs) + 1
        depth = rng.choice([98, 99, 100, 101, 150])
        for d in range(depth):
            objs.append(b"<< /Type /Pages /Kids [ %d 0 R ] /Count 1 >>" % (first + d + 1))
        objs.append(b"<< /Type /Page /MediaBox [0 0 10 10] >>")
        kids += b" %d 0 R" % first
    objs[1] = b"<< /Type /Pages /Kids [ " + kids + b" ] /Count %d >>" % rng.randrange(9)
    return objs

def make(i):
    path = os.path.join(out, "p%05d.pdf" % i)
    k = rng.random()
    if k < 0.05:
        with open(path, "wb") as f:
            f.write(rng.choice([b"", b"not a pdf", b"%PDF-1.4\n"]))
        return path
    if k < 0.08:
        return path + ".missing"
    write(path, tree())
    if k < 0.15:
        try:
            w = pypdf.PdfWriter(clone_from=path)
            w.encrypt("", algorithm="RC4-40")
            w.write(path)
        except Exception:
            pass
    return path

cases = []
for i in range(n):
    path = make(i) if rng.random() < 0.97 else None
    rule = {"relation": rng.choice(["eq", "ne", "lt", "le", "gt", "ge"]), "ref_value": rng.choice([0, 1, 2, 3, 5, 1.0, 2.5])}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(pdf.check_pdf_pages(path, rule))
    except BaseException as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "check_pdf_pages", "result": path, "expected": rule, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestCheckPDFPagesMatchesPdfPy scores random page trees with
// check_pdf_pages here and in OSWorld's pdf.py, which counts pages with
// pypdf, and wants the same scores. OSWorld does not pin pypdf, so it
// gets the newest: PYPDF names a checkout of pypdf's source (pure Python;
// Debian's python3-pypdf is 3.4, which walks page trees otherwise). It
// runs only when OSWORLD_REF names an OSWorld checkout.
func TestCheckPDFPagesMatchesPdfPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	needTools(t, "mutool")
	path := pythonPathFrom(t, "PYPDF", "import pypdf, fitz", "pypdf (PYPDF names its source) and PyMuPDF (python3-fitz)")
	out := osworldpy.Run(t, pdfPagesPyDriver, path, metrics, t.TempDir(), "1", "1500")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()["check_pdf_pages"].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
