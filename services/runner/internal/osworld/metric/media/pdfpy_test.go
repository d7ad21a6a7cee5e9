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
	path := pythonPathFrom(t, "import pypdf, fitz", "pypdf (PYPDF names its source) and PyMuPDF (python3-fitz)", "PYPDF")
	out := osworldpy.Run(t, pdfPagesPyDriver, path, metrics, t.TempDir(), "1", "1500")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()["check_pdf_pages"].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}

// pdfImagesPyDriver makes random PDFs of random images, with PIL (each
// image a page, as a JPEG or with Flate) and with PyMuPDF (insert_image
// of PNG or JPEG bytes, some images twice, some pages without images),
// each with a variant (the same images the other way, mirrored, darker,
// flat, another image, one image fewer or more, none), and files that
// are no PDF, and scores the pairs with chrome.py's compare_pdf_images,
// through PyMuPDF and imagehash, printing osworldpy.Case JSON. argv:
// metrics directory, output directory, seed, number of cases.
const pdfImagesPyDriver = `
import json, random, os, io, contextlib
import fitz
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
stub("bs4", BeautifulSoup=None, Tag=None); stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz"))
stub("borb", pdf=stub("borb.pdf", Document=None, PDF=None)); stub("PyPDF2")
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
chrome = load(PKG + ".chrome", os.path.join(sys.argv[1], "chrome.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

def image():
    w, h = rng.choice([16, 33, 64, 120]), rng.choice([16, 40, 64, 90])
    img = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    if rng.random() < 0.85:
        d = ImageDraw.Draw(img)
        for _ in range(rng.randrange(1, 6)):
            x0, y0 = rng.randrange(w), rng.randrange(h)
            d.rectangle([x0, y0, x0 + rng.randrange(w), y0 + rng.randrange(h)], fill=tuple(rng.randrange(256) for _ in range(3)))
    return img.convert(rng.choice(["RGB", "RGB", "L", "RGBA", "P"]))

def variant(imgs):
    k = rng.randrange(8)
    imgs = list(imgs)
    if k == 0 and imgs:
        i = rng.randrange(len(imgs)); imgs[i] = ImageOps.mirror(imgs[i])
    elif k == 1 and imgs:
        i = rng.randrange(len(imgs)); imgs[i] = ImageEnhance.Brightness(imgs[i].convert("RGB")).enhance(rng.choice([0.7, 0.95]))
    elif k == 2 and imgs:
        i = rng.randrange(len(imgs)); imgs[i] = image()
    elif k == 3 and imgs:
        imgs.pop(rng.randrange(len(imgs)))
    elif k == 4:
        imgs.append(image())
    elif k == 5:
        imgs = []
    return imgs

count = 0
def make(imgs):
    global count
    count += 1
    path = os.path.join(out, "d%05d.pdf" % count)
    if imgs and rng.random() < 0.4:
        # PIL: one page per image; RGBA and P are converted as PIL does.
        first = imgs[0] if imgs[0].mode in ("RGB", "L") else imgs[0].convert("RGB")
        rest = [im if im.mode in ("RGB", "L") else im.convert("RGB") for im in imgs[1:]]
        first.save(path, "PDF", save_all=True, append_images=rest, resolution=72)
        return path
    doc = fitz.open()
    page = doc.new_page(width=200, height=200)
    for i, im in enumerate(imgs):
        if rng.random() < 0.3:
            page = doc.new_page(width=200, height=200)
        buf = io.BytesIO()
        fmt = "JPEG" if im.mode in ("RGB", "L") and rng.random() < 0.3 else "PNG"
        im.save(buf, fmt, quality=90)
        page.insert_image(fitz.Rect(10, 10 + i, 100, 100 + i), stream=buf.getvalue())
    if not imgs:
        page.insert_text((20, 50), "no images")
    doc.save(path)
    return path

cases = []
for i in range(n):
    if rng.random() < 0.06:
        a = os.path.join(out, "x%05d.pdf" % i)
        if rng.random() < 0.5:
            with open(a, "wb") as f:
                f.write(b"not a pdf")
        b = make([image()])
    else:
        imgs = [image() for _ in range(rng.randrange(0, 4))]
        a = make(imgs)
        b = make(variant(imgs) if rng.random() < 0.7 else imgs)
    if rng.random() < 0.5:
        a, b = b, a
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(chrome.compare_pdf_images(a, b))
    except BaseException as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "compare_pdf_images", "result": a, "expected": b, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestComparePDFImagesMatchesChromePy scores random pairs of PDFs of
// images with compare_pdf_images here and in OSWorld's chrome.py, which
// extracts the images with PyMuPDF (Debian's python3-fitz) and hashes them
// with imagehash (IMAGEHASH names its source), and wants the same scores.
// It runs only when OSWORLD_REF names an OSWorld checkout.
func TestComparePDFImagesMatchesChromePy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	needTools(t, "mutool")
	path := pythonPathFrom(t, "import fitz, imagehash, scipy.fftpack",
		"PyMuPDF (python3-fitz), SciPy (python3-scipy) or imagehash (IMAGEHASH names its source)", "IMAGEHASH")
	out := osworldpy.Run(t, pdfImagesPyDriver, path, metrics, t.TempDir(), "1", "600")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()["compare_pdf_images"].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
