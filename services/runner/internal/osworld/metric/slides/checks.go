package slides

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

// metricPortrait is check_slide_orientation_Portrait: the slide is taller
// than wide.
func metricPortrait(ctx context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	p, err := openResult(ctx, result)
	if err != nil || p == nil {
		return 0, err
	}
	w, h, err := p.SlideSize()
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	if w == nil || h == nil {
		return 0, metric.Because(ctx, fmt.Errorf("the slide size is None: %w", errPython)) // None < None
	}
	return metric.Bool(*w < *h), nil
}

// inch is python-pptx's Inches(1) in EMU.
const inch = 914400

// metricImageStretch is check_image_stretch_and_center(result, expected):
// the first picture of the original's first slide, found by its bytes on
// the result's first slide (the last such picture), fills the slide and
// is centred within half an inch.
func metricImageStretch(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	mod, err := openResult(ctx, result)
	if err != nil || mod == nil {
		return 0, err
	}
	orig, err := openExpected(expected)
	if err != nil {
		return 0, err
	}
	s, err := imageStretched(orig, mod)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	return s, nil
}

func firstSlidePictures(p *pptx.Presentation) ([]*pptx.Shape, error) {
	if len(p.Slides) == 0 {
		return nil, fmt.Errorf("no slides: slides[0] %w", errPython) // IndexError
	}
	shapes, err := p.Slides[0].Shapes()
	if err != nil {
		return nil, err
	}
	var out []*pptx.Shape
	for _, s := range shapes {
		t, err := s.ShapeType()
		if err != nil {
			return nil, err
		}
		if t == pptx.TypePicture {
			out = append(out, s)
		}
	}
	return out, nil
}

func imageStretched(orig, mod *pptx.Presentation) (float64, error) {
	origPics, err := firstSlidePictures(orig)
	if err != nil {
		return 0, err
	}
	modPics, err := firstSlidePictures(mod)
	if err != nil {
		return 0, err
	}
	if len(origPics) == 0 {
		return 0, nil
	}
	want, err := origPics[0].ImageBlob()
	if err != nil {
		return 0, err
	}
	var found *pptx.Shape
	for _, m := range modPics {
		b, err := m.ImageBlob()
		if err != nil {
			return 0, err
		}
		if bytes.Equal(b, want) {
			found = m
		}
	}
	if found == nil {
		return 0, nil
	}
	sw, sh, err := orig.SlideSize()
	if err != nil {
		return 0, err
	}
	if sw == nil {
		return 0, fmt.Errorf("the original's slide width is None: %w", errPython)
	}
	var pos [4]float64
	for i, w := range all4 {
		v, err := found.Pos(w)
		if err != nil {
			return 0, err
		}
		if v == nil {
			return 0, fmt.Errorf("the picture's position or size is None: %w", errPython)
		}
		pos[i] = float64(*v)
	}
	left, top, width, height := pos[0], pos[1], pos[2], pos[3]
	const tol = inch / 2
	if math.Abs(width-float64(*sw)) > tol || math.Abs(height-float64(*sh)) > tol ||
		math.Abs(left-(float64(*sw)-width)/2) > tol || math.Abs(top-(float64(*sh)-height)/2) > tol {
		return 0, nil
	}
	return 1, nil
}

// metricTransition is check_transition: slide rules["slide_idx"] (counted
// from 0, read as ppt/slides/slide<n+1>.xml) has a p:transition holding a
// p:<transition_type> element.
func metricTransition(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	idx, ok := r["slide_idx"].(float64)
	if !ok || idx != math.Trunc(idx) {
		return 0, fmt.Errorf("check_transition: slide_idx must be an integer")
	}
	typ, ok := r["transition_type"].(string)
	if !ok {
		return 0, fmt.Errorf("check_transition: transition_type must be a string")
	}
	root, err := partXML(ctx, result, "ppt/slides/slide"+strconv.FormatInt(int64(idx)+1, 10)+".xml")
	if err != nil || root == nil {
		return 0, err
	}
	tr := root.Find(pptx.NSP, "transition")
	return metric.Bool(tr != nil && tr.Find(pptx.NSP, typ) != nil), nil
}

// partXML is one XML part of the presentation a getter gave; nil when the
// file or the part is missing or unreadable, which slides.py scores 0,
// and an error when either is over a size cap.
func partXML(ctx context.Context, result any, name string) (*pptx.Element, error) {
	path, ok := result.(string)
	if !ok || path == "" {
		return nil, nil
	}
	pk, err := pptx.OpenPackage(path)
	if err != nil {
		return nil, metric.Because(ctx, fmt.Errorf("%s does not open as a .pptx: %w", filepath.Base(path), err))
	}
	root, err := pk.XML(name)
	if err != nil {
		return nil, metric.Because(ctx, err)
	}
	return root, nil
}

// metricPageNumberColors is check_page_number_colors: the colour slides.py
// finds for the slide numbers in ppt/slideMasters/slideMaster1.xml is
// rules["color"] ("red", "blue", "green" or "black"; other names pass).
func metricPageNumberColors(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	color, ok := r["color"].(string)
	if !ok {
		return 0, fmt.Errorf("check_page_number_colors: color must be a string")
	}
	root, err := partXML(ctx, result, "ppt/slideMasters/slideMaster1.xml")
	if err != nil || root == nil {
		return 0, err
	}
	val, ok := pageNumberColor(root)
	if !ok {
		return 0, nil
	}
	rgb, ok := parseHexRGB(val)
	if !ok {
		return 0, nil
	}
	return metric.Bool(colorIs(color, rgb)), nil
}

// pageNumberColor follows slides.py's search. Its first two steps look for
// a colour inside the p:ph elements themselves, which never hold one, so
// in effect the colour is the last non-black sRGB colour of a run's
// properties, else the last non-black solid sRGB colour anywhere, else the
// last one.
func pageNumberColor(root *pptx.Element) (string, bool) {
	srgbUnderSolid := func(scope []*pptx.Element) []*pptx.Element {
		var out []*pptx.Element
		for _, e := range scope {
			for _, f := range e.Descendants(pptx.NSA, "solidFill") {
				out = append(out, f.Descendants(pptx.NSA, "srgbClr")...)
			}
		}
		return out
	}
	for _, ph := range root.Descendants(pptx.NSP, "ph") {
		if t, _ := ph.Attr("", "type"); t != "sldNum" {
			continue
		}
		if c := srgbUnderSolid([]*pptx.Element{ph}); len(c) > 0 {
			if v, ok := c[0].Attr("", "val"); ok {
				return v, true
			}
		}
		break
	}
	for _, ph := range root.Descendants(pptx.NSP, "ph") {
		t, _ := ph.Attr("", "type")
		if t != "sldNum" && t != "ftr" && t != "dt" {
			continue
		}
		if c := srgbUnderSolid([]*pptx.Element{ph}); len(c) > 0 {
			if v, ok := c[0].Attr("", "val"); ok {
				return v, true
			}
		}
	}
	lastNonBlack := func(l []*pptx.Element) (string, bool) {
		for i := len(l) - 1; i >= 0; i-- {
			if v, ok := l[i].Attr("", "val"); ok && v != "" && v != "000000" {
				return v, true
			}
		}
		return "", false
	}
	if v, ok := lastNonBlack(srgbUnderSolid(root.Descendants(pptx.NSA, "rPr"))); ok {
		return v, true
	}
	all := srgbUnderSolid([]*pptx.Element{root})
	if v, ok := lastNonBlack(all); ok {
		return v, true
	}
	if len(all) > 0 {
		return all[len(all)-1].Attr("", "val")
	}
	return "", false
}

func parseHexRGB(s string) ([3]int, bool) {
	s = strings.TrimLeft(s, "#")
	if len(s) != 6 {
		return [3]int{}, false
	}
	var out [3]int
	for i := range 3 {
		n, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return [3]int{}, false
		}
		out[i] = int(n)
	}
	return out, true
}

func colorIs(name string, c [3]int) bool {
	const th = 50
	r, g, b := c[0], c[1], c[2]
	switch name {
	case "red":
		return r > g+th && r > b+th
	case "blue":
		return b > g+th && b > r+th
	case "green":
		return g > r+th && g > b+th
	case "black":
		return r < th && g < th && b < th
	}
	return true
}

// metricFillDistance is evaluate_presentation_fill_to_rgb_distance: one
// minus the mean over slides of the background colour's distance to
// rules["rgb"] (normalised to [0,1]); a slide whose colour is unknown, not
// solid, or still rules["original_rgb"] counts as distance 1.
func metricFillDistance(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	want, ok := rgbRule(r["rgb"])
	if !ok {
		return 0, fmt.Errorf("evaluate_presentation_fill_to_rgb_distance: rgb must be three numbers")
	}
	var orig *[3]float64
	if v, present := r["original_rgb"]; present && v != nil {
		o, ok := rgbRule(v)
		if !ok {
			return 0, fmt.Errorf("evaluate_presentation_fill_to_rgb_distance: original_rgb must be three numbers")
		}
		orig = &o
	}
	p, err := openResult(ctx, result)
	if err != nil || p == nil || len(p.Slides) == 0 {
		return 0, err // no file, or a division by zero slides
	}
	sum := 0.0
	for _, s := range p.Slides {
		d, err := fillDistance(s, want, orig)
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		sum += d
	}
	return 1 - sum/float64(len(p.Slides)), nil
}

func rgbRule(v any) ([3]float64, bool) {
	l, ok := v.([]any)
	if !ok || len(l) != 3 {
		return [3]float64{}, false
	}
	var out [3]float64
	for i, x := range l {
		f, ok := x.(float64)
		if !ok {
			return [3]float64{}, false
		}
		out[i] = f
	}
	return out, true
}

func fillDistance(s *pptx.Slide, want [3]float64, orig *[3]float64) (float64, error) {
	f := s.Background()
	switch f.Type {
	case pptx.FillSolid:
	case pptx.FillBackground:
		m, err := s.MasterBackground()
		if err != nil {
			return 0, err
		}
		if m.Type != pptx.FillSolid {
			return 1, nil
		}
		f = m
	default:
		return 1, nil
	}
	rgb, err := f.RGB()
	if err != nil {
		return 1, nil // get_rgb_from_color's None
	}
	got := [3]float64{float64(rgb[0]), float64(rgb[1]), float64(rgb[2])}
	if orig != nil && got == *orig {
		return 1, nil
	}
	d := 0.0
	for i := range 3 {
		d += (got[i] - want[i]) * (got[i] - want[i])
	}
	return math.Sqrt(d) / math.Sqrt(3*255*255), nil
}
