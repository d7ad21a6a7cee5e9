package media

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// epubPyParts is Python shared by the EPUB drivers: page(rng) makes a
// random page, most laid out as txt2epub lays out a chapter (the tool the
// compare_epub task points at), the rest a soup of the tags, entities,
// attributes and stray end tags a hand-made or other tool's page has.
const epubPyParts = `
TEXT = ["It begins.", "Caf\u00e9 cr\u00e8me", "\u4e00\u4e8c\u4e09", "Tom &amp; Jerry", "a &lt; b", "x&nbsp;y", "&#169; 2024",
        "&copy;", "&unknown;", "rock & roll", "  spaced  out  ", "", " ", "\u00a0", "\"quoted\" 'single'", "tab\there",
        "a > b", "&#x41;&#65;", "&amp;amp;", "<b>bold</b> text", "<i>it</i>", "<em>e</em> <strong>s</strong>",
        "line<br/>break", "line<br>break", "<span class=\"c\">sp</span>", "<a href=\"ch2.html#x\">link</a>",
        "<a href=\"a b.html?q=1&amp;r=2\">esc</a>", "<img src=\"i.png\" alt=\"pic\"/>", "<sup>1</sup>", "<!-- note -->",
        "<code>x &lt; y</code>", "<u>u</u><s>s</s>", "<font color=\"red\">f</font>", "\u2014 dash \u014d", "\u00e9\u0080",
        "<a title=\"caf\u00e9 &amp; co\">t</a>", "<P ALIGN=center>up</P>", "<img src=x alt=unquoted>", "<p/>", "<br/><br/>",
        "charset=utf-8 in text", "<![CDATA[x]]>", "<?pi x?>", "<ins>i</ins><del>d</del>", "\U0001F600"]
BLOCKS = ["<p>%s</p>", "<p>%s</p>", "<p>%s</p>", "<h2>%s</h2>", "<div>%s</div>", "<div><p>%s</p></div>", "<blockquote>%s</blockquote>",
          "<pre>%s</pre>", "<p class=\"x\" id=\"p1\">%s</p>", "<p>%s", "<ul><li>%s</li><li>two</li></ul>", "<ol><li>%s<li>b</ol>",
          "<table><tr><td>%s</td><td>2</td></tr></table>", "<table><tr><td>%s<td>2</table>", "<hr/>%s", "<center>%s</center>",
          "<dl><dt>%s</dt><dd>d</dd></dl>", "%s", "<p><h1>%s</h1></p>", "<p>%s</p></p>", "<b><p>%s</p></b>",
          "<p>%s</div>", "<input type=\"checkbox\" checked=\"checked\"/>%s", "<form><select><option selected>%s</option></select></form>",
          "<script>var a = 1 < 2;</script>%s", "<style>p { margin: 0 }</style>%s", "<noscript>%s</noscript>", "<span>%s</span>"]
def para(rng):
    return "".join(rng.choice(TEXT) for _ in range(rng.randrange(1, 4)))
def page(rng):
    title = rng.choice(["One", "Chapter 2", "Caf\u00e9", "A &amp; B", "", "Pass Through"])
    body = "".join((rng.choice(BLOCKS[:3]) if rng.random() < 0.7 else rng.choice(BLOCKS)) % para(rng)
                   + rng.choice(["\n", "\r\n", "", " "]) for _ in range(rng.randrange(0, 6)))
    head = rng.choice(["<head><title>%s</title></head>" % title, "<head><title>%s</title><meta charset=\"utf-8\"/></head>" % title,
                       "<head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\"/><title>%s</title><link rel=\"stylesheet\" href=\"s.css\"/></head>" % title,
                       "<head></head>", "<HEAD><TITLE>%s</TITLE></HEAD>" % title])
    nl = rng.choice(["\n", "\r\n", ""])
    kind = rng.random()
    if kind < 0.1:
        # an encoding named, before or after the first text past ASCII
        meta = rng.choice(["<meta charset=\"utf-8\"/>", "<meta charset=\"ISO-8859-1\"/>", "<meta charset=\"windows-1252\"/>",
                           "<meta charset=\" latin1\"/>", "<meta http-equiv=\"content-type\" content=\"text/html; charset=UTF-8\"/>",
                           "<meta http-equiv=\"Content-Type\" content=\"text/html;charset = cp1252\"/>", "<meta http-equiv=\"Content-Type\" content=\"text/html\"/>",
                           "<!-- <meta http-equiv=\"Content-Type\" content=\"charset=utf-8\"> -->", "<meta charset=\"utf-16\"/>"])
        pre = rng.choice(["", "<?xml version=\"1.0\"?>", "<!DOCTYPE html>", "<?XML?>"])
        parts = [meta, "<p>%s</p>" % para(rng), "<p>%s</p>" % para(rng), rng.choice(["", meta])]
        rng.shuffle(parts)
        return pre + rng.choice(["<html><head><title>%s</title>" % title + parts[0] + "</head><body>" + "".join(parts[1:]) + "</body></html>",
                                 "".join(parts)])
    if kind < 0.55:
        decl = rng.choice(["<?xml version=\"1.0\" encoding=\"UTF-8\"?>" + nl, "", "<!DOCTYPE html>" + nl,
                           "<?xml version=\"1.0\" encoding=\"utf-8\"?>" + nl + "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.1//EN\" \"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd\">" + nl])
        html = rng.choice(["<html xmlns=\"http://www.w3.org/1999/xhtml\">", "<html>", "<HTML lang=\"en\">"])
        h1 = rng.choice(["<h1>%s</h1>" % title, ""])
        return decl + html + nl + head + nl + "<body>" + nl + h1 + nl + body + "</body>" + nl + "</html>" + nl
    if kind < 0.8:
        # no head: lxml returns the body's only element, or the body as a div or span
        return rng.choice(["", "<body>", "<!-- c -->"]) + body
    # soup: pieces in any order, end tags that close nothing
    pieces = ["<p>", "</p>", "<div>", "</div>", "<b>", "</b>", "<table>", "<tr>", "<td>", "</table>", "<li>", "<ul>", "</ul>",
              "<head>", "<title>t</title>", "</head>", "<body>", "</body>", "<html>", "</html>", "<br>", "</br>", "<span>", "</span>",
              "<!DOCTYPE html>", "<!-- c -->", "<meta charset=utf-8>", "<frameset>", "<noframes>", "<script>x</p></script>", "<select>",
              "<option>", "<dl>", "<dt>", "<dd>", "<h1>", "</h1>", "<h2>", "<form>", "</form>", "<pre>", "<center>", "<caption>", "<th>"]
    return "".join(rng.choice(pieces + TEXT) for _ in range(rng.randrange(1, 12)))
`

// lxmlPrettyPyDriver prints, for random pages, what compare_epub writes for
// each: lxml.html.tostring(lxml.html.fromstring(text), pretty_print=True,
// encoding="unicode") on the page's bytes with its line ends removed, or
// null where lxml raises. argv: seed, number of pages.
const lxmlPrettyPyDriver = `
import json, random
import lxml.html
` + epubPyParts + `
rng, n = random.Random(int(sys.argv[1])), int(sys.argv[2])
out = []
for _ in range(n):
    text = "".join(ch for ch in page(rng) if ch != "\n" and ch != "\r")
    try:
        got = lxml.html.tostring(lxml.html.fromstring(text.encode()), pretty_print=True, encoding="unicode")
    except Exception:
        got = None
    out.append({"in": text, "out": got})
print(json.dumps(out))
`

// TestLxmlPrettyMatchesPy gives random pages to lxmlPretty and to lxml
// itself (Debian's python3-lxml) and wants the same text for each, or a
// raise on both. It runs only when OSWORLD_REF names an OSWorld checkout
// (the osworldpy harness; lxml is the one under comparison).
func TestLxmlPrettyMatchesPy(t *testing.T) {
	osworldpy.MetricsDir(t) // skips without OSWORLD_REF
	out := osworldpy.Run(t, lxmlPrettyPyDriver, nil, "1", "4000")
	var cases []struct {
		In  string  `json:"in"`
		Out *string `json:"out"`
	}
	if err := json.Unmarshal(out, &cases); err != nil {
		t.Fatalf("driver output: %v", err)
	}
	bad := 0
	for _, c := range cases {
		got, err := lxmlPretty(c.In)
		switch {
		case c.Out == nil && err == nil:
			t.Errorf("lxmlPretty(%q) = %q; lxml raises", c.In, got)
		case c.Out != nil && err != nil:
			t.Errorf("lxmlPretty(%q): %v; lxml gives %q", c.In, err, *c.Out)
		case c.Out != nil && got != *c.Out:
			t.Errorf("lxmlPretty(%q)\ngot  %q\nlxml %q", c.In, got, *c.Out)
		default:
			continue
		}
		if bad++; bad == 20 {
			t.Fatalf("stopping after %d differences of %d pages", bad, len(cases))
		}
	}
}

// epubPyDriver writes random EPUB pairs and scores them with compare_epub
// of OSWorld's others.py, printing {"metric", "result", "expected",
// "score"} as JSON ({"raise": name} for a raise). argv: metrics directory,
// output directory, seed, number of cases.
const epubPyDriver = `
import json, random, os, io, zipfile, contextlib
stub("pdfplumber"); stub("docx", Document=None); stub("yaml")
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
stub("mutagen"); stub("mutagen.easyid3", EasyID3=None)
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
load(PKG + ".general", os.path.join(sys.argv[1], "general.py"))
others = load(PKG + ".others", os.path.join(sys.argv[1], "others.py"))
` + epubPyParts + `
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

def book(ident, pages):
    files = [("mimetype", "application/epub+zip")]
    if rng.random() < 0.9:
        files.append(("content.opf", "<?xml version=\"1.0\"?>\n<package>\n<metadata>\n<dc:title>Pass Through</dc:title>\n"
                      "<dc:identifier id=\"id\">%s</dc:identifier>\n</metadata>\n<manifest>\n%s</manifest>\n</package>\n"
                      % (ident, "".join("<item href=\"%s\"/>\n" % name for name, _ in pages))))
    if rng.random() < 0.9:
        files.append(("toc.ncx", "<?xml version=\"1.0\"?>\n<ncx>\n<navMap>\n%s</navMap>\n</ncx>\n"
                      % "".join("<navPoint id=\"%s\"><text>%s</text></navPoint>\n" % (ident, name) for name, _ in pages)))
    files += pages
    rng.shuffle(files)
    return files

def write(name, files):
    p = os.path.join(out, name)
    with zipfile.ZipFile(p, "w") as z:
        for fname, text in files:
            z.writestr(fname, text.encode() if isinstance(text, str) else text)
    return p

cases = []
for i in range(n):
    pages = [("chapter%d.html" % k, page(rng)) for k in range(rng.randrange(0, 4))]
    gold = book("uuid-%d" % rng.randrange(3), pages)
    mine = [(f, page(rng) if f.endswith(".html") and rng.random() < 0.3 else t) for f, t in book("uuid-%d" % rng.randrange(3), pages)]
    r = rng.random()
    if r < 0.05:
        mine = [(f, t) for f, t in mine if not f.endswith(".html")]
    elif r < 0.1:
        mine.append(("chapter9.html", page(rng)))
    elif r < 0.13:
        mine.append(("OEBPS/ch.html", page(rng)))
    elif r < 0.16:
        mine.append(("bad.html", b"\xff\xfe<p>x</p>"))
    elif r < 0.19:
        mine.append(("empty.html", ""))
    result = write("r%05d.epub" % i, mine)
    expected = write("e%05d.epub" % i, gold)
    if rng.random() < 0.03:
        with open(result, "w") as f:
            f.write("not a zip")
    if rng.random() < 0.03:
        result = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(others.compare_epub(result, expected))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "compare_epub", "result": result, "expected": expected, "score": score})
print(json.dumps(cases))
`

// TestCompareEPUBMatchesOthersPy scores random EPUB pairs with
// compare_epub (1 published task) here and in OSWorld's others.py on
// Debian's lxml, and wants the same scores (a raise is a 0 here). The
// pages are txt2epub's layout with random text, entities and inline tags,
// pages without a head, and tag soups; the archives lack a toc.ncx or
// content.opf, gain or lose pages, hold a page in a folder, one that is
// not UTF-8 or empty, or are no zip. It runs only when OSWORLD_REF names
// an OSWorld checkout.
func TestCompareEPUBMatchesOthersPy(t *testing.T) {
	out := osworldpy.Run(t, epubPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "600")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()["compare_epub"].Fn(context.Background(), c.Result, c.Expected, true, nil)
	})
}
