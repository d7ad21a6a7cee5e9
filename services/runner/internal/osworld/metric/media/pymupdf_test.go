package media

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pyMuPDF returns a Python that imports PyMuPDF (fitz), Pillow, NumPy and
// SciPy, the oracle's needs (Debian's python3-fitz, python3-pil,
// python3-numpy, python3-scipy: imagehash's DCT is scipy's).
// Without one the test fails in CI and is skipped elsewhere.
func pyMuPDF(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		py, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if exec.Command(py, "-c", "import fitz, PIL, numpy, scipy.fftpack").Run() == nil {
			return py
		}
	}
	const msg = "no python3 with PyMuPDF, Pillow, NumPy and SciPy (python3-fitz, python3-pil, python3-numpy, python3-scipy)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// oracleImage is one image of page.get_images() as PIL opened the bytes
// of extract_image, or Skip, why PIL could not.
type oracleImage struct {
	Size  [2]int
	Mode  string
	LMD5  string
	Phash string
	Skip  string
}

// oracleDoc is what PyMuPDF read from one document.
type oracleDoc struct {
	Text        *string
	TextError   string `json:"text_error"`
	Images      []oracleImage
	ImagesError string `json:"images_error"`
}

// TestPDFsMatchPyMuPDF is a differential test against PyMuPDF, the library
// OSWorld's compare_pdfs and compare_pdf_images read PDFs with: on PDFs
// LibreOffice makes from a Word document, a spreadsheet, a presentation
// and HTML pages, a page Chromium prints, and PDFs written by hand for
// the corners (fonts, characters on the page's edges, ToUnicode maps to
// controls and surrogates, turned pages, annotations; images drawn twice,
// unused, inline, in forms and patterns, of every filter and colour
// space), pdfText must be PyMuPDF's text exactly, and pdfImages its
// images: the same number, and each of the same size and mode with the
// same grey pixels and perceptual hash. The PyMuPDF must be the MuPDF
// version mutool is (Debian's python3-fitz and mupdf-tools are).
func TestPDFsMatchPyMuPDF(t *testing.T) {
	py := pyMuPDF(t)
	needTools(t, "mutool", "chromium")
	office := officePDFs(t)
	dir := t.TempDir()
	paths := handPDFs(t, dir)
	paths = append(paths, chromePDF(t, dir))
	officePaths, err := filepath.Glob(filepath.Join(office, "*.pdf"))
	if err != nil || len(officePaths) < 10 {
		t.Fatalf("LibreOffice made %d PDFs (%v), want 10", len(officePaths), err)
	}
	paths = append(paths, officePaths...)
	// An encrypted document (PyMuPDF raises: no text, no images), one
	// encrypted with an empty user password (read as any), and a file
	// MuPDF opens as an image, not a PDF (its text is empty and it has
	// no PDF images).
	run(t, "mutool", "clean", "-E", "aes-128", "-U", "user", "-O", "owner", filepath.Join(dir, "misc.pdf"), filepath.Join(dir, "encrypted.pdf"))
	run(t, "mutool", "clean", "-E", "aes-128", "-O", "owner", filepath.Join(dir, "img-kinds.pdf"), filepath.Join(dir, "owner-only.pdf"))
	png, err := os.ReadFile(fixture("src.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "image.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(dir, "encrypted.pdf"), filepath.Join(dir, "owner-only.pdf"), filepath.Join(dir, "image.png"))

	out, err := exec.Command(py, append([]string{fixture("pymupdf_oracle.py")}, paths...)...).Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	versions, data, _ := bytes.Cut(out, []byte("\n"))
	mutoolVersion, _ := exec.Command("mutool", "-v").CombinedOutput()
	if fields := strings.Fields(string(versions)); len(fields) != 2 || !strings.Contains(string(mutoolVersion), "version "+fields[1]) {
		msg := fmt.Sprintf("PyMuPDF's MuPDF (%s) is not mutool's (%s)", versions, bytes.TrimSpace(mutoolVersion))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var oracle map[string]oracleDoc
	if err := json.Unmarshal(data, &oracle); err != nil {
		t.Fatalf("oracle output: %v", err)
	}
	for _, p := range paths {
		want, ok := oracle[p]
		if !ok {
			t.Fatalf("oracle said nothing of %s", p)
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			text, err := pdfTextAs(t.Context(), p, "1.21")
			switch {
			case want.Text == nil && err == nil:
				t.Errorf("pdfText got %q, want an error (PyMuPDF: %s)", text, want.TextError)
			case want.Text != nil && (err != nil || text != *want.Text):
				t.Errorf("pdfText got %q, %v\nwant %q", text, err, *want.Text)
			}
			imgs, err := pdfImages(t.Context(), p)
			if want.ImagesError != "" {
				if err == nil {
					t.Errorf("pdfImages got %d images, want an error (PyMuPDF: %s)", len(imgs), want.ImagesError)
				}
				return
			}
			var opened []oracleImage
			for _, im := range want.Images {
				if im.Skip == "" {
					opened = append(opened, im)
				}
			}
			if err != nil || len(imgs) != len(opened) {
				t.Fatalf("pdfImages got %d images, %v; want %d: %+v", len(imgs), err, len(opened), opened)
			}
			for i, im := range imgs {
				w := opened[i]
				got := oracleImage{Size: [2]int{im.w, im.h}, Mode: im.mode}
				if l, err := im.convert("L"); err == nil {
					sum := md5.Sum(l.pix)
					got.LMD5 = hex.EncodeToString(sum[:])
				}
				if h, err := phash(im); err == nil {
					got.Phash = fmt.Sprintf("%016x", h)
				}
				if got != w {
					t.Errorf("image %d got %+v\nwant %+v", i, got, w)
				}
			}
		})
	}
}
