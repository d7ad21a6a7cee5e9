package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	pdfOnce sync.Once
	pdfDir  string
	pdfErr  error
)

// officePDFs converts text, HTML and PNG files, and the office documents
// of the PyMuPDF differential test (officeInputs), to PDF with one run of
// LibreOffice (its own profile, so concurrent instances do not clash).
func officePDFs(t *testing.T) string {
	t.Helper()
	needTools(t, "soffice", "pdftotext", "pdfinfo", "pdfimages")
	pdfOnce.Do(func() {
		dir, err := os.MkdirTemp("", "media-pdf")
		if err != nil {
			pdfErr = err
			return
		}
		pdfDir = dir
		files := map[string]string{
			"report.txt": "Hello world report\n",
			"record.txt": "Hello world record\n",
			"two.html":   `<html><body><p>First page</p><p style="page-break-before:always">Page two</p></body></html>`,
		}
		inputs := []string{"report.txt", "record.txt", "two.html", "src.png", "mirror.png"}
		office, err := officeInputs()
		if err != nil {
			pdfErr = err
			return
		}
		for name, text := range office {
			files[name] = text
			if ext := filepath.Ext(name); ext != ".jpg" && ext != ".png" {
				inputs = append(inputs, name)
			}
		}
		for name, text := range files {
			if pdfErr = os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); pdfErr != nil {
				return
			}
		}
		for _, png := range []string{"src.png", "mirror.png"} {
			b, err := os.ReadFile(fixture(png))
			if err != nil {
				pdfErr = err
				return
			}
			if pdfErr = os.WriteFile(filepath.Join(dir, png), b, 0o644); pdfErr != nil {
				return
			}
		}
		args := []string{"-env:UserInstallation=file://" + dir + "/profile", "--headless", "--convert-to", "pdf", "--outdir", dir}
		for _, in := range inputs {
			args = append(args, filepath.Join(dir, in))
		}
		out, err := execTimeout(2*time.Minute, "soffice", args...)
		if err != nil {
			pdfErr = err
			t.Logf("soffice: %s", out)
		}
	})
	if pdfErr != nil {
		t.Fatalf("make PDFs: %v", pdfErr)
	}
	return pdfDir
}

func TestComparePDFs(t *testing.T) {
	dir := officePDFs(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	// Both extractors give one line per document here.
	partial, err := ratio(context.Background(), "Hello world report", "Hello world record")
	if err != nil {
		t.Fatal(err)
	}
	blank := newPDF()
	blank.page(100, 100, "", nil)
	blankPath := blank.write(t, filepath.Join(t.TempDir(), "blank.pdf"))
	tests := []struct {
		name        string
		result, exp any
		want        float64
	}{
		{"same", p("report.pdf"), p("report.pdf"), 1},
		{"one word differs", p("report.pdf"), p("record.pdf"), partial},
		{"list", []any{p("report.pdf"), p("report.pdf")}, []any{p("report.pdf"), p("record.pdf")}, (1 + partial) / 2},
		{"missing result file", p("none.pdf"), p("report.pdf"), 0},
		{"list with a missing file", []any{p("none.pdf"), p("report.pdf")}, []any{p("report.pdf"), p("report.pdf")}, 0.5},
		{"not a pdf", fixture("src.png"), p("report.pdf"), 0},
		{"nil", nil, p("report.pdf"), 0},
		// fitz.open(None) and fitz.open("") make a new empty document:
		// its text "" matches a PDF without text. These answers are
		// OSWorld's chrome.py's, with PyMuPDF 1.21.
		{"nil and a PDF without text", nil, blankPath, 1},
		{"empty path and a PDF without text", []any{"", p("report.pdf")}, []any{blankPath, p("report.pdf")}, 1},
		{"nil both", nil, nil, 1},
		{"a list against one PDF", []any{p("report.pdf")}, p("report.pdf"), 0},
		{"one PDF against a list", p("report.pdf"), []any{p("report.pdf")}, 0},
		{"nil against a list", nil, []any{p("report.pdf")}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricComparePDFs(context.Background(), tt.result, tt.exp, true, nil)
			if err != nil || !(math.Abs(got-tt.want) <= 1e-12) {
				t.Errorf("compare_pdfs got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	text, err := pdfText(t.Context(), p("two.pdf"))
	if err != nil || text != "First page\nPage two" {
		t.Errorf("pdfText(two.pdf) got %q, %v", text, err)
	}
}

func TestCheckPDFPages(t *testing.T) {
	dir := officePDFs(t)
	tests := []struct {
		file     string
		relation string
		ref      float64
		want     float64
	}{
		{"two.pdf", "eq", 2, 1},
		{"two.pdf", "eq", 1, 0},
		{"report.pdf", "eq", 1, 1},
		{"two.pdf", "gt", 1, 1},
		{"two.pdf", "le", 1, 0},
		{"none.pdf", "eq", 1, 0},
	}
	for _, tt := range tests {
		got, err := metricPDFPages(context.Background(), filepath.Join(dir, tt.file), map[string]any{"relation": tt.relation, "ref_value": tt.ref}, true, nil)
		if err != nil || got != tt.want {
			t.Errorf("check_pdf_pages(%s %s %v) got %v, %v; want %v", tt.file, tt.relation, tt.ref, got, err, tt.want)
		}
	}
	if _, err := metricPDFPages(context.Background(), filepath.Join(dir, "two.pdf"), map[string]any{"relation": "contains", "ref_value": 1.0}, true, nil); err == nil {
		t.Error("check_pdf_pages with an unknown relation: no error")
	}
}

// TestCheckPDFPagesCountsThePageTree: check_pdf_pages counts the leaves
// of the page tree, as pypdf's len(PdfReader(f).pages) does, whatever the
// file declares. pdfinfo counted before: a one-page PDF titled
// "x\nPages: 99" had 99 pages (pdfinfo prints the title raw, before the
// count); the page tree's /Count and a linearization header's /N set the
// count too; and a title over 64 KiB lost the count (bufio.Scanner's line
// limit), scoring 0.
func TestCheckPDFPagesCountsThePageTree(t *testing.T) {
	needTools(t, "mutool")
	dir := t.TempDir()
	pdf := func(name string, pages int, edit func(w *pdfWriter)) string {
		w := newPDF()
		for range pages {
			w.page(100, 100, "", nil)
		}
		if edit != nil {
			edit(w)
		}
		return w.write(t, filepath.Join(dir, name))
	}
	titled := func(title string) func(w *pdfWriter) {
		return func(w *pdfWriter) {
			w.info = w.add(fmt.Sprintf("<< /Title %d 0 R >>", w.add("("+title+")")))
		}
	}
	tests := []struct {
		name  string
		path  string
		pages float64 // the count that scores 1 with eq
		not   float64 // a count the file claims, which scores 0
	}{
		{"title holding a count", pdf("titled.pdf", 1, titled(`x\nPages: 99\n`)), 1, 99},
		{"title of 1 MiB", pdf("long.pdf", 1, titled(strings.Repeat("t", 1<<20))), 1, 0},
		{"declared /Count over the pages", pdf("count5.pdf", 1, func(w *pdfWriter) { w.count = 5 }), 1, 5},
		{"declared /Count under the pages", pdf("count1.pdf", 3, func(w *pdfWriter) { w.count = 1 }), 3, 1},
		{"linearization header of fewer pages", pdf("lin.pdf", 3, func(w *pdfWriter) { w.linearizedPages = 1 }), 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for ref, want := range map[float64]float64{tt.pages: 1, tt.not: 0} {
				got, err := metricPDFPages(t.Context(), tt.path, map[string]any{"relation": "eq", "ref_value": ref}, true, nil)
				if err != nil || got != want {
					t.Errorf("check_pdf_pages(eq %v) = %v, %v; want %v", ref, got, err, want)
				}
			}
		})
	}
}

// TestPDFPagesScript: the page-tree walk run by mutool, on trees pypdf
// walks in its own way: untyped nodes (a branch with /Kids, a page
// without), a node of another type (not counted), an encrypted file (its
// declared /Count, as pypdf reads it), a root of another type (no pages),
// and what pypdf 6 raises on (a loop, a null or number kid, /Kids that is
// no array, a tree past 100 levels): an error here, scoring 0.
// chain is a page tree root over n nested branches over one page: objects
// 2 to n+3 of tree's numbering, the page 100 levels down for n = 99.
func chain(n int) []string {
	objs := []string{"<< /Type /Pages /Kids [3 0 R] >>"}
	for i := range n {
		objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] >>", i+4))
	}
	return append(objs, "<< /Type /Page >>")
}

func TestPDFPagesScript(t *testing.T) {
	needTools(t, "mutool")
	dir := t.TempDir()
	// A catalog and page tree written by hand: objects 1 (catalog), 2
	// (the root of the tree) and the rest as given.
	tree := func(name string, objs ...string) string {
		w := newPDF()
		w.objs = w.objs[:1]
		for _, o := range objs {
			w.add(o)
		}
		var b bytes.Buffer
		b.WriteString("%PDF-1.4\n")
		offsets := make([]int, len(w.objs))
		for i, o := range w.objs {
			offsets[i] = b.Len()
			fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
		}
		xref := b.Len()
		fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(w.objs)+1)
		for _, off := range offsets {
			fmt.Fprintf(&b, "%010d 00000 n \n", off)
		}
		fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(w.objs)+1, xref)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const page = "<< /Type /Page /MediaBox [0 0 10 10] >>"
	encrypted := filepath.Join(dir, "encrypted.pdf")
	run(t, "mutool", "clean", "-E", "aes-128", "-U", "user", "-O", "owner",
		tree("plain.pdf", "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 7 >>", page, page), encrypted)
	tests := []struct {
		name    string
		path    string
		want    int
		wantErr bool
	}{
		{"untyped branch and untyped page", tree("untyped.pdf", "<< /Kids [3 0 R 4 0 R] /Count 1 >>", "<< /Kids [5 0 R] >>", "<< /MediaBox [0 0 10 10] >>", page), 2, false},
		{"a node of another type", tree("other.pdf", "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>", page, "<< /Type /Annot >>"), 1, false},
		{"encrypted: its /Count", encrypted, 7, false},
		{"a loop", tree("loop.pdf", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>", "<< /Type /Pages /Kids [2 0 R] >>"), 0, true},
		{"a root of another type", tree("foo.pdf", "<< /Type /Foo >>"), 0, false},
		// pypdf 6's walk, as OSWorld installs it.
		{"a page listed twice", tree("twice.pdf", "<< /Type /Pages /Kids [3 0 R 4 0 R] >>", "<< /Type /Pages /Kids [5 0 R] >>", "<< /Type /Pages /Kids [5 0 R] >>", page), 2, false},
		{"kids Python finds false", tree("falsy.pdf", "<< /Type /Pages /Kids [<< >> [ ] 0 () 3 0 R] >>", page), 1, false},
		{"a branch without kids", tree("nokids.pdf", "<< /Type /Pages /Kids [3 0 R 4 0 R] >>", "<< /Type /Pages /Kids null >>", page), 1, false},
		{"an untyped node with a null /Kids", tree("nullkids.pdf", "<< /Type /Pages /Kids [3 0 R] >>", "<< /Kids null >>"), 0, false},
		{"a /Type that is a string", tree("string.pdf", "<< /Type /Pages /Kids [3 0 R 4 0 R] >>", "<< /Type (/Page) >>", "<< /Type (Page) >>"), 1, false},
		{"a null kid", tree("nullkid.pdf", "<< /Type /Pages /Kids [3 0 R null] >>", page), 0, true},
		{"a kid that is a number", tree("number.pdf", "<< /Type /Pages /Kids [3 0 R 5] >>", page), 0, true},
		{"/Kids that is no array", tree("kidsnum.pdf", "<< /Type /Pages /Kids 3 >>"), 0, true},
		{"100 levels", tree("deep100.pdf", chain(99)...), 1, false},
		{"101 levels", tree("deep101.pdf", chain(100)...), 0, true},
	}
	script, err := writePagesScript()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pdfPages(t.Context(), script, tt.path)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("pdfPages = %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestComparePDFImages(t *testing.T) {
	needTools(t, "mutool")
	dir := officePDFs(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	tests := []struct {
		name        string
		result, exp string
		want        float64
	}{
		{"same image", p("src.pdf"), p("src.pdf"), 1},
		{"mirrored image", p("mirror.pdf"), p("src.pdf"), 0},
		{"image against none", p("report.pdf"), p("src.pdf"), 0},
		{"no images in either", p("report.pdf"), p("record.pdf"), 1},
		{"missing", p("none.pdf"), p("src.pdf"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricComparePDFImages(context.Background(), tt.result, tt.exp, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("compare_pdf_images got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestRatio checks the bit-parallel LCS against the quadratic one, across
// the 64-bit word boundaries.
func TestRatio(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune([]rune("abcdé ")[rng.IntN(6)])
		}
		return b.String()
	}
	for _, n := range []int{0, 1, 63, 64, 65, 130, 300} {
		a, b := gen(n), gen(n/2+rng.IntN(100))
		got, err := ratio(context.Background(), a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveRatio(a, b); !(math.Abs(got-want) <= 1e-12) {
			t.Errorf("ratio(len %d, len %d) got %v, want %v", len([]rune(a)), len([]rune(b)), got, want)
		}
	}
	// Texts sharing a prefix and a suffix, as an edited document does with
	// its original: the trimmed LCS must equal the whole one.
	for _, n := range []int{1, 70, 200} {
		pre, suf := gen(n), gen(n/2+1)
		for _, mid := range [][2]string{{gen(n), gen(n + 3)}, {"", gen(5)}, {gen(3), ""}, {"x", "x"}} {
			a, b := pre+mid[0]+suf, pre+mid[1]+suf
			got, err := ratio(context.Background(), a, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveRatio(a, b); !(math.Abs(got-want) <= 1e-12) {
				t.Errorf("ratio with common ends (len %d, len %d) got %v, want %v", len([]rune(a)), len([]rune(b)), got, want)
			}
		}
	}
	if got, _ := ratio(context.Background(), "", ""); got != 1 {
		t.Errorf("ratio of two empty strings got %v, want 1", got)
	}
}

func naiveRatio(a, b string) float64 {
	ra, rb := []rune(a), []rune(b)
	if len(ra)+len(rb) == 0 {
		return 1
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			if ra[i-1] == rb[j-1] {
				d[i][j] = d[i-1][j-1] + 1
			} else {
				d[i][j] = max(d[i-1][j], d[i][j-1])
			}
		}
	}
	return 2 * float64(d[len(ra)][len(rb)]) / float64(len(ra)+len(rb))
}

// TestRatioStops: a comparison of two long texts, seconds of work, ends
// with its context: it answers the context's error, not a ratio.
func TestRatioStops(t *testing.T) {
	a := strings.Repeat("abcdefghij", 50_000)
	b := strings.Repeat("jihgfedcba", 50_000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ratio(ctx, a, b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ratio past its deadline = %v, want the deadline's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ratio returned %s after start, with a 20ms deadline", d)
	}
}
