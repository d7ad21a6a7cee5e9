package media

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"slices"
	"testing"
)

// pdfWriter builds a minimal PDF by hand: numbered objects, a classic
// cross-reference table and a trailer, enough for poppler and MuPDF to read
// without repair. Object 1 is the catalog and 2 the page tree, which
// page fills in.
type pdfWriter struct {
	objs  [][]byte // objs[i] is object i+1's body
	pages []int
	info  int
	// count, when not 0, is the page tree's /Count instead of the
	// number of pages; linearizedPages, when not 0, puts a linearization
	// header declaring that many pages first in the file.
	count, linearizedPages int
	// treeExtra is more of the page tree's dictionary (resources the
	// pages inherit).
	treeExtra string
}

func newPDF() *pdfWriter {
	w := &pdfWriter{}
	w.add("<< /Type /Catalog /Pages 2 0 R >>")
	w.add("") // the page tree, written last
	return w
}

// add appends an object and returns its number.
func (w *pdfWriter) add(body string) int {
	w.objs = append(w.objs, []byte(body))
	return len(w.objs)
}

// stream appends a stream object, Flate-compressed when flate is set.
func (w *pdfWriter) stream(dict string, data []byte, flate bool) int {
	if flate {
		var z bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
		zw.Write(data)
		zw.Close()
		data = z.Bytes()
		dict += " /Filter /FlateDecode"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<< %s /Length %d >>\nstream\n", dict, len(data))
	b.Write(data)
	b.WriteString("\nendstream")
	w.objs = append(w.objs, b.Bytes())
	return len(w.objs)
}

// page adds a page of the given size drawing content with resources.
func (w *pdfWriter) page(width, height int, resources string, content []byte) {
	w.pageWith(width, height, "", resources, content)
}

// pageWith is page with more entries in the page dictionary (a /Rotate,
// a /CropBox, /Annots).
func (w *pdfWriter) pageWith(width, height int, extra, resources string, content []byte) {
	c := w.stream("", content, true)
	w.pages = append(w.pages, w.add(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] %s /Resources << %s >> /Contents %d 0 R >>",
		width, height, extra, resources, c)))
}

// bytes is the file.
func (w *pdfWriter) bytes() []byte {
	var kids bytes.Buffer
	for _, p := range w.pages {
		fmt.Fprintf(&kids, "%d 0 R ", p)
	}
	count := len(w.pages)
	if w.count != 0 {
		count = w.count
	}
	w.objs[1] = fmt.Appendf(nil, "<< /Type /Pages /Kids [%s] /Count %d %s>>", kids.Bytes(), count, w.treeExtra)
	objs := w.objs
	if w.linearizedPages != 0 {
		// Its /L, the file's length, is patched in once known.
		objs = append(slices.Clone(objs), fmt.Appendf(nil, "<< /Linearized 1 /L %s /H [ 0 0 ] /O %d /E 0 /N %d /T 0 >>",
			linearizedLength, w.pages[0], w.linearizedPages))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	order := make([]int, 0, len(objs))
	if w.linearizedPages != 0 {
		order = append(order, len(objs)-1)
	}
	for i := range w.objs {
		order = append(order, i)
	}
	for _, i := range order {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n", i+1)
		b.Write(objs[i])
		b.WriteString("\nendobj\n")
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R", len(objs)+1)
	if w.info != 0 {
		fmt.Fprintf(&b, " /Info %d 0 R", w.info)
	}
	fmt.Fprintf(&b, " >>\nstartxref\n%d\n%%%%EOF\n", xref)
	return bytes.Replace(b.Bytes(), []byte(linearizedLength), fmt.Appendf(nil, "%010d", b.Len()), 1)
}

// linearizedLength stands for the file's length in a linearization
// header until it is known; it has the length's width.
const linearizedLength = "LLLLLLLLLL"

// write writes the file to path.
func (w *pdfWriter) write(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, w.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
