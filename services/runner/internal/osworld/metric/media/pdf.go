package media

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// PDF text comes from MuPDF's mutool when it is installed, since OSWorld
// extracts with PyMuPDF (page.get_text()), which is MuPDF's text device:
// the output then matches PyMuPDF's line for line. Without mutool, poppler's
// pdftotext -raw (content-stream order, like MuPDF) stands in; its lines
// break differently in tables, so the fuzzy ratio can differ slightly.

// pdfText is the text of every page joined, stripped (compare_pdfs's
// extract_text_from_pdf).
func pdfText(ctx context.Context, path string) (string, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("pdf %s is not a readable file", path)
	}
	var text string
	if _, err := exec.LookPath("mutool"); err == nil {
		text, err = mutoolText(ctx, path)
		if err != nil {
			return "", err
		}
	} else {
		out, err := runTool(ctx, "pdftotext", "-q", "-raw", "-enc", "UTF-8", path, "-")
		if err != nil {
			return "", err
		}
		text = strings.ReplaceAll(string(out), "\f", "")
	}
	return strings.TrimFunc(strings.ToValidUTF8(text, "\uFFFD"), metric.PyIsSpace), nil
}

// mutoolOptions are PyMuPDF's TEXTFLAGS_TEXT for get_text("text"), as
// mutool convert's text options (the mediabox clip is its default).
const mutoolOptions = "preserve-whitespace,preserve-ligatures"

// mutoolText is PyMuPDF's text for all pages, rebuilt from MuPDF's
// structured text (every character as the text device keeps it): each
// line's characters, then a newline unless the line ends with one. A
// document whose structured text passes the output cap falls back to
// mutool's plain text writer.
func mutoolText(ctx context.Context, path string) (string, error) {
	dir, err := os.MkdirTemp("", "mutool")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	// mutool convert writes only to a named file.
	out := filepath.Join(dir, "out.xml")
	if _, err := runTool(ctx, "mutool", "convert", "-F", "stext", "-O", mutoolOptions, "-o", out, path); err != nil {
		return "", err
	}
	data, err := boundedread.ReadFile(out, maxToolOutput)
	if err == nil {
		return stextToText(data)
	}
	txt := filepath.Join(dir, "out.txt")
	if _, err := runTool(ctx, "mutool", "convert", "-F", "text", "-O", mutoolOptions, "-o", txt, path); err != nil {
		return "", err
	}
	plain, err := boundedread.ReadFile(txt, maxToolOutput)
	if err != nil {
		return "", err
	}
	return pyMuPDFText(string(plain)), nil
}

// stextToText reads the text out of mutool's stext XML: each char
// element's c attribute, a newline after each line that does not end in
// one. A 50-page document is 20 MB of this XML, so it is scanned by hand:
// encoding/xml's tokens took most of compare_pdfs' time.
func stextToText(data []byte) (string, error) {
	var b strings.Builder
	var last rune
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '<')
		if j < 0 {
			break
		}
		i += j + 1
		end := tagEnd(data[i:])
		if end < 0 {
			return "", fmt.Errorf("mutool stext: unterminated tag at byte %d", i-1)
		}
		tag := data[i : i+end]
		i += end + 1
		switch tagName(tag) {
		case "/line":
			if last != 0 && last != '\n' {
				b.WriteByte('\n')
			}
		case "line":
			last = 0
		case "char":
			v, ok := tagAttr(tag, "c")
			if !ok {
				continue
			}
			if bytes.IndexByte(v, '&') >= 0 {
				v = []byte(html.UnescapeString(string(v)))
			}
			b.Write(v)
			if r, _ := utf8.DecodeLastRune(v); len(v) > 0 {
				last = r
			}
		}
	}
	return b.String(), nil
}

// tagEnd is the index of the '>' closing the tag that starts data, outside
// quoted attribute values; -1 when there is none.
func tagEnd(data []byte) int {
	var quote byte
	for i, c := range data {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return i
		}
	}
	return -1
}

// tagName is the element name of a tag's text ("line", "/line", "char").
func tagName(tag []byte) string {
	n := bytes.IndexAny(tag, " \t\r\n/>")
	if n == 0 && len(tag) > 0 && tag[0] == '/' {
		if m := bytes.IndexAny(tag[1:], " \t\r\n>"); m >= 0 {
			return string(tag[:m+1])
		}
		return string(tag)
	}
	if n < 0 {
		return string(tag)
	}
	return string(tag[:n])
}

// tagAttr is the raw (still escaped) value of attribute name in a tag.
func tagAttr(tag []byte, name string) ([]byte, bool) {
	i := bytes.IndexAny(tag, " \t\r\n")
	for i >= 0 && i < len(tag) {
		for i < len(tag) && (tag[i] == ' ' || tag[i] == '\t' || tag[i] == '\r' || tag[i] == '\n') {
			i++
		}
		eq := bytes.IndexByte(tag[i:], '=')
		if eq < 0 || i+eq+1 >= len(tag) {
			return nil, false
		}
		key := bytes.TrimSpace(tag[i : i+eq])
		q := tag[i+eq+1]
		if q != '"' && q != '\'' {
			return nil, false
		}
		start := i + eq + 2
		stop := bytes.IndexByte(tag[start:], q)
		if stop < 0 {
			return nil, false
		}
		if string(key) == name {
			return tag[start : start+stop], true
		}
		i = start + stop + 1
	}
	return nil, false
}

var newlineRuns = regexp.MustCompile(`\n+`)

// pyMuPDFText turns mutool's text output into PyMuPDF's get_text() for
// all pages: mutool ends each block with an extra newline (and mutool draw
// each page with a form feed line), which PyMuPDF does not print.
func pyMuPDFText(out string) string {
	var b strings.Builder
	for i, page := range strings.Split(out, "\f") {
		if i > 0 {
			page = strings.TrimPrefix(page, "\n")
		}
		b.WriteString(newlineRuns.ReplaceAllString(page, "\n"))
	}
	return b.String()
}

// maxRatioCells bounds the LCS work (rune pairs) of one comparison, about
// ten seconds of the bit-parallel loop.
const maxRatioCells = 1 << 38

// ratio is rapidfuzz's fuzz.ratio/100 on two strings of any length:
// 2·LCS/(|a|+|b|) over code points, 1 for two empty strings. The LCS uses
// the bit-parallel algorithm rapidfuzz uses, so long documents are exact.
// It stops with ctx's error when ctx ends.
func ratio(ctx context.Context, a, b string) (float64, error) {
	if a == b {
		// What the LCS would say, without its quadratic work: the
		// matching pair of every comparison of a long document.
		return 1, nil
	}
	ra, rb := []rune(a), []rune(b)
	total := len(ra) + len(rb)
	if total == 0 {
		return 1, nil
	}
	// A common prefix and suffix are part of every longest common
	// subsequence: only what lies between needs the LCS (rapidfuzz trims
	// them too), which for a document edited in one place is little.
	common := 0
	for len(ra) > 0 && len(rb) > 0 && ra[0] == rb[0] {
		ra, rb, common = ra[1:], rb[1:], common+1
	}
	for len(ra) > 0 && len(rb) > 0 && ra[len(ra)-1] == rb[len(rb)-1] {
		ra, rb, common = ra[:len(ra)-1], rb[:len(rb)-1], common+1
	}
	if len(ra) > len(rb) {
		ra, rb = rb, ra
	}
	if len(ra) == 0 {
		return 2 * float64(common) / float64(total), nil
	}
	if float64(len(ra))*float64(len(rb)) > maxRatioCells {
		return 0, fmt.Errorf("texts of %d and %d characters are too long to compare (over %d character pairs): %w",
			len(ra), len(rb), int64(maxRatioCells), metric.ErrOverCap)
	}
	words := (len(ra) + 63) / 64
	pm := map[rune][]uint64{}
	for i, r := range ra {
		m := pm[r]
		if m == nil {
			m = make([]uint64, words)
			pm[r] = m
		}
		m[i/64] |= 1 << (i % 64)
	}
	v := make([]uint64, words)
	for i := range v {
		v[i] = ^uint64(0)
	}
	zero := make([]uint64, words)
	for n, r := range rb {
		// A pass costs words; at most 4096 words run between two looks
		// at ctx.
		if n%max(1, 4096/words) == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		m := pm[r]
		if m == nil {
			m = zero
		}
		var carry uint64
		for w := range words {
			u := v[w] & m[w]
			sum, c := bits.Add64(v[w], u, carry)
			carry = c
			v[w] = sum | (v[w] &^ m[w])
		}
	}
	ones := 0
	for w, x := range v {
		if w == words-1 && len(ra)%64 != 0 {
			x &= 1<<(len(ra)%64) - 1
		}
		ones += bits.OnesCount64(x)
	}
	lcs := common + len(ra) - ones
	return 2 * float64(lcs) / float64(total), nil
}

// metricComparePDFs is chrome.py's compare_pdfs: the mean over the pairs
// of fuzz.ratio of the two texts; a pair whose PDF cannot be read adds 0,
// as OSWorld's try/except does, and the mean is over the expected list's
// length.
func metricComparePDFs(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if result == nil {
		return 0, nil
	}
	res, isList := expected.([]any)
	var got []any
	if !isList {
		got, res = []any{result}, []any{expected}
	} else {
		got, _ = result.([]any)
	}
	if len(res) == 0 {
		return 0, fmt.Errorf("compare_pdfs: no expected PDF")
	}
	if err := requireTools("compare_pdfs", "pdftotext"); err != nil {
		if requireTools("compare_pdfs", "mutool") != nil {
			return 0, err
		}
	}
	score := 0.0
	for i := 0; i < min(len(got), len(res)); i++ {
		p1, _ := got[i].(string)
		p2, _ := res[i].(string)
		if p1 == "" || p2 == "" {
			continue
		}
		t1, err := pdfText(ctx, p1)
		if oc := metric.OverCap(err); oc != nil {
			return 0, fmt.Errorf("compare_pdfs: %w", oc)
		}
		if err != nil {
			continue
		}
		t2, err := pdfText(ctx, p2)
		if oc := metric.OverCap(err); oc != nil {
			return 0, fmt.Errorf("compare_pdfs: %w", oc)
		}
		if err != nil {
			continue
		}
		r, err := ratio(ctx, t1, t2)
		if err != nil {
			return 0, err
		}
		score += r
	}
	return score / float64(len(res)), nil
}

// pdfPagesScript counts a PDF's pages as pypdf does (see the script).
//
//go:embed pdfpages.js
var pdfPagesScript []byte

// writePagesScript writes pdfPagesScript to a temporary file, which the
// caller removes: mutool reads its script from a file it can seek in, not
// a pipe.
func writePagesScript() (string, error) {
	f, err := os.CreateTemp("", "pdfpages-*.js")
	if err != nil {
		return "", err
	}
	_, err = f.Write(pdfPagesScript)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// pdfPages is pypdf's len(PdfReader(path).pages): the leaves of the page
// tree, counted by MuPDF running script (writePagesScript). pdfinfo
// answered before, with the count the file declares (the page tree's
// /Count, or a linearization header's /N), which a file can set to
// anything; and it printed the document's title raw before its count, so
// a title holding "\nPages: 99" set it too.
func pdfPages(ctx context.Context, script, path string) (int, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("pdf %s is not a readable file", path)
	}
	out, err := runTool(ctx, "mutool", "run", script, path)
	if err != nil {
		return 0, err
	}
	v, ok := bytes.CutPrefix(bytes.TrimSpace(out), []byte("count "))
	n, err := strconv.Atoi(string(v))
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("mutool gave no page count for %s: %q", path, out[:min(len(out), 200)])
	}
	return n, nil
}

// metricPDFPages is pdf.py's check_pdf_pages: the page count related to
// rules["ref_value"] by rules["relation"] (an operator module name).
func metricPDFPages(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	ref, ok := rule["ref_value"].(float64)
	if !ok {
		return 0, fmt.Errorf("check_pdf_pages: rules.ref_value must be a number")
	}
	rel, _ := rule["relation"].(string)
	cmp, ok := map[string]func(a, b float64) bool{
		"eq": func(a, b float64) bool { return a == b },
		"ne": func(a, b float64) bool { return a != b },
		"lt": func(a, b float64) bool { return a < b },
		"le": func(a, b float64) bool { return a <= b },
		"gt": func(a, b float64) bool { return a > b },
		"ge": func(a, b float64) bool { return a >= b },
	}[rel]
	if !ok {
		return 0, fmt.Errorf("check_pdf_pages: relation %q is not supported", rel)
	}
	p, ok := result.(string)
	if !ok {
		return 0, nil
	}
	if err := requireTools("check_pdf_pages", "mutool"); err != nil {
		return 0, err
	}
	// A script the runner cannot write is its own failure, not the
	// file's: the evaluation fails instead of scoring 0.
	script, err := writePagesScript()
	if err != nil {
		return 0, fmt.Errorf("check_pdf_pages: write the page-count script: %w", err)
	}
	defer os.Remove(script)
	n, err := pdfPages(ctx, script, p)
	if err != nil {
		return 0, metric.OverCap(err)
	}
	return metric.Bool(cmp(float64(n), ref)), nil
}

// maxPDFImages bounds the images compare_pdf_images extracts from one PDF.
const maxPDFImages = 500

// pdfImages extracts a PDF's images in page order with pdfimages, leaving
// out the soft masks and masks of other images (PyMuPDF's get_images lists
// a page's image XObjects, which those are not). An image that does not
// decode is left out, as OSWorld's loop skips what PIL cannot open.
func pdfImages(ctx context.Context, path string) ([]*pimg, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("pdf %s is not a readable file", path)
	}
	list, err := runTool(ctx, "pdfimages", "-list", path)
	if err != nil {
		return nil, err
	}
	var keep []bool
	for i, line := range strings.Split(string(list), "\n") {
		f := strings.Fields(line)
		if i < 2 || len(f) < 3 {
			continue
		}
		keep = append(keep, f[2] == "image" || f[2] == "stencil")
	}
	if len(keep) > maxPDFImages {
		return nil, fmt.Errorf("pdf %s has %d images, over the cap of %d: %w", path, len(keep), maxPDFImages, metric.ErrOverCap)
	}
	dir, err := os.MkdirTemp("", "pdfimages")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := runTool(ctx, "pdfimages", "-all", path, filepath.Join(dir, "img")); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "img-*"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []*pimg
	for i, f := range files {
		if i < len(keep) && !keep[i] {
			continue
		}
		img, err := openImage(f)
		if oc := metric.OverCap(err); oc != nil {
			return nil, oc
		}
		if err != nil {
			continue
		}
		out = append(out, img)
	}
	return out, nil
}

// metricComparePDFImages is chrome.py's compare_pdf_images: the same
// number of images, and the share of pairs whose perceptual hashes differ
// in at most 5 bits (1 when neither PDF has images).
func metricComparePDFImages(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	p1, _ := result.(string)
	p2, _ := expected.(string)
	if p1 == "" || p2 == "" {
		return 0, nil
	}
	if err := requireTools("compare_pdf_images", "pdfimages"); err != nil {
		return 0, err
	}
	im1, err := pdfImages(ctx, p1)
	if err != nil {
		return 0, metric.OverCap(err)
	}
	im2, err := pdfImages(ctx, p2)
	if err != nil {
		return 0, metric.OverCap(err)
	}
	if len(im1) != len(im2) {
		return 0, nil
	}
	if len(im1) == 0 {
		return 1, nil
	}
	total := 0
	for i := range im1 {
		h1, err1 := phash(im1[i])
		h2, err2 := phash(im2[i])
		if err1 != nil || err2 != nil {
			return 0, nil
		}
		if hashDistance(h1, h2) <= 5 {
			total++
		}
	}
	return float64(total) / float64(len(im1)), nil
}
