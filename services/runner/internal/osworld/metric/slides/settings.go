package slides

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

// nsOOR is the namespace of LibreOffice's registry attributes (oor:path,
// oor:name) in registrymodifications.xcu.
const nsOOR = "http://openoffice.org/2001/registry"

// readXML parses a local XML file named by a getter result; ok is false
// when there is no such file or it does not parse (noted; each caller
// decides what Python does then), and err is set for a file over a size
// cap.
func readXML(ctx context.Context, v any) (*pptx.Element, bool, error) {
	p, ok := v.(string)
	if !ok || p == "" {
		return nil, false, nil
	}
	b, err := boundedread.ReadFile(p, metric.MaxFile)
	if err != nil {
		return nil, false, metric.Because(ctx, err)
	}
	root, err := pptx.ParseXML(b)
	if err != nil {
		return nil, false, metric.Because(ctx, fmt.Errorf("%s does not parse as XML: %w", filepath.Base(p), err))
	}
	return root, true, nil
}

// registryItems returns the xcu's item elements at oor:path path, in
// document order.
func registryItems(root *pptx.Element, path string) []*pptx.Element {
	var out []*pptx.Element
	for _, it := range root.Descendants("", "item") {
		if p, _ := it.Attr(nsOOR, "path"); p == path {
			out = append(out, it)
		}
	}
	return out
}

// metricPresenterConsoleDisabled is check_presenter_console_disable: the
// first EnablePresenterScreen setting under Impress/Misc/Start is false.
func metricPresenterConsoleDisabled(ctx context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	root, ok, err := readXML(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	for _, it := range registryItems(root, "/org.openoffice.Office.Impress/Misc/Start") {
		for _, prop := range it.ChildrenNamed("", "prop") {
			if n, _ := prop.Attr(nsOOR, "name"); n != "EnablePresenterScreen" {
				continue
			}
			v := prop.Child("", "value")
			if v == nil || v.Text == nil {
				return 0, nil // Python's AttributeError, caught
			}
			return metric.Bool(strings.ToLower(*v.Text) == "false"), nil
		}
	}
	return 0, nil
}

// metricAutoSaveTime is check_auto_saving_time: AutoSaveTimeIntervall
// under Common/Save/Document equals rules["minutes"]. As in slides.py, a
// later matching item overrides an earlier one.
func metricAutoSaveTime(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	minutes, ok := r["minutes"]
	if !ok {
		return 0, fmt.Errorf("check_auto_saving_time: minutes is required")
	}
	root, ok, err := readXML(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	var found *string
	for _, it := range registryItems(root, "/org.openoffice.Office.Common/Save/Document") {
		for _, prop := range it.Descendants("", "prop") {
			if n, _ := prop.Attr(nsOOR, "name"); n != "AutoSaveTimeIntervall" {
				continue
			}
			v := prop.Find("", "value")
			if v == nil {
				// None.text raises.
				metric.Notef(ctx, "AutoSaveTimeIntervall has no value: Python raises")
				return 0, nil
			}
			// An empty value is None, which a later item may override;
			// left at the end, slides.py scores it 0.
			found = v.Text
			break
		}
	}
	if found == nil {
		return 0, nil
	}
	n, err := metric.PyInt(*found, 10)
	if err != nil {
		// int() raises ValueError.
		return 0, metric.Because(ctx, fmt.Errorf("AutoSaveTimeIntervall: %w", err))
	}
	// Python's ==: True is 1, a string is never equal.
	return metric.Bool(metric.PyEqual(float64(n), minutes)), nil
}

// metricLeftPanel is check_left_panel: the accessibility tree (an XML
// string) has a document-frame named "Slides View", which is the slide
// pane.
func metricLeftPanel(ctx context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	root, err := pptx.ParseXML([]byte(s))
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	frames := root.Descendants("", "document-frame")
	if root.Is("", "document-frame") {
		frames = append(frames, root)
	}
	for _, f := range frames {
		if n, _ := f.Attr("", "name"); n == "Slides View" {
			return 1, nil
		}
	}
	return 0, nil
}
