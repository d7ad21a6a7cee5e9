package metric

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// maxZipEntries bounds the entries of an archive a metric opens.
const maxZipEntries = 10_000

// OpenZip opens a getter's local zip file whose size is bounded by MaxFile
// (the central directory is read in full); a larger file, or one of more
// than maxZipEntries entries, is an error wrapping ErrOverCap.
func OpenZip(path string) (*zip.Reader, error) {
	b, err := boundedread.ReadFile(path, MaxFile)
	if oc := OverCap(err); oc != nil {
		return nil, oc
	}
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	if len(zr.File) > maxZipEntries {
		return nil, fmt.Errorf("%s: over %d entries: %w", path, maxZipEntries, ErrOverCap)
	}
	return zr, nil
}

// ZipEntryOverCap settles a zip entry whose header declares more than
// limit bytes, without holding them: it inflates the entry into nothing,
// at most limit+1 bytes. An entry that does inflate past limit is an
// error wrapping ErrOverCap; one that does not is a plain error, since
// its header then lies (a corrupt archive, which Python's zipfile refuses
// too, and which scores 0).
func ZipEntryOverCap(f *zip.File, limit int64) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(rc, limit+1))
	if n > limit {
		return fmt.Errorf("%s inflates past %d bytes: %w", f.Name, limit, ErrOverCap)
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%s: %d bytes declared, %d inflated: %w", f.Name, f.UncompressedSize64, n, err)
}

// ReadZipEntry inflates one entry, reading at most max bytes whatever its
// header claims.
func ReadZipEntry(f *zip.File, max int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: inflates past %d bytes: %w", f.Name, max, ErrOverCap)
	}
	return b, nil
}

const wordNS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

// docxParagraphs returns the text of a .docx body's paragraphs as
// python-docx's Document(path).paragraphs[i].text does: only the
// paragraphs directly in w:body (not in tables), each the text of its
// runs and of the runs of its hyperlinks, where w:tab and w:ptab read as a
// tab, w:br (a line break) and w:cr as a newline, w:noBreakHyphen as "-".
func docxParagraphs(path string) ([]string, error) {
	zr, err := OpenZip(path)
	if err != nil {
		return nil, err
	}
	var doc *zip.File
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			doc = f
		}
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: no word/document.xml", path)
	}
	b, err := ReadZipEntry(doc, MaxFile)
	if err != nil {
		return nil, err
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	var (
		paras []string
		cur   strings.Builder
		// stack holds the local names of the open w: elements.
		stack []string
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if t.Name.Space != wordNS {
				name = "{" + t.Name.Space + "}" + name
			}
			stack = append(stack, name)
			if len(stack) == 3 && stack[0] == "document" && stack[1] == "body" && name == "p" {
				cur.Reset()
			}
			if len(stack) >= 2 && stack[0] == "document" {
				inner := stack[1:]
				if len(inner) >= 4 && isRunChild(inner, name) {
					switch name {
					case "tab", "ptab":
						cur.WriteByte('\t')
					case "cr":
						cur.WriteByte('\n')
					case "noBreakHyphen":
						cur.WriteByte('-')
					case "br":
						if brIsLine(t) {
							cur.WriteByte('\n')
						}
					}
				}
			}
		case xml.CharData:
			if len(stack) >= 2 && stack[0] == "document" && stack[len(stack)-1] == "t" {
				inner := stack[1:]
				if isRunChild(inner, "t") {
					cur.Write(t)
				}
			}
		case xml.EndElement:
			if len(stack) == 3 && stack[0] == "document" && stack[1] == "body" && stack[2] == "p" {
				paras = append(paras, cur.String())
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	return paras, nil
}

// isRunChild tells whether the innermost element of path (body-rooted)
// is a child of a run that python-docx reads: body/p/r/x or
// body/p/hyperlink/r/x.
func isRunChild(path []string, name string) bool {
	n := len(path)
	if path[n-1] != name {
		return false
	}
	if n == 4 {
		return path[0] == "body" && path[1] == "p" && path[2] == "r"
	}
	return n == 5 && path[0] == "body" && path[1] == "p" && path[2] == "hyperlink" && path[3] == "r"
}

// brIsLine tells whether a w:br is a line break (no type, or
// textWrapping): page and column breaks add no text in python-docx.
func brIsLine(t xml.StartElement) bool {
	for _, a := range t.Attr {
		if a.Name.Local == "type" {
			return a.Value == "textWrapping"
		}
	}
	return true
}
