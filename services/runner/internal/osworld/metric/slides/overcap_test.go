package slides

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

// bigPartPptx writes a package whose presentation part, first slide and
// first slide master each hold MaxPart+1 bytes (spaces after the root
// element, which deflate to almost nothing): past the pptx reader's part
// cap, which python-pptx does not have.
func bigPartPptx(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	add := func(name, body string, pad int) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
		for left := pad; left > 0; left -= len(spaces) {
			w.Write(spaces[:min(left, len(spaces))])
		}
	}
	add("[Content_Types].xml", `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">`+
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>`+
		`<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>`, 0)
	add("_rels/.rels", `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`+
		`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="ppt/presentation.xml"/></Relationships>`, 0)
	for _, part := range []string{"ppt/presentation.xml", "ppt/slides/slide1.xml", "ppt/slideMasters/slideMaster1.xml"} {
		add(part, "<x/>", pptx.MaxPart)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big-part.pptx")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSlidesOverCap: a presentation with a part over the pptx reader's
// 32 MiB cap, which python-pptx would read, is not scored: each metric
// returns an error wrapping metric.ErrOverCap that names the cap. It
// scored 0.
func TestSlidesOverCap(t *testing.T) {
	big := bigPartPptx(t)
	tests := []struct {
		metric   string
		expected any
	}{
		{"compare_pptx_files", big},
		{"check_slide_orientation_Portrait", nil},
		{"check_transition", map[string]any{"slide_idx": 0.0, "transition_type": "fade"}},
		{"check_page_number_colors", map[string]any{"color": "red"}},
		{"evaluate_presentation_fill_to_rgb_distance", map[string]any{"rgb": []any{255.0, 0.0, 0.0}}},
	}
	const wantText = "inflates past the cap of 33554432 bytes a part"
	for _, tt := range tests {
		t.Run(tt.metric, func(t *testing.T) {
			got, err := Metrics()[tt.metric].Fn(context.Background(), big, tt.expected, tt.expected != nil, nil)
			if !errors.Is(err, metric.ErrOverCap) {
				t.Fatalf("%s = %v, %v; want an error wrapping metric.ErrOverCap", tt.metric, got, err)
			}
			if !strings.Contains(err.Error(), wantText) {
				t.Errorf("%s error = %q, want it to contain %q", tt.metric, err, wantText)
			}
		})
	}
}
