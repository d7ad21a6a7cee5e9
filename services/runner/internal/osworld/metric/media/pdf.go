package media

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// PDF text comes from MuPDF's mutool when it is installed, since OSWorld
// extracts with PyMuPDF (page.get_text()), which is MuPDF's text device:
// pdftext.js, run by mutool, writes what PyMuPDF does, character for
// character, by the rules of PyMuPDF 1.26 (osworldPyMuPDF). Debian 12's
// mutool is MuPDF 1.21, so where MuPDF itself changed since (1.26 also
// writes a glyph's CID for a character with no Unicode, which 1.21's
// structured text cannot give) the text can still differ. Without mutool, poppler's pdftotext -raw (content-stream
// order, like MuPDF) stands in; its lines break differently in tables, so
// the fuzzy ratio can differ slightly.

// osworldPyMuPDF is the PyMuPDF whose rules pdftext.js follows: the
// version OSWorld pins (1.26.4 in its uv.lock). Tests also run the
// script by the rules of 1.21, the version Debian packages, to check it
// against PyMuPDF itself.
const osworldPyMuPDF = "1.26"

// pdfText is the text of every page joined, stripped (compare_pdfs's
// extract_text_from_pdf).
func pdfText(ctx context.Context, path string) (string, error) {
	return pdfTextAs(ctx, path, osworldPyMuPDF)
}

// pdfTextAs is pdfText by the rules of the PyMuPDF version given.
func pdfTextAs(ctx context.Context, path, pymupdf string) (string, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("pdf %s is not a readable file", path)
	}
	var text string
	if _, err := exec.LookPath("mutool"); err == nil {
		text, err = mutoolText(ctx, path, pymupdf)
		if err != nil {
			return "", err
		}
	} else {
		out, err := runTool(ctx, "pdftotext", "-q", "-raw", "-enc", "UTF-8", path, "-")
		if err != nil {
			return "", err
		}
		text = strings.ToValidUTF8(strings.ReplaceAll(string(out), "\f", ""), "\uFFFD")
	}
	return strings.TrimFunc(text, metric.PyIsSpace), nil
}

// pdfTextScript writes a document's text as PyMuPDF does (see the
// script).
//
//go:embed pdftext.js
var pdfTextScript []byte

// mutoolText is PyMuPDF's text of all pages, unstripped: pdftext.js's
// output, with the NUL the script writes as C0 80 put back, decoded as
// that PyMuPDF version decodes its own: 1.21 the UTF-8 as Python does
// (metric.PyDecodeUTF8: a lone surrogate's three bytes are three U+FFFD), later
// versions a lone surrogate as one U+FFFD (oneFFFDPerSurrogate).
func mutoolText(ctx context.Context, path, pymupdf string) (string, error) {
	script, err := writeScript("pdftext-*.js", pdfTextScript)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errScript, err)
	}
	defer os.Remove(script)
	out, err := runTool(ctx, "mutool", "run", script, path, pymupdf)
	if err != nil {
		return "", err
	}
	out = bytes.ReplaceAll(out, []byte{0xc0, 0x80}, []byte{0})
	if pymupdf != "1.21" {
		out = oneFFFDPerSurrogate(out)
	}
	return metric.PyDecodeUTF8(out), nil
}

// oneFFFDPerSurrogate replaces each surrogate code point in b, encoded as
// UTF-8 would encode it (ED A0..BF 80..BF, which UTF-8 forbids), with
// U+FFFD, as PyMuPDF 1.26's JM_append_rune writes it. Done here rather
// than in pdftext.js: a check on every character there took a fifth of
// the script's time.
func oneFFFDPerSurrogate(b []byte) []byte {
	if bytes.IndexByte(b, 0xed) < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] == 0xed && i+2 < len(b) && b[i+1] >= 0xa0 && b[i+1] <= 0xbf && b[i+2] >= 0x80 && b[i+2] <= 0xbf {
			out = append(out, "\uFFFD"...)
			i += 3
			continue
		}
		out = append(out, b[i])
		i++
	}
	return out
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
// length. A path that is None or "" is what PyMuPDF's fitz.open makes of
// it, a new empty document: its text is "", so two of them, or one and a
// PDF without text, score 1.
func metricComparePDFs(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	res, isList := expected.([]any)
	var got []any
	if !isList {
		got, res = []any{result}, []any{expected}
	} else if got, isList = result.([]any); !isList {
		// zip() of a string's characters opens none; of None it raises.
		return 0, nil
	}
	if len(res) == 0 {
		return 0, fmt.Errorf("compare_pdfs: no expected PDF")
	}
	if err := requireTools("compare_pdfs", "pdftotext"); err != nil {
		if requireTools("compare_pdfs", "mutool") != nil {
			return 0, err
		}
	}
	// text is extract_text_from_pdf: ok is false where fitz.open raises
	// (a path that is not a string, a file MuPDF cannot read).
	text := func(v any) (string, bool, error) {
		p, isStr := v.(string)
		switch {
		case v == nil || isStr && p == "":
			return "", true, nil
		case !isStr:
			return "", false, nil
		}
		t, err := pdfText(ctx, p)
		if fail := pdfFailure(ctx, err); fail != nil {
			return "", false, fmt.Errorf("compare_pdfs: %w", fail)
		}
		return t, err == nil, nil
	}
	score := 0.0
	for i := 0; i < min(len(got), len(res)); i++ {
		t1, ok, err := text(got[i])
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		t2, ok, err := text(res[i])
		if err != nil {
			return 0, err
		}
		if !ok {
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
// caller removes.
func writePagesScript() (string, error) { return writeScript("pdfpages-*.js", pdfPagesScript) }

// errScript is a mutool script the runner could not write: its own
// failure, not the file's, which fails the evaluation instead of scoring
// 0.
var errScript = errors.New("write a mutool script")

// pdfFailure is err when it fails the evaluation rather than scoring 0:
// an input over a size cap, or a mutool script the runner could not
// write (its own failure, not the file's). Any other error is a PDF the
// tools cannot read, which OSWorld scores 0 too: it is noted, and gives
// nil.
func pdfFailure(ctx context.Context, err error) error {
	if errors.Is(err, errScript) {
		return err
	}
	return metric.Because(ctx, err)
}

// writeScript writes a mutool script to a temporary file named by
// pattern, which the caller removes: mutool reads its script from a file
// it can seek in, not a pipe.
func writeScript(pattern string, script []byte) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(script)
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
		return 0, metric.Because(ctx, err)
	}
	return metric.Bool(cmp(float64(n), ref)), nil
}

// maxPDFImages bounds the images compare_pdf_images extracts from one PDF.
const maxPDFImages = 500

// pdfImagesScript lists and extracts a PDF's images as PyMuPDF does (see
// the script).
//
//go:embed pdfimages.js
var pdfImagesScript []byte

// errExtractImage is PyMuPDF's extract_image raising, which ends
// OSWorld's compare_pdf_images with 0.
var errExtractImage = errors.New("PyMuPDF's extract_image would raise")

// pdfImages is the images of compare_pdf_images's extract_images_from_pdf
// in its order: each page's page.get_images(), and for each the bytes
// doc.extract_image(xref) gives, which mutool writes running
// pdfimages.js. An image listed twice is the same image twice; one whose
// bytes do not decode is left out, as OSWorld's loop skips what PIL cannot
// open. A document that is not a PDF has none.
func pdfImages(ctx context.Context, path string) ([]*pimg, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("pdf %s is not a readable file", path)
	}
	script, err := writeScript("pdfimages-*.js", pdfImagesScript)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errScript, err)
	}
	defer os.Remove(script)
	dir, err := os.MkdirTemp("", "pdfimages")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out, err := runTool(ctx, "mutool", "run", script, path, dir, strconv.Itoa(maxPDFImages), strconv.Itoa(maxPixels))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	count, ok := strings.CutPrefix(lines[len(lines)-1], "count ")
	n, err := strconv.Atoi(count)
	if reason, raised := strings.CutPrefix(lines[len(lines)-1], "raise "); raised {
		return nil, fmt.Errorf("pdf %s: %s: %w", path, reason, errExtractImage)
	}
	if !ok || err != nil {
		return nil, fmt.Errorf("mutool gave no image count for %s: %q", path, out[:min(len(out), 200)])
	}
	if n > maxPDFImages {
		return nil, fmt.Errorf("pdf %s has %d images, over the cap of %d: %w", path, n, maxPDFImages, metric.ErrOverCap)
	}
	var imgs []*pimg
	opened := map[string]*pimg{}
	for _, line := range lines[:len(lines)-1] {
		kind, arg, _ := strings.Cut(line, " ")
		switch kind {
		case "image":
			if img, seen := opened[arg]; seen {
				if img != nil {
					imgs = append(imgs, img)
				}
				continue
			}
			img, err := openImage(filepath.Join(dir, filepath.Base(arg)))
			if oc := metric.OverCap(err); oc != nil {
				return nil, oc
			}
			opened[arg] = img
			if err == nil {
				imgs = append(imgs, img)
			}
		case "size":
			// Too large to decode in mutool: over the cap, or past
			// what PIL opens, which skips it.
			var w, h int
			if _, err := fmt.Sscan(arg, &w, &h); err != nil {
				return nil, fmt.Errorf("mutool: bad image line %q", line)
			}
			if oc := metric.OverCap(checkPixels(w, h)); oc != nil {
				return nil, oc
			}
		default:
			return nil, fmt.Errorf("mutool: bad image line %q", line)
		}
	}
	return imgs, nil
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
	if err := requireTools("compare_pdf_images", "mutool"); err != nil {
		return 0, err
	}
	im1, err := pdfImages(ctx, p1)
	if err != nil {
		return 0, pdfFailure(ctx, err)
	}
	im2, err := pdfImages(ctx, p2)
	if err != nil {
		return 0, pdfFailure(ctx, err)
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
			return 0, metric.Because(ctx, fmt.Errorf("image %d: %w", i+1, errors.Join(err1, err2)))
		}
		if hashDistance(h1, h2) <= 5 {
			total++
		}
	}
	return float64(total) / float64(len(im1)), nil
}
