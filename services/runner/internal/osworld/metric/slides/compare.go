package slides

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/slides/pptx"
)

// compareDefaults are compare_pptx_files' boolean options with slides.py's
// defaults.
var compareDefaults = map[string]bool{
	"examine_number_of_slides":      true,
	"examine_shape":                 true,
	"examine_text":                  true,
	"examine_indent":                true,
	"examine_font_name":             true,
	"examine_font_size":             true,
	"examine_font_bold":             true,
	"examine_font_italic":           true,
	"examine_color_rgb":             true,
	"examine_font_underline":        true,
	"examine_strike_through":        true,
	"examine_alignment":             true,
	"examine_title_bottom_position": false,
	"examine_table_bottom_position": false,
	"examine_run_count":             true,
	"examine_right_position":        false,
	"examine_top_position":          false,
	"examine_shape_for_shift_size":  false,
	"examine_image_size":            false,
	"examine_modify_height":         false,
	"examine_bullets":               true,
	"examine_background_color":      true,
	"examine_note":                  true,
	// enable_debug only logs in OSWorld, but its log lines read every
	// shape's type (and the positions of two text shapes), which raises
	// for shapes python-pptx cannot type: it changes the outcome.
	"enable_debug": true,
}

// compareOptionKeys lists every option compare_pptx_files reads, plus the
// keys published tasks pass that slides.py ignores (so that `rollout
// tasks check` does not report them as unsupported here).
func compareOptionKeys() []string {
	keys := []string{"approximately_tolerance", "examine_shape_lenient_height", "_note"}
	for k := range compareDefaults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// errPython stands for an exception OSWorld's metric raises: the episode
// gets no reward, which this package reports as a score of 0. A file over
// a size cap of the pptx reader (pptx.ErrTooLarge) is not such an
// exception, since python-pptx reads it: the metric returns that error.
var errPython = errors.New("python would raise")

type comparer struct {
	opt map[string]bool
	tol float64
	// tolErr is set when approximately_tolerance is not a number: Python
	// only fails once a comparison needs it.
	tolErr bool
}

func newComparer(opts map[string]any) *comparer {
	c := &comparer{opt: map[string]bool{}, tol: 0.005}
	for k, def := range compareDefaults {
		c.opt[k] = def
		if v, ok := opts[k]; ok {
			c.opt[k] = metric.Truthy(v)
		}
	}
	if v, ok := opts["approximately_tolerance"]; ok {
		if f, ok := v.(float64); ok {
			c.tol = f
		} else {
			c.tolErr = true
		}
	}
	return c
}

// metricComparePptx is compare_pptx_files(result, expected, **options).
func metricComparePptx(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	p1, err := openResult(ctx, result)
	if err != nil || p1 == nil {
		return 0, err
	}
	p2, err := openExpected(expected)
	if err != nil {
		return 0, err
	}
	same, err := newComparer(opts).presentations(p1, p2)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	return metric.Bool(same), nil
}

// openResult opens the agent's file: nil for anything python-pptx cannot
// open (no file, a corrupt one, noted), which scores 0, and an error for
// a file over a size cap, which is not scored.
func openResult(ctx context.Context, v any) (*pptx.Presentation, error) {
	p, ok := v.(string)
	if !ok || p == "" {
		return nil, nil
	}
	prs, err := pptx.Open(p)
	if err != nil {
		return nil, metric.Because(ctx, fmt.Errorf("%s does not open as a .pptx: %w", filepath.Base(p), err))
	}
	return prs, nil
}

// openExpected opens the task's reference file: without it nothing can
// be judged.
func openExpected(v any) (*pptx.Presentation, error) {
	p, ok := v.(string)
	if !ok || p == "" {
		return nil, fmt.Errorf("expected pptx: got %T, want a path", v)
	}
	prs, err := pptx.Open(p)
	if err != nil {
		return nil, fmt.Errorf("expected pptx: %w", err)
	}
	return prs, nil
}

// approx is slides.py's is_approximately_equal over python-pptx lengths
// (nil is None; None against a non-zero length raises TypeError).
func (c *comparer) approx(a, b *int64) (bool, error) {
	switch {
	case a == nil && b == nil:
		return true, nil
	case a == nil || b == nil:
		other := a
		if a == nil {
			other = b
		}
		if *other == 0 {
			return false, nil
		}
		return false, fmt.Errorf("a length of None against %d: %w", *other, errPython)
	case *a == *b:
		return true, nil
	case *a == 0 || *b == 0:
		return false, nil
	}
	if c.tolErr {
		return false, fmt.Errorf("approximately_tolerance is not a number: %w", errPython)
	}
	d := math.Abs(float64(*a) - float64(*b))
	return d/math.Max(math.Abs(float64(*a)), math.Abs(float64(*b))) <= c.tol, nil
}

// approxPos compares the given positions of two shapes in order, stopping
// at the first that differs, as slides.py's chained `not ... or` does.
func (c *comparer) approxPos(s1, s2 *pptx.Shape, which ...int) (bool, error) {
	for _, w := range which {
		a, err := s1.Pos(w)
		if err != nil {
			return false, err
		}
		b, err := s2.Pos(w)
		if err != nil {
			return false, err
		}
		eq, err := c.approx(a, b)
		if err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

var all4 = []int{pptx.Left, pptx.Top, pptx.Width, pptx.Height}

// less is Python's a < b (orEqual: a <= b) on lengths; None raises.
func less(a, b *int64, orEqual bool) (bool, error) {
	if a == nil || b == nil {
		return false, fmt.Errorf("a length of None in a comparison: %w", errPython)
	}
	if orEqual {
		return *a <= *b, nil
	}
	return *a < *b, nil
}

func lessConst(a *int64, k int64, greater bool) (bool, error) {
	if a == nil {
		return false, fmt.Errorf("a length of None in a comparison: %w", errPython)
	}
	if greater {
		return *a > k, nil
	}
	return *a < k, nil
}

func (c *comparer) presentations(p1, p2 *pptx.Presentation) (bool, error) {
	if len(p1.Slides) != len(p2.Slides) && c.opt["examine_number_of_slides"] {
		return false, nil
	}
	for i := range min(len(p1.Slides), len(p2.Slides)) {
		same, err := c.slide(i+1, p1.Slides[i], p2.Slides[i])
		if err != nil || !same {
			return false, err
		}
	}
	return true, nil
}

// backgroundColor is slides.py's get_slide_background_color: the slide's
// solid fill, else (no fill of its own) the master's solid fill, else
// None. A solid fill of a colour that is not sRGB raises.
func backgroundColor(s *pptx.Slide) (*[3]uint8, error) {
	f := s.Background()
	if f.Type == pptx.FillBackground {
		m, err := s.MasterBackground()
		if err != nil {
			return nil, err
		}
		f = m
	}
	if f.Type != pptx.FillSolid {
		return nil, nil
	}
	rgb, err := f.RGB()
	if err != nil {
		return nil, err
	}
	return &rgb, nil
}

func sameColor(a, b *[3]uint8) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// textShapes is slides.py's get_all_text_shapes: the shapes with a text
// frame, group members included, in document order.
func textShapes(shapes []*pptx.Shape) ([]*pptx.Shape, error) {
	var out []*pptx.Shape
	for _, s := range shapes {
		if s.HasText() {
			if _, err := s.Text(); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		kids, err := textShapes(s.Children())
		if err != nil {
			return nil, err
		}
		out = append(out, kids...)
	}
	return out, nil
}

func (c *comparer) slide(idx int, s1, s2 *pptx.Slide) (bool, error) {
	bg1, bg2, err := pair(backgroundColor, s1, s2)
	if err != nil {
		return false, err
	}
	if !sameColor(bg1, bg2) && c.opt["examine_background_color"] {
		return false, nil
	}
	n1, n2, err := pair((*pptx.Slide).NotesText, s1, s2)
	if err != nil {
		return false, err
	}
	if metric.PyStrip(n1) != metric.PyStrip(n2) && c.opt["examine_note"] {
		return false, nil
	}
	shapes1, shapes2, err := pair((*pptx.Slide).Shapes, s1, s2)
	if err != nil {
		return false, err
	}
	ts1, ts2, err := pair(textShapes, shapes1, shapes2)
	if err != nil {
		return false, err
	}
	if len(shapes1) != len(shapes2) {
		return false, nil
	}
	bul := &bulletCheck{s1: s1, s2: s2}
	for j := range shapes1 {
		same, err := c.shape(idx, shapes1[j], shapes2[j], bul)
		if err != nil || !same {
			return false, err
		}
	}
	if c.opt["examine_alignment"] && len(ts1) == len(ts2) {
		for j := range ts1 {
			same, err := c.alignmentPass(ts1[j], ts2[j])
			if err != nil || !same {
				return false, err
			}
		}
	} else if len(ts1) != len(ts2) {
		return false, nil
	}
	return true, nil
}

// alignmentPass is the final pass of slides.py over all text shapes:
// text, paragraph count and alignments.
func (c *comparer) alignmentPass(a, b *pptx.Shape) (bool, error) {
	t1, _ := a.Text()
	t2, _ := b.Text()
	if metric.PyStrip(t1) != metric.PyStrip(t2) && c.opt["examine_text"] {
		return false, nil
	}
	ps1, ps2 := a.Paragraphs(), b.Paragraphs()
	if len(ps1) != len(ps2) {
		return false, nil
	}
	for k := range ps1 {
		same, err := sameAlignment(ps1[k], ps2[k])
		if err != nil || !same {
			return false, err
		}
	}
	return true, nil
}

// sameAlignment compares two paragraphs' alignments, None counting as
// left.
func sameAlignment(p1, p2 *pptx.Paragraph) (bool, error) {
	a1, a2, err := pair((*pptx.Paragraph).Alignment, p1, p2)
	if err != nil {
		return false, err
	}
	if a1 == "" {
		a1 = "l"
	}
	if a2 == "" {
		a2 = "l"
	}
	return a1 == a2, nil
}

func shapeText(s *pptx.Shape) string {
	t, _ := s.Text() // textShapes has checked every text
	return t
}

func (c *comparer) shape(slideIdx int, a, b *pptx.Shape, bul *bulletCheck) (bool, error) {
	bothText := a.HasText() && b.HasText()
	var ta, tb string
	if bothText {
		ta, tb = shapeText(a), shapeText(b)
	}
	if c.opt["enable_debug"] {
		if _, err := a.ShapeType(); err != nil {
			return false, err
		}
		if _, err := b.ShapeType(); err != nil {
			return false, err
		}
		if bothText {
			for _, s := range []*pptx.Shape{a, b} {
				for _, w := range all4 {
					if _, err := s.Pos(w); err != nil {
						return false, err
					}
				}
			}
		}
	}
	if c.opt["examine_title_bottom_position"] {
		if bothText && ta == tb {
			if ta == "Product Comparison" {
				if bad, err := notMoved(a, b, pptx.Top, 3600000, false); err != nil || bad {
					return false, err
				}
			}
		} else if eq, err := c.approxPos(a, b, all4...); err != nil || !eq {
			return false, err
		}
	}
	if c.opt["examine_table_bottom_position"] {
		both, err := bothType(slideIdx == 3, a, b, pptx.TypeTable)
		if err != nil {
			return false, err
		}
		if both {
			if bad, err := notMoved(a, b, pptx.Top, 3600000, false); err != nil || bad {
				return false, err
			}
		} else if eq, err := c.approxPos(a, b, all4...); err != nil || !eq {
			return false, err
		}
	}
	if c.opt["examine_right_position"] && slideIdx == 2 && !a.HasText() && !b.HasText() {
		if bad, err := notMoved(a, b, pptx.Left, 4320000, false); err != nil || bad {
			return false, err
		}
	}
	if c.opt["examine_top_position"] {
		both, err := bothType(slideIdx == 2, a, b, pptx.TypePicture)
		if err != nil {
			return false, err
		}
		if both {
			if bad, err := notMoved(a, b, pptx.Top, 1980000, true); err != nil || bad {
				return false, err
			}
		}
	}
	if c.opt["examine_shape_for_shift_size"] {
		eq, err := c.approxPos(a, b, all4...)
		if err != nil {
			return false, err
		}
		if !eq && !(bothText && ta == tb && ta == "Elaborate on what you want to discuss.") {
			return false, nil
		}
	}
	bothEmpty := emptyText(a) && emptyText(b)
	eq, err := c.approxPos(a, b, all4...)
	if err != nil {
		return false, err
	}
	if !eq && c.opt["examine_shape"] && !bothEmpty {
		return false, nil
	}
	if c.opt["examine_image_size"] {
		both, err := bothType(true, a, b, pptx.TypePicture)
		if err != nil {
			return false, err
		}
		which := all4
		if both {
			which = []int{pptx.Width, pptx.Height}
		}
		if eq, err := c.approxPos(a, b, which...); err != nil || !eq {
			return false, err
		}
	}
	if c.opt["examine_modify_height"] {
		heightOnly := !a.HasText() && !b.HasText()
		if !heightOnly {
			var err error
			if heightOnly, err = bothType(true, a, b, pptx.TypeFreeform); err != nil {
				return false, err
			}
		}
		which := all4
		if heightOnly {
			which = []int{pptx.Height}
		}
		if eq, err := c.approxPos(a, b, which...); err != nil || !eq {
			return false, err
		}
	}
	typ, err := a.ShapeType()
	if err != nil {
		return false, err
	}
	if typ == pptx.TypeTable {
		if same, err := c.tables(a, b); err != nil || !same {
			return false, err
		}
	}
	if bothText {
		return c.textFrames(a, b, ta, tb, bul)
	}
	return true, nil
}

func emptyText(s *pptx.Shape) bool {
	return !s.HasText() || metric.PyStrip(shapeText(s)) == ""
}

// bothType is `cond and shape1.shape_type == t and shape2.shape_type ==
// t`, evaluated lazily as Python does.
func bothType(cond bool, a, b *pptx.Shape, t int) (bool, error) {
	if !cond {
		return false, nil
	}
	ta, err := a.ShapeType()
	if err != nil || ta != t {
		return false, err
	}
	tb, err := b.ShapeType()
	return tb == t, err
}

// notMoved is slides.py's test that the result's shape did not move far
// enough along one position: `shape1.X <= shape2.X or shape1.X < limit`,
// or, for a move back (up or left), `shape1.X >= shape2.X or shape1.X >
// limit`.
func notMoved(a, b *pptx.Shape, attr int, limit int64, back bool) (bool, error) {
	p1, err := a.Pos(attr)
	if err != nil {
		return false, err
	}
	p2, err := b.Pos(attr)
	if err != nil {
		return false, err
	}
	x, y := p1, p2
	if back {
		x, y = p2, p1
	}
	bad, err := less(x, y, true)
	if err != nil || bad {
		return bad, err
	}
	return lessConst(p1, limit, back)
}

// normRuns is the runs slides.py compares: all of them, except that two
// blank paragraphs compare only their non-blank runs (none), so that an
// empty run does not count.
func normRuns(p1, p2 *pptx.Paragraph) ([]*pptx.Run, []*pptx.Run, error) {
	r1, r2 := p1.Runs(), p2.Runs()
	t1, err := p1.Text()
	if err != nil {
		return nil, nil, err
	}
	t2, err := p2.Text()
	if err != nil {
		return nil, nil, err
	}
	if metric.PyStrip(t1) == "" && metric.PyStrip(t2) == "" {
		if r1, err = nonEmptyRuns(r1); err != nil {
			return nil, nil, err
		}
		if r2, err = nonEmptyRuns(r2); err != nil {
			return nil, nil, err
		}
	}
	return r1, r2, nil
}

func nonEmptyRuns(rs []*pptx.Run) ([]*pptx.Run, error) {
	var out []*pptx.Run
	for _, r := range rs {
		t, err := r.Text()
		if err != nil {
			return nil, err
		}
		if metric.PyStrip(t) != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

func (c *comparer) tables(a, b *pptx.Shape) (bool, error) {
	t1, err := a.Table()
	if err != nil {
		return false, err
	}
	t2, err := b.Table()
	if err != nil {
		return false, err
	}
	if len(t1.Rows) != len(t2.Rows) || t1.Columns != t2.Columns {
		return false, nil
	}
	for r := range t1.Rows {
		for col := range t1.Columns {
			ps1, err := t1.Cell(r, col)
			if err != nil {
				return false, err
			}
			ps2, err := t2.Cell(r, col)
			if err != nil {
				return false, err
			}
			if len(ps1) != len(ps2) {
				return false, nil
			}
			for k := range ps1 {
				r1, r2, err := normRuns(ps1[k], ps2[k])
				if err != nil {
					return false, err
				}
				if len(r1) != len(r2) && c.opt["examine_run_count"] {
					return false, nil
				}
				for m := range min(len(r1), len(r2)) {
					same, err := c.cellRun(r1[m].Font(), r2[m].Font())
					if err != nil || !same {
						return false, err
					}
				}
			}
		}
	}
	return true, nil
}

// cellRun compares two table-cell runs: colour (if examined), and bold,
// italic and underline always, as slides.py's table branch does.
func (c *comparer) cellRun(f1, f2 pptx.Font) (bool, error) {
	if same, err := c.sameColor(f1, f2); err != nil || !same {
		return false, err
	}
	if same, err := sameFlag(f1.Bold, f2.Bold); err != nil || !same {
		return false, err
	}
	if same, err := sameFlag(f1.Italic, f2.Italic); err != nil || !same {
		return false, err
	}
	return sameUnderline(f1, f2)
}

// sameColor is `hasattr(c1, "rgb") and hasattr(c2, "rgb")` then the rgb
// comparison when examine_color_rgb.
func (c *comparer) sameColor(f1, f2 pptx.Font) (bool, error) {
	c1, ok1, err := f1.Color()
	if err != nil || !ok1 {
		return err == nil, err
	}
	c2, ok2, err := f2.Color()
	if err != nil || !ok2 {
		return err == nil, err
	}
	return c1 == c2 || !c.opt["examine_color_rgb"], nil
}

// sameFlag compares bold or italic: None and False are the same.
func sameFlag(get1, get2 func() (*bool, error)) (bool, error) {
	b1, err := get1()
	if err != nil {
		return false, err
	}
	b2, err := get2()
	if err != nil {
		return false, err
	}
	return (b1 != nil && *b1) == (b2 != nil && *b2), nil
}

// sameUnderline: two set values must be equal, and None differs from True
// only (not from False or a non-single underline).
func sameUnderline(f1, f2 pptx.Font) (bool, error) {
	u1, u2, err := pair(pptx.Font.Underline, f1, f2)
	if err != nil {
		return false, err
	}
	if u1 == u2 {
		return true, nil
	}
	if u1 != pptx.UnderlineUnset && u2 != pptx.UnderlineUnset {
		return false, nil
	}
	return u1 != pptx.UnderlineTrue && u2 != pptx.UnderlineTrue, nil
}

func (c *comparer) textFrames(a, b *pptx.Shape, ta, tb string, bul *bulletCheck) (bool, error) {
	if metric.PyStrip(ta) != metric.PyStrip(tb) && c.opt["examine_text"] {
		return false, nil
	}
	ps1, ps2 := a.Paragraphs(), b.Paragraphs()
	if len(ps1) != len(ps2) {
		return false, nil
	}
	for k := range ps1 {
		p1, p2 := ps1[k], ps2[k]
		if c.opt["examine_alignment"] {
			if same, err := sameAlignment(p1, p2); err != nil || !same {
				return false, err
			}
		}
		pt1, _ := p1.Text()
		pt2, _ := p2.Text()
		if pt1 != pt2 && c.opt["examine_text"] {
			return false, nil
		}
		l1, l2, err := pair((*pptx.Paragraph).Level, p1, p2)
		if err != nil {
			return false, err
		}
		// 0 and 1 are the same visual continuation indent to slides.py.
		if l1 != l2 && c.opt["examine_indent"] && !((l1 == 0 || l1 == 1) && (l2 == 0 || l2 == 1)) {
			return false, nil
		}
		r1, r2, err := normRuns(p1, p2)
		if err != nil {
			return false, err
		}
		if len(r1) != len(r2) && c.opt["examine_run_count"] {
			return false, nil
		}
		for m := range min(len(r1), len(r2)) {
			same, err := c.run(r1[m].Font(), r2[m].Font(), bul)
			if err != nil || !same {
				return false, err
			}
		}
	}
	return true, nil
}

func (c *comparer) run(f1, f2 pptx.Font, bul *bulletCheck) (bool, error) {
	n1, n2, err := pair(pptx.Font.Name, f1, f2)
	if err != nil {
		return false, err
	}
	if !samePtr(n1, n2) && c.opt["examine_font_name"] {
		return false, nil
	}
	z1, z2, err := pair(pptx.Font.Size, f1, f2)
	if err != nil {
		return false, err
	}
	if !samePtr(z1, z2) && c.opt["examine_font_size"] {
		return false, nil
	}
	same, err := sameFlag(f1.Bold, f2.Bold)
	if err != nil || (!same && c.opt["examine_font_bold"]) {
		return false, err
	}
	same, err = sameFlag(f1.Italic, f2.Italic)
	if err != nil || (!same && c.opt["examine_font_italic"]) {
		return false, err
	}
	if same, err := c.sameColor(f1, f2); err != nil || !same {
		return false, err
	}
	same, err = sameUnderline(f1, f2)
	if err != nil || (!same && c.opt["examine_font_underline"]) {
		return false, err
	}
	if f1.Strike() != f2.Strike() && c.opt["examine_strike_through"] {
		return false, nil
	}
	if c.opt["examine_bullets"] && !bul.same() {
		return false, nil
	}
	return true, nil
}

// pair reads one property of both sides, the result's first: Python
// raises at the first side that fails.
func pair[S, T any](get func(S) (T, error), a, b S) (T, T, error) {
	x, err := get(a)
	if err != nil {
		var zero T
		return zero, zero, err
	}
	y, err := get(b)
	return x, y, err
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
