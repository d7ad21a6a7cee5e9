package osworld

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// needProgram skips without prog, but fails in CI, where the image has it.
func needProgram(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", prog, err)
		}
		t.Skipf("%s not installed: %v", prog, err)
	}
	return p
}

// odp writes an OpenDocument presentation: slide 1 with a bitmap
// background and an audio object (media is embedded in the package when it
// is a relative path, else linked), slide 2 with the same background.
func odp(t *testing.T, path, media string, wav, png []byte) {
	t.Helper()
	content := `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3">
<office:automatic-styles><style:style style:name="dp1" style:family="drawing-page"><style:drawing-page-properties draw:fill="bitmap" draw:fill-image-name="bgimg" style:repeat="stretch" presentation:background-visible="true" presentation:background-objects-visible="true"/></style:style></office:automatic-styles>
<office:body><office:presentation>
<draw:page draw:name="page1" draw:style-name="dp1" draw:master-page-name="Default"><draw:frame svg:width="5cm" svg:height="5cm" svg:x="1cm" svg:y="1cm"><draw:plugin xlink:href="` + media + `" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad" draw:mime-type="application/vnd.sun.star.media"/></draw:frame></draw:page>
<draw:page draw:name="page2" draw:style-name="dp1" draw:master-page-name="Default"/>
</office:presentation></office:body></office:document-content>`
	styles := `<?xml version="1.0" encoding="UTF-8"?>
<office:document-styles xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3">
<office:styles><draw:fill-image draw:name="bgimg" xlink:href="Pictures/bg.png" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></office:styles>
<office:automatic-styles><style:page-layout style:name="PM1"><style:page-layout-properties fo:page-width="28cm" fo:page-height="15.75cm" style:print-orientation="landscape"/></style:page-layout></office:automatic-styles>
<office:master-styles><style:master-page style:name="Default" style:page-layout-name="PM1"/></office:master-styles>
</office:document-styles>`
	manifest := `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">
<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.presentation"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
<manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/>
<manifest:file-entry manifest:full-path="Pictures/bg.png" manifest:media-type="image/png"/>`
	embedded := !strings.HasPrefix(media, "file://")
	if embedded {
		manifest += `<manifest:file-entry manifest:full-path="` + media + `" manifest:media-type="audio/wav"/>`
	}
	manifest += `</manifest:manifest>`
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	parts := []struct {
		name string
		data []byte
	}{{"mimetype", []byte("application/vnd.oasis.opendocument.presentation")}, {"content.xml", []byte(content)}, {"styles.xml", []byte(styles)}, {"META-INF/manifest.xml", []byte(manifest)}, {"Pictures/bg.png", png}}
	if embedded {
		parts = append(parts, struct {
			name string
			data []byte
		}{media, wav})
	}
	for _, p := range parts {
		w, err := z.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSlideGetters reads presentations that LibreOffice wrote (converted
// from ODP to PPTX, as the agent's saved files are), one with the audio
// embedded and one with it linked. The answers are those OSWorld's
// get_audio_in_slide and get_background_image_in_slide give for the same
// files: the embedded media extracted into the cache, the linked audio
// fetched from the guest, nil for slides without one.
func TestSlideGetters(t *testing.T) {
	soffice := needProgram(t, "soffice")
	ffmpeg := needProgram(t, "ffmpeg")
	dir := t.TempDir()
	wavPath, pngPath := filepath.Join(dir, "a.wav"), filepath.Join(dir, "bg.png")
	for _, args := range [][]string{
		{"-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-ar", "8000", wavPath},
		{"-loglevel", "error", "-f", "lavfi", "-i", "color=c=red:s=64x48", "-frames:v", "1", pngPath},
	} {
		if out, err := exec.Command(ffmpeg, args...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v: %s", err, out)
		}
	}
	wav, _ := os.ReadFile(wavPath)
	png, _ := os.ReadFile(pngPath)
	odp(t, filepath.Join(dir, "embedded.odp"), "Media/a.wav", wav, png)
	odp(t, filepath.Join(dir, "linked.odp"), "file://"+wavPath, wav, png)
	out := filepath.Join(dir, "out")
	// A profile of its own, so that parallel LibreOffice runs do not meet.
	cmd := exec.Command(soffice, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"), "--headless", "--convert-to", "pptx", "--outdir", out,
		filepath.Join(dir, "embedded.odp"), filepath.Join(dir, "linked.odp"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v: %s", err, b)
	}
	const deck = "/home/user/Desktop/deck.pptx"
	tests := []struct {
		pptx   string
		getter string
		index  float64
		want   string // "cache:<name>" holding bytes, or "" for nil
		bytes  []byte
		note   string // why nil
	}{
		{"embedded", "audio_in_slide", 0, "cache:ppt/media/media2.wav", wav, ""},
		{"embedded", "audio_in_slide", 1, "", nil, `the result getter "audio_in_slide" gave None: slide 2 of ` + deck + ` has no audio`},
		{"embedded", "audio_in_slide", 5, "", nil, `the result getter "audio_in_slide" gave None: ` + deck + ` has no slide 6`},
		{"embedded", "background_image_in_slide", 0, "cache:ppt/media/image1.png", png, ""},
		{"embedded", "background_image_in_slide", 1, "cache:ppt/media/image1.png", png, ""},
		{"embedded", "background_image_in_slide", 5, "", nil, `the result getter "background_image_in_slide" gave None: ` + deck + ` has no slide 6`},
		{"linked", "audio_in_slide", 0, "cache:x.wav", wav, ""},
		{"linked", "background_image_in_slide", 1, "cache:ppt/media/image1.png", png, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%v", tt.pptx, tt.getter, tt.index), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(out, tt.pptx+".pptx"))
			if err != nil {
				t.Fatal(err)
			}
			g, gc := newTestGuest(t)
			g.files[deck] = b
			g.files[wavPath] = wav
			s := &Session{Guest: gc, CacheDir: t.TempDir()}
			ctx, notes := metric.WithNotes(context.Background())
			got, err := s.get(ctx, "result", map[string]any{"type": tt.getter, "ppt_file_path": deck, "slide_index": tt.index, "dest": "x.wav"})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if tt.want == "" {
				if n := notes.List(); got != nil || !slices.Equal(n, []string{tt.note}) {
					t.Errorf("get = %v, notes %q; want nil, noting %q", got, n, tt.note)
				}
				return
			}
			want := filepath.Join(s.CacheDir, strings.TrimPrefix(tt.want, "cache:"))
			data, _ := os.ReadFile(want)
			if got != want || !bytes.Equal(data, tt.bytes) {
				t.Errorf("get = %v (%d bytes), want %s holding %d bytes", got, len(data), want, len(tt.bytes))
			}
		})
	}
}

// TestSlideGetterBadInput: a missing presentation, a file that is not a
// zip, and a zip bomb member are errors (OSWorld raises), not panics or
// scores.
func TestSlideGetterBadInput(t *testing.T) {
	var bomb bytes.Buffer
	z := zip.NewWriter(&bomb)
	rels := `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio" Target="../media/big.wav"/></Relationships>`
	w, _ := z.Create("ppt/slides/_rels/slide1.xml.rels")
	_, _ = w.Write([]byte(rels))
	w, _ = z.Create("ppt/media/big.wav")
	_, _ = w.Write(bytes.Repeat([]byte{0}, 4<<20))
	_ = z.Close()
	tests := []struct {
		name string
		file []byte // nil: missing
	}{
		{"missing", nil},
		{"not a zip", []byte("plain text")},
		{"zip bomb", bomb.Bytes()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			if tt.file != nil {
				g.files["/d.pptx"] = tt.file
			}
			s := &Session{Guest: gc, CacheDir: t.TempDir(), MaxDownload: 1 << 20}
			got, err := s.get(context.Background(), "result", map[string]any{"type": "audio_in_slide", "ppt_file_path": "/d.pptx", "slide_index": 0.0, "dest": "a.wav"})
			if err == nil {
				t.Errorf("get = %v, want an error", got)
			}
		})
	}
}

// TestSlideGettersAsPython pins answers of OSWorld's getters/impress.py
// that TestSlideGettersMatchImpressPy found differing: a slide index that
// names no slide (-1, past the end) is None, not an error; int() reads a
// boolean; a relationship without a Type raises (rel.attrib["Type"]).
func TestSlideGettersAsPython(t *testing.T) {
	deck := func(rels string) []byte {
		var buf bytes.Buffer
		z := zip.NewWriter(&buf)
		for name, body := range map[string]string{
			"ppt/slides/slide2.xml": `<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">` +
				`<p:cSld><p:bg><p:bgPr><a:blipFill><a:blip r:embed="rId1"/></a:blipFill></p:bgPr></p:bg></p:cSld></p:sld>`,
			"ppt/slides/_rels/slide2.xml.rels": `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + rels + `</Relationships>`,
			"ppt/media/image1.png":             "png",
		} {
			w, _ := z.Create(name)
			_, _ = w.Write([]byte(body))
		}
		_ = z.Close()
		return buf.Bytes()
	}
	image := `<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="../media/image1.png"/>`
	tests := []struct {
		name   string
		rels   string
		getter string
		index  any
		want   string // the cache path, "" for nil
		fails  bool
	}{
		{"true is slide 2", image, "background_image_in_slide", true, "ppt/media/image1.png", false},
		{"index -1: no slide0.xml", image, "background_image_in_slide", -1.0, "", false},
		{"index past the end", image, "audio_in_slide", 70000.0, "", false},
		{"an index past any package", image, "background_image_in_slide", 1e12, "", false},
		{"NaN", image, "background_image_in_slide", math.NaN(), "", true},
		{"a relationship without a Type", `<Relationship Id="rId9" Target="x"/>` + image, "background_image_in_slide", 1.0, "", true},
		{"and for audio", `<Relationship Id="rId9" Target="x"/>`, "audio_in_slide", 1.0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			g.files["/d.pptx"] = deck(tt.rels)
			s := &Session{Guest: gc, CacheDir: t.TempDir()}
			got, err := s.get(context.Background(), "result", map[string]any{"type": tt.getter, "ppt_file_path": "/d.pptx", "slide_index": tt.index, "dest": "a.wav"})
			var want any
			if tt.want != "" {
				want = filepath.Join(s.CacheDir, tt.want)
			}
			if (err != nil) != tt.fails || got != want {
				t.Errorf("get = %v, %v; want %v (fails %v)", got, err, want, tt.fails)
			}
		})
	}
}
