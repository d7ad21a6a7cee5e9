package media

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// The expected values here are PyMuPDF 1.21.1's (Debian's python3-fitz)
// on the hand-made PDFs of pymupdf_corpus_test.go; TestPDFsMatchPyMuPDF
// checks them against PyMuPDF itself where it is installed.

// handPDF writes the hand-made PDFs into a directory of the test and
// returns the path of the one named.
func handPDF(t *testing.T) func(name string) string {
	t.Helper()
	dir := t.TempDir()
	handPDFs(t, dir)
	return func(name string) string { return filepath.Join(dir, name) }
}

// TestPDFTextAsPyMuPDF: pdfText's text is PyMuPDF's on the corners where
// mutool's stext XML, read before, gave another:
//   - a font named `A"><char c="ZZZ"/><line>`, which mutool 1.21 writes
//     into the XML unescaped: "ZZZ" was read as text;
//   - characters U+0080..U+009F, which the XML holds as &#x80; and
//     html.UnescapeString turns into Windows-1252's € and the like;
//   - a lone surrogate, which PyMuPDF 1.21 gets from MuPDF as three
//     bytes and decodes as three U+FFFD (two in a row were one), and 1.26
//     writes as one escaped U+FFFD;
//   - characters across the page's edge, which PyMuPDF 1.21 leaves out
//     (it keeps a character whose box lies within the page) and 1.26
//     keeps (a box that overlaps the page at all);
//   - characters of a Type 3 font half an em tall near the page's top,
//     bottom and left edges, upright, upside down and turned, whose box
//     PyMuPDF makes one font size tall before that test (JM_char_quad).
//
// It also reads annotations, as PyMuPDF does (mutool's structured text
// of a page in JavaScript leaves them out). The 1.21 texts are PyMuPDF
// 1.21.1's own (TestPDFsMatchPyMuPDF checks them against it); the 1.26
// texts follow 1.26's rules, where they differ, as its source gives
// them; on these files they are the text MuPDF's own clip to the page
// keeps (mutool draw -F txt), block breaks aside.
func TestPDFTextAsPyMuPDF(t *testing.T) {
	needTools(t, "mutool")
	pdf := handPDF(t)
	tests := []struct {
		name    string
		file    string
		want121 string
		want126 string // "" when it is want121
	}{
		{"font name holding XML", "fontname.pdf", "Plain words", ""},
		{"controls and surrogates", "tounicode.pdf",
			"x\ufffdx\nx\u0085x\u0080x\u009fx\nx\tx\u00adx\nx\ufffd\ufffd\ufffdx \ufffd\ufffd\ufffd\ufffd\ufffd\ufffdx\nxfix\U0001F600x\ufffdxKx\n\ufffd",
			"x\ufffdx\nx\u0085x\u0080x\u009fx\nx\tx\u00adx\nx\ufffdx \ufffd\ufffdx\nxfix\U0001F600x\ufffdxKx\n\ufffd"},
		{"characters across the page's edges", "edges.pdf", "Inside the page, the\nft edge",
			"Inside the page, then\nTop edge\neft edge\nBottom"},
		{"small font box near the edges", "type3.pdf", "aaaa\nabab\nlow\naab\nba",
			"aaa\naba\naaaa\nabab\nlow\nbab\naab\nab\nba"},
		{"annotations", "misc.pdf", "Visible\nInvisible OCR layer\nBold\nBold\nAnnotation text", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want126 == "" {
				tt.want126 = tt.want121
			}
			for _, r := range []struct{ rules, want string }{{"1.21", tt.want121}, {"1.26", tt.want126}} {
				got, err := pdfTextAs(t.Context(), pdf(tt.file), r.rules)
				if err != nil || got != r.want {
					t.Errorf("pdfTextAs(%s, %s) got %q, %v\nwant %q", tt.file, r.rules, got, err, r.want)
				}
			}
			// What the metrics use: OSWorld's PyMuPDF.
			if got, err := pdfText(t.Context(), pdf(tt.file)); err != nil || got != tt.want126 {
				t.Errorf("pdfText(%s) got %q, %v\nwant %q (PyMuPDF 1.26's)", tt.file, got, err, tt.want126)
			}
		})
	}
}

// TestPyDecodeUTF8: invalid UTF-8 becomes U+FFFD as Python's
// decode("utf-8", "replace") makes it: one for each maximal part of an
// invalid sequence.
func TestPyDecodeUTF8(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"plain é 😀", "plain é 😀"},
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"},           // a surrogate
		{"a\xe2\x82b", "a\ufffdb"},                       // a truncated sequence is one
		{"\xf0\x9f\x98", "\ufffd"},                       // truncated at the end
		{"\xc0\x80\xff", "\ufffd\ufffd\ufffd"},           // overlong, and a byte never valid
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"}, // past U+10FFFF
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},           // overlong three-byte
		{"\xe1\x80\xe1\x80\x80", "\ufffd\u1000"},         // a part, then a whole one
		{"x\x80\x80y", "x\ufffd\ufffdy"},                 // lone continuations
	}
	for _, tt := range tests {
		if got := metric.PyDecodeUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("metric.PyDecodeUTF8(%q) got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPDFImagesAsPyMuPDF: pdfImages lists what page.get_images() lists,
// with the image extract_image gives. poppler's pdfimages, used before,
// listed each drawing instead: an image drawn twice twice, an inline
// image, the image of a pattern, but not an image the page lists and
// never draws nor one listed under a second name; and it wrote a CCITT
// image as two files (.ccitt and .params), shifting every image after it
// onto the wrong entry of the list, a JBIG2 image as a file nothing
// decodes and a CMYK one as a PAM file, which PyMuPDF all give as PNGs.
func TestPDFImagesAsPyMuPDF(t *testing.T) {
	needTools(t, "mutool")
	pdf := handPDF(t)
	tests := []struct {
		file string
		want string // the images' sizes and modes
	}{
		{"img-twice-smask.pdf", "[96x60 RGB 96x60 RGB]"},
		{"img-form-inline.pdf", "[96x60 RGB 96x60 RGB 2x2 L 96x60 RGB 96x60 RGB]"},
		{"img-ccitt.pdf", "[16x8 L 96x60 RGB]"},
		{"img-jbig2.pdf", "[16x8 L]"},
		{"img-kinds.pdf", "[16x8 L 96x60 RGB 8x8 RGB 16x2 L 96x60 RGB 96x60 RGBA 96x60 RGB 16x16 L]"},
		{"img-forms.pdf", "[2x2 L 96x60 RGB]"},
		{"img-inherited.pdf", "[96x60 RGB]"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			imgs, err := pdfImages(t.Context(), pdf(tt.file))
			var got []string
			for _, im := range imgs {
				got = append(got, fmt.Sprintf("%dx%d %s", im.w, im.h, im.mode))
			}
			if s := fmt.Sprint(got); err != nil || s != tt.want {
				t.Errorf("pdfImages(%s) got %s, %v; want %s", tt.file, s, err, tt.want)
			}
		})
	}
}

// TestComparePDFImagesAsPyMuPDF: compare_pdf_images on the cases where
// the list differed: a CCITT image then a JPEG against two JPEGs is half
// a match (it was 0: one image against two); a PDF whose JPEG MuPDF
// cannot read scores 0 even against itself, since extract_image raises
// (it was 1: no image on either side); the same image drawn twice and
// once is a match (it was 0: two drawings against one).
func TestComparePDFImagesAsPyMuPDF(t *testing.T) {
	needTools(t, "mutool")
	pdf := handPDF(t)
	dir := t.TempDir()
	twoJPEGs := newPDF()
	j := twoJPEGs.stream("/Type /XObject /Subtype /Image /Width 96 /Height 60 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", mustRead(t, fixture("src.jpg")), false)
	twoJPEGs.page(300, 300, fmt.Sprintf("/XObject << /A %d 0 R /B %d 0 R >>", j, j), []byte("q 96 0 0 60 0 0 cm /A Do Q"))
	once := newPDF()
	j = once.stream("/Type /XObject /Subtype /Image /Width 96 /Height 60 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", mustRead(t, fixture("src.jpg")), false)
	once.page(300, 300, fmt.Sprintf("/XObject << /J %d 0 R >>", j), []byte("q 96 0 0 60 0 0 cm /J Do Q"))
	twice := newPDF()
	j = twice.stream("/Type /XObject /Subtype /Image /Width 96 /Height 60 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", mustRead(t, fixture("src.jpg")), false)
	twice.page(300, 300, fmt.Sprintf("/XObject << /J %d 0 R >>", j), []byte("q 96 0 0 60 0 0 cm /J Do Q q 96 0 0 60 0 100 cm /J Do Q"))
	tests := []struct {
		name        string
		result, exp string
		want        float64
	}{
		{"CCITT and JPEG against two JPEGs", pdf("img-ccitt.pdf"), twoJPEGs.write(t, filepath.Join(dir, "two.pdf")), 0.5},
		{"unreadable JPEG against itself", pdf("img-badjpeg.pdf"), pdf("img-badjpeg.pdf"), 0},
		{"one image drawn twice against once", twice.write(t, filepath.Join(dir, "twice.pdf")), once.write(t, filepath.Join(dir, "once.pdf")), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricComparePDFImages(t.Context(), tt.result, tt.exp, true, nil)
			if err != nil || !(math.Abs(got-tt.want) <= 1e-12) {
				t.Errorf("compare_pdf_images got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// mustRead is a file's bytes; the test fails without them.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOneFFFDPerSurrogate: PyMuPDF 1.26 writes each lone surrogate as one
// U+FFFD; anything else passes unchanged for metric.PyDecodeUTF8.
func TestOneFFFDPerSurrogate(t *testing.T) {
	tests := []struct {
		name    string
		in, out string
	}{
		{"none", "plain \xe2\x82\xac", "plain \xe2\x82\xac"},
		{"high surrogate", "x\xed\xa0\x80x", "x\ufffdx"},
		{"two in a row", "\xed\xa0\xbd\xed\xb8\x80", "\ufffd\ufffd"},
		{"ED of a Hangul syllable", "\xed\x95\x9c", "\xed\x95\x9c"},
		{"cut short", "x\xed\xa0", "x\xed\xa0"},
		{"astral", "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
	}
	for _, tt := range tests {
		if got := string(oneFFFDPerSurrogate([]byte(tt.in))); got != tt.out {
			t.Errorf("%s: oneFFFDPerSurrogate(%q) = %q, want %q", tt.name, tt.in, got, tt.out)
		}
	}
}
