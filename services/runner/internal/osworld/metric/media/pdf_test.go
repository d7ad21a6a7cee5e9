package media

import (
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

// officePDFs converts text, HTML and PNG files to PDF with one run of
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
		out, err := execTimeout(2*time.Minute, "soffice", "-env:UserInstallation=file://"+dir+"/profile", "--headless",
			"--convert-to", "pdf", "--outdir", dir,
			filepath.Join(dir, "report.txt"), filepath.Join(dir, "record.txt"), filepath.Join(dir, "two.html"),
			filepath.Join(dir, "src.png"), filepath.Join(dir, "mirror.png"))
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricComparePDFs(context.Background(), tt.result, tt.exp, true, nil)
			if err != nil || math.Abs(got-tt.want) > 1e-12 {
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

// TestCheckPDFPagesTitleCannotSetCount: pdfinfo prints a document's title
// raw, newlines and all, before its page count. A one-page PDF titled
// "x\nPages: 99" was counted as 99 pages (the first "Pages:" line), so an
// agent could pass "eq 99" by naming its file's title; pypdf counts the
// page tree.
func TestCheckPDFPagesTitleCannotSetCount(t *testing.T) {
	needTools(t, "pdfinfo")
	w := newPDF()
	title := w.add("(x\nPages: 99\n)")
	w.info = w.add(fmt.Sprintf("<< /Title %d 0 R >>", title))
	w.page(100, 100, "", nil)
	path := w.write(t, filepath.Join(t.TempDir(), "titled.pdf"))
	for _, tt := range []struct {
		ref  float64
		want float64
	}{{99, 0}, {1, 1}} {
		got, err := metricPDFPages(t.Context(), path, map[string]any{"relation": "eq", "ref_value": tt.ref}, true, nil)
		if err != nil || got != tt.want {
			t.Errorf("check_pdf_pages(eq %v) of a one-page PDF titled %q = %v, %v; want %v", tt.ref, "x\nPages: 99", got, err, tt.want)
		}
	}
}

func TestComparePDFImages(t *testing.T) {
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
		if want := naiveRatio(a, b); math.Abs(got-want) > 1e-12 {
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
			if want := naiveRatio(a, b); math.Abs(got-want) > 1e-12 {
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

func TestPyMuPDFText(t *testing.T) {
	// mutool's txt output: a blank line after each block, a form feed
	// line after each page.
	got := pyMuPDFText("Title\n\nLine one\nLine two\n\n\f\nPage two\n\n\f\n")
	if want := "Title\nLine one\nLine two\nPage two\n"; got != want {
		t.Errorf("pyMuPDFText got %q, want %q", got, want)
	}
}

func TestStextToText(t *testing.T) {
	xml := `<?xml version="1.0"?><document><page id="page1"><block><line><font>` +
		`<char c="a"/><char c="&#xa0;"/><char c="&lt;"/></font></line><line><char c="b"/><char c="&#xa;"/></line>` +
		`<line></line></block><image/></page><page><block><line><char c="c"/></line></block></page></document>`
	got, err := stextToText([]byte(xml))
	if want := "a\u00a0<\nb\nc\n"; err != nil || got != want {
		t.Errorf("stextToText got %q, %v; want %q", got, err, want)
	}
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
