package docs

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// docxPackage writes a .docx of one paragraph of text, with the image
// blob as word/media/image1.png when it is not nil. With pad, the
// document part is padded with that many spaces (which deflate to almost
// nothing); with lie, its zip header claims 1 GiB for the few bytes it
// holds, a corrupt package.
func docxPackage(t *testing.T, name, text string, image []byte, pad int, lie bool) string {
	t.Helper()
	const (
		nsW   = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
		relNS = "http://schemas.openxmlformats.org/package/2006/relationships"
	)
	docRels := `<Relationships xmlns="` + relNS + `">`
	if image != nil {
		docRels += `<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/image1.png"/>`
	}
	docRels += `</Relationships>`
	parts := map[string]string{
		"[Content_Types].xml": `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="png" ContentType="image/png"/>` +
			`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`,
		"_rels/.rels": `<Relationships xmlns="` + relNS + `">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`,
		"word/_rels/document.xml.rels": docRels,
		"word/document.xml":            `<w:document xmlns:w="` + nsW + `"><w:body><w:p><w:r><w:t>` + text + `</w:t></w:r></w:p></w:body></w:document>`,
	}
	if image != nil {
		parts["word/media/image1.png"] = string(image)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, body := range parts {
		var (
			w   interface{ Write([]byte) (int, error) }
			err error
		)
		switch {
		case n == "word/document.xml" && lie:
			w, err = zw.CreateRaw(&zip.FileHeader{Name: n, Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte(body)),
				CompressedSize64: uint64(len(body)), UncompressedSize64: 1 << 30})
		case n == "word/document.xml" && pad > 0:
			// Deflated as it is written: the spaces never sit in memory.
			w, err = zw.Create(n)
			if err == nil {
				w.Write([]byte(body))
				spaces := bytes.Repeat([]byte(" "), 1<<20)
				for left := pad; left > 0; left -= len(spaces) {
					w.Write(spaces[:min(left, len(spaces))])
				}
				continue
			}
		default:
			w, err = zw.Create(n)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pngClaiming is a PNG signature and IHDR chunk claiming w×h RGB pixels.
func pngClaiming(w, h int) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := make([]byte, 4+13)
	copy(chunk, "IHDR")
	binary.BigEndian.PutUint32(chunk[4:], uint32(w))
	binary.BigEndian.PutUint32(chunk[8:], uint32(h))
	chunk[12], chunk[13] = 8, 2
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// TestDocsOverCap: a document over one of the readers' caps, which
// python-docx (or rapidfuzz, or PIL) would read, is not scored: the
// metric returns an error wrapping metric.ErrOverCap that names the cap.
// A document part over its cap, and an image over 64 megapixels, scored
// 0; a text over 2^18 characters failed without saying it was a cap.
func TestDocsOverCap(t *testing.T) {
	small := docxPackage(t, "small.docx", "hello", nil, 0, false)
	// A document part of 64 MiB and one byte: python-docx reads it.
	bigPart := docxPackage(t, "big-part.docx", "hello", nil, 64<<20, false)
	lying := docxPackage(t, "lying.docx", "hello", nil, 0, true)
	longText := strings.Repeat("a", maxRatioRunes+1)
	long1 := docxPackage(t, "long1.docx", longText, nil, 0, false)
	long2 := docxPackage(t, "long2.docx", longText, nil, 0, false)
	bigImage := docxPackage(t, "big-image.docx", "hello", pngClaiming(8200, 8200), 0, false)
	smallImage := docxPackage(t, "small-image.docx", "hello", pngImage(color.White, 4, 4), 0, false)
	tests := []struct {
		name             string
		metric           string
		result, expected any
		opts             map[string]any
		wantText         string
	}{
		{"compare_docx_files, a part over its cap", "compare_docx_files", bigPart, small, nil, "over the cap of 67108864 bytes a part"},
		{"compare_docx_files, the expected part over its cap", "compare_docx_files", small, bigPart, nil, "over the cap of 67108864 bytes a part"},
		{"has_page_numbers_in_footers, a part over its cap", "has_page_numbers_in_footers", bigPart, nil, nil, "over the cap of 67108864 bytes a part"},
		{"compare_docx_files, a text over 2^18 characters", "compare_docx_files", long1, long2,
			map[string]any{"content_only": true}, "over the cap of 262144"},
		{"compare_docx_images, an image over 64 megapixels", "compare_docx_images", bigImage, smallImage, nil,
			"image of 8200x8200 pixels is over the cap of 67108864 pixels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, tt.opts)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, tt.wantText)
			}
		})
	}
	// Within the caps the same documents score as before: a document
	// that does not open, or whose header claims a size its part does not
	// hold, scores 0 without an error.
	notZip := filepath.Join(t.TempDir(), "not.docx")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name             string
		result, expected string
		want             float64
	}{
		{"same text", small, small, 1},
		{"corrupt result", notZip, small, 0},
		{"lying header", lying, small, 0},
	} {
		if got, err := Metrics()["compare_docx_files"].Fn(context.Background(), tt.result, tt.expected, true, nil); err != nil || got != tt.want {
			t.Errorf("compare_docx_files, %s = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}
