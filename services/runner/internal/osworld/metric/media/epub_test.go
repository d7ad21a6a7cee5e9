package media

import (
	"archive/zip"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// writeEPUB writes an EPUB laid out as txt2epub lays it out: every file at
// the top of the archive.
func writeEPUB(t *testing.T, dir, name string, files [][2]string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, file := range files {
		w, err := zw.Create(file[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(file[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func chapter(title string, paras ...string) string {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n<title>" + title + "</title>\n</head>\n<body>\n<h1>" + title + "</h1>\n")
	for _, p := range paras {
		b.WriteString("<p>" + p + "</p>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.String()
}

func book(id string, chapters ...string) [][2]string {
	files := [][2]string{
		{"mimetype", "application/epub+zip"},
		{"content.opf", "<?xml version=\"1.0\"?>\n<package>\n<metadata>\n<dc:title>Pass Through</dc:title>\n<dc:identifier id=\"id\">" + id + "</dc:identifier>\n</metadata>\n</package>\n"},
		{"toc.ncx", "<?xml version=\"1.0\"?>\n<ncx>\n<navMap>\n<navPoint id=\"" + id + "\">\n</navPoint>\n</navMap>\n</ncx>\n"},
	}
	for i, c := range chapters {
		files = append(files, [2]string{"chapter" + string(rune('0'+i)) + ".html", c})
	}
	return files
}

func TestCompareEPUB(t *testing.T) {
	dir := t.TempDir()
	gold := writeEPUB(t, dir, "gold.epub", book("uuid-1",
		chapter("One", "It begins.", "It goes on."), chapter("Two", "The end.")))
	// Another identifier only: those lines are dropped before comparing.
	same := writeEPUB(t, dir, "same.epub", book("uuid-2",
		chapter("One", "It begins.", "It goes on."), chapter("Two", "The end.")))
	edited := writeEPUB(t, dir, "edited.epub", book("uuid-3",
		chapter("One", "It begins.", "It goes on and on."), chapter("Two", "The end.")))
	nested := writeEPUB(t, dir, "nested.epub", [][2]string{{"OEBPS/ch1.html", chapter("One")}})
	notZip := filepath.Join(dir, "not.epub")
	if err := os.WriteFile(notZip, []byte("plain text"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		result, exp any
		want        float64
	}{
		{"same book", same, gold, 1},
		// OSWorld's compare_epub gives 0.96875 on these files: the mean
		// of 1, 1, 0.875 (the edited page, 7 of 8 lines alike) and 1.
		{"one paragraph edited", edited, gold, 0.96875},
		{"html in a folder raises", nested, gold, 0},
		{"not a zip", notZip, gold, 0},
		{"nil", nil, gold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricCompareEPUB(context.Background(), tt.result, tt.exp, true, nil)
			if err != nil || !(math.Abs(got-tt.want) <= 1e-12) {
				t.Errorf("compare_epub got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestCompareEPUBUnknownCharset: a page that names an encoding this reader
// does not decode (libxml2 may, through iconv), with text past ASCII after
// it, fails the evaluation instead of scoring a guess.
func TestCompareEPUBUnknownCharset(t *testing.T) {
	dir := t.TempDir()
	page := "<html><head><meta charset=\"gbk\"/><title>t</title></head><body><p>一二</p></body></html>"
	p := writeEPUB(t, dir, "gbk.epub", book("uuid-1", page))
	got, err := metricCompareEPUB(context.Background(), p, p, true, nil)
	if !errors.Is(err, errEncoding) {
		t.Errorf("compare_epub = %v, %v; want an error wrapping errEncoding", got, err)
	}
	// The same page in ASCII reads alike in every encoding: scored.
	ascii := writeEPUB(t, dir, "ascii.epub", book("uuid-1", strings.ReplaceAll(page, "一二", "one two")))
	if got, err := metricCompareEPUB(context.Background(), ascii, ascii, true, nil); err != nil || got != 1 {
		t.Errorf("compare_epub of an ASCII page with itself = %v, %v; want 1", got, err)
	}
}

// TestLibreOfficeEPUB: LibreOffice puts its pages under OEBPS/ as .xhtml,
// where OSWorld's compare_epub finds nothing, so even a book compared with
// itself scores 0.
func TestLibreOfficeEPUB(t *testing.T) {
	needTools(t, "soffice")
	dir := t.TempDir()
	txt := filepath.Join(dir, "novel.txt")
	if err := os.WriteFile(txt, []byte("Chapter One\n\nIt begins.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execTimeout(2*60e9, "soffice", "-env:UserInstallation=file://"+dir+"/profile", "--headless",
		"--convert-to", "epub", "--outdir", dir, txt)
	if err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	p := filepath.Join(dir, "novel.epub")
	got, err := metricCompareEPUB(context.Background(), p, p, true, nil)
	if err != nil || got != 0 {
		t.Errorf("compare_epub of a LibreOffice EPUB with itself got %v, %v; want 0", got, err)
	}
}

// TestLxmlPretty pins lxml.html.tostring(lxml.html.fromstring(s),
// pretty_print=True) from lxml 4.9.2 with libxml2 2.9.14 (the page as
// UTF-8 bytes, as compare_epub hands it): a stray </p> ignored, <p>
// closed by <h1> and by <p>, cells and items closed by their siblings,
// boolean attributes minimised, href percent-escaped, the head-less
// fragments returned as their only element or a div, and what
// TestLxmlPrettyMatchesPy found: the encoding libxml2 picks, the meta
// tostring drops, tails, PIs, misplaced doctypes and heads, and past
// </html>.
func TestLxmlPretty(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<?xml version=\"1.0\" encoding=\"UTF-8\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>Ch 1</title></head><body><p><h1>  Title</h1></p><p></p><p>Text &amp; more</p></body></html>",
			"<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head><title>Ch 1</title></head>\n<body>\n<p></p>\n<h1>  Title</h1>\n<p></p>\n<p>Text &amp; more</p>\n</body>\n</html>\n"},
		{"<HTML><Head><TITLE>X</TITLE></Head><BODY class=\"a&amp;b\"><!-- c --><p>One<p>Two</b> three</p></p><table><tr><td>1<td>2</tr></table><ul><li>a<li>b</ul><input type=\"checkbox\" checked=\"checked\"><div><span>x</span> <em>y</em></div><a href=\"http://x.org/a b?q=1&amp;r=2\">l</a></BODY></HTML>",
			"<html>\n<head><title>X</title></head>\n<body class=\"a&amp;b\">\n<!-- c --><p>One</p>\n<p>Two three</p>\n<table><tr>\n<td>1</td>\n<td>2</td>\n</tr></table>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<input type=\"checkbox\" checked><div>\n<span>x</span> <em>y</em>\n</div>\n<a href=\"http://x.org/a%20b?q=1&amp;r=2\">l</a>\n</body>\n</html>\n"},
		{"<div><p>a</p></div><p>b</p>",
			"<div>\n<div><p>a</p></div>\n<p>b</p>\n</div>\n"},
		{"text <b>bold</b> more",
			"<p>text <b>bold</b> more</p>\n"},
		// UTF-8 read as Latin-1 without a declaration
		{"<p>é</p>",
			"<p>Ã©</p>\n"},
		// UTF-8 from a leading <?xm
		{"<?xml version='1.0'?><p>é</p>",
			"<p>é</p>\n"},
		// a meta charset
		{"<html><head><meta charset='utf-8'><title>t</title></head><body>é</body></html>",
			"<html>\n<head>\n<meta charset=\"utf-8\">\n<title>t</title>\n</head>\n<body>é</body>\n</html>\n"},
		// a charset found ahead at the first byte past ASCII; the meta dropped by tostring
		{"<p>é</p><meta http-equiv=Content-Type content='text/html; charset=utf-8'>",
			"<div>\n<p>é</p>\n\n</div>\n"},
		// windows-1252 stops at 0x8D, which it has no character for
		{"<html><head><meta charset='windows-1252'></head><body><p>—ōx</p><p>y</p></body></html>",
			"<html>\n<head><meta charset=\"windows-1252\"></head>\n<body><p>â€”Å</p></body>\n</html>\n"},
		// only the meta printed http-equiv="Content-Type" first is dropped
		{"<html><head><meta content='x' http-equiv='Content-Type'><meta http-equiv='content-type' content='text/html'><meta http-equiv='Content-Type' content='text/html'></head></html>",
			"<html><head>\n<meta content=\"x\" http-equiv=\"Content-Type\">\n<meta http-equiv=\"content-type\" content=\"text/html\">\n\n</head></html>\n"},
		// an empty li has no end tag
		{"<ul><li></ul>",
			"<ul><li></ul>\n"},
		// the element's tail
		{"<!-- c --><div>x</div> ",
			"<div>x</div> \n"},
		// blanks before any tag are skipped
		{"  a",
			"<p>a</p>\n"},
		// not after one
		{"</p>  a",
			"<p>  a</p>\n"},
		// noscript holds elements
		{"<html><body><noscript><b>x</b> &amp; y</noscript></body></html>",
			"<html><body><noscript>\n<b>x</b> &amp; y</noscript></body></html>\n"},
		// a processing instruction; CDATA is text
		{"<p>a<?pi   x?><![CDATA[c]]></p>",
			"<p>a<?pi x?>&lt;![CDATA[c]]&gt;</p>\n"},
		// past a misplaced doctype an end tag is text
		{"<p>a<!DOCTYPE html></b>c</p>",
			"<p>a&lt;/b&gt;c</p>\n"},
		// a misplaced head is ignored, and so is the end tag it matches
		{"<td>x<head></body>y",
			"<td>xy</td>\n"},
		// past </html> nothing is seen
		{"<p>a</p></html><p>b</p>",
			"<p>a</p>\n"},
		// a page that starts with <html is returned whole
		{"<html>a",
			"<html><body><p>a</p></body></html>\n"},
		// li is a block tag for lxml's fromstring
		{"<b>x</b><li>y",
			"<div>\n<b>x</b><li>y</li>\n</div>\n"},
		// bodies are merged
		{"<p>a</p><body><p>b</p></body><body>c<p>d</p></body>",
			"<div>\n<p>a</p>\n<p>b</p>c<p>d</p>\n</div>\n"},
		// embed is no void element
		{"<p>x</p><embed src='e'>",
			"<div>\n<p>x</p>\n<embed src=\"e\"></embed>\n</div>\n"},
	}
	for _, tt := range tests {
		got, err := lxmlPretty(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("lxmlPretty(%q)\ngot  %q, %v\nwant %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzLxmlPretty runs the libxml2-style parser and printer on any text: it
// prints, or fails as lxml raises (errEPUBRaises), on a cap, or on an
// encoding not decoded here, and on nothing else.
func FuzzLxmlPretty(f *testing.F) {
	f.Add("<p>One<p>Two</b></p></p><table><tr><td>1<td>2</table>")
	f.Add("<?xml version=\"1.0\"?><html><head><title>t</title></head><body><div><p>x</div></body></html>")
	f.Add("<meta charset=\"windows-1252\"><p>\u014d</p><![CDATA[x]]><!DOCTYPE html></b></html><p>é</title &")
	f.Fuzz(func(t *testing.T, s string) {
		_, err := lxmlPretty(s)
		if err != nil && !errors.Is(err, errEPUBRaises) && !errors.Is(err, errEncoding) && metric.OverCap(err) == nil {
			t.Errorf("lxmlPretty(%q): %v", s, err)
		}
	})
}
