package pptx

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Shape is one shape element (p:sp, p:grpSp, p:graphicFrame, p:cxnSp,
// p:pic or p:contentPart).
type Shape struct {
	El *Element
	// slide is set on every shape of a slide; topLevel marks the slide's
	// own shapes, which python-pptx builds as placeholder classes that
	// inherit their position, unlike the members of a group.
	slide    *Slide
	topLevel bool
}

// Tag is the element's local name ("sp", "pic", ...).
func (s *Shape) Tag() string { return s.El.Local }

// HasText reports whether python-pptx's shape has a text property (an
// auto shape, text box or placeholder: a p:sp).
func (s *Shape) HasText() bool { return s.El.Local == "sp" }

// Children returns a group's member shapes (none for other shapes).
func (s *Shape) Children() []*Shape {
	if s.El.Local != "grpSp" {
		return nil
	}
	var out []*Shape
	for _, e := range shapeElements(s.El) {
		out = append(out, &Shape{El: e, slide: s.slide})
	}
	return out
}

// phOf returns the p:ph of a shape element (./*[1]/p:nvPr/p:ph), or nil.
func phOf(e *Element) *Element {
	if len(e.Children) == 0 {
		return nil
	}
	for _, nv := range e.Children[0].ChildrenNamed(NSP, "nvPr") {
		if ph := nv.Child(NSP, "ph"); ph != nil {
			return ph
		}
	}
	return nil
}

// IsPlaceholder reports whether the shape has a p:ph.
func (s *Shape) IsPlaceholder() bool { return phOf(s.El) != nil }

func phIdx(ph *Element) (int64, error) {
	v, ok := ph.Attr("", "idx")
	if !ok {
		return 0, nil
	}
	n, err := metric.PyInt(v, 10)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("pptx: placeholder idx %q is not an unsigned int", v)
	}
	return n, nil
}

func phType(ph *Element) string {
	if v, ok := ph.Attr("", "type"); ok {
		return v
	}
	return "obj"
}

// ShapeType returns python-pptx's shape_type.
func (s *Shape) ShapeType() (int, error) {
	e := s.El
	switch e.Local {
	case "sp":
		if phOf(e) != nil {
			return TypePlaceholder, nil
		}
		spPr := e.Child(NSP, "spPr")
		if spPr == nil {
			return 0, errors.New("pptx: p:sp without p:spPr")
		}
		if spPr.Child(NSA, "custGeom") != nil {
			return TypeFreeform, nil
		}
		txBox, err := boolAttr(e.Path(NSP, "nvSpPr", "cNvSpPr"), "txBox")
		if err != nil {
			return 0, err
		}
		if spPr.Child(NSA, "prstGeom") != nil && (txBox == nil || !*txBox) {
			return TypeAutoShape, nil
		}
		if txBox != nil && *txBox {
			return TypeTextBox, nil
		}
		return 0, errors.New("pptx: shape instance of unrecognized shape type")
	case "pic":
		for _, nv := range e.Path(NSP, "nvPicPr").ChildrenNamed(NSP, "nvPr") {
			if nv.Child(NSA, "videoFile") != nil {
				return TypeMedia, nil
			}
		}
		return TypePicture, nil
	case "grpSp":
		return TypeGroup, nil
	case "cxnSp":
		return TypeLine, nil
	case "graphicFrame":
		gd := e.Path(NSA, "graphic", "graphicData")
		if g := e.Child(NSA, "graphic"); g == nil || gd == nil {
			return 0, errors.New("pptx: graphicFrame without graphic data")
		}
		uri, _ := gd.Attr("", "uri")
		switch uri {
		case "http://schemas.openxmlformats.org/drawingml/2006/chart":
			return TypeChart, nil
		case "http://schemas.openxmlformats.org/drawingml/2006/table":
			return TypeTable, nil
		case "http://schemas.openxmlformats.org/presentationml/2006/ole":
			if gd.Find(NSP, "embed") != nil {
				return TypeEmbeddedOLE, nil
			}
			return TypeLinkedOLE, nil
		}
		return TypeNone, nil
	}
	return 0, fmt.Errorf("pptx: %s does not implement shape_type", e.Local)
}

// Position names.
const (
	Left = iota
	Top
	Width
	Height
)

// Pos returns left, top, width or height in EMU as python-pptx reports
// it: nil where the shape has no transform, except that a slide's
// placeholder inherits it from its layout (and the layout's from the
// master).
func (s *Shape) Pos(which int) (*int64, error) {
	v, err := plainPos(s.El, which)
	if err != nil || v != nil || !s.topLevel || s.slide == nil {
		return v, err
	}
	ph := phOf(s.El)
	if ph == nil || (s.El.Local != "sp" && s.El.Local != "pic") {
		return nil, nil
	}
	idx, err := phIdx(ph)
	if err != nil {
		return nil, err
	}
	lp, layout, err := s.slide.Layout()
	if err != nil {
		return nil, err
	}
	t, err := spTree(layout)
	if err != nil {
		return nil, err
	}
	var base *Element
	for _, e := range shapeElements(t) {
		lph := phOf(e)
		if lph == nil {
			continue
		}
		i, err := phIdx(lph)
		if err != nil {
			return nil, err
		}
		if i == idx {
			base = e
			break
		}
	}
	if base == nil {
		return nil, nil
	}
	if v, err := plainPos(base, which); err != nil || v != nil || base.Local != "sp" {
		return v, err
	}
	mt, ok := masterType[phType(phOf(base))]
	if !ok {
		return nil, fmt.Errorf("pptx: layout placeholder type %q has no master type", phType(phOf(base)))
	}
	mp, ok, err := s.slide.Pres.Pkg.RelatedByType(lp, "slideMaster")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("pptx: %q has no slide master", lp)
	}
	master, err := s.slide.Pres.Pkg.XML(mp)
	if err != nil {
		return nil, err
	}
	mt2, err := spTree(master)
	if err != nil {
		return nil, err
	}
	for _, e := range shapeElements(mt2) {
		mph := phOf(e)
		if mph == nil {
			continue
		}
		if e.Local != "sp" {
			return nil, errors.New("pptx: master placeholder is not a shape")
		}
		if phType(mph) == mt {
			return plainPos(e, which)
		}
	}
	return nil, nil
}

// masterType maps a layout placeholder's type to the master placeholder
// type it inherits from (python-pptx's LayoutPlaceholder table).
var masterType = map[string]string{
	"body": "body", "chart": "body", "clipArt": "body", "ctrTitle": "title", "dgm": "body",
	"dt": "dt", "ftr": "ftr", "media": "body", "obj": "body", "pic": "body",
	"sldNum": "sldNum", "subTitle": "body", "tbl": "body", "title": "title",
}

func xfrmOf(e *Element) (*Element, error) {
	switch e.Local {
	case "sp", "cxnSp", "pic":
		spPr := e.Child(NSP, "spPr")
		if spPr == nil {
			return nil, fmt.Errorf("pptx: p:%s without p:spPr", e.Local)
		}
		return spPr.Child(NSA, "xfrm"), nil
	case "grpSp":
		g := e.Child(NSP, "grpSpPr")
		if g == nil {
			return nil, errors.New("pptx: p:grpSp without p:grpSpPr")
		}
		return g.Child(NSA, "xfrm"), nil
	case "graphicFrame":
		return e.Child(NSP, "xfrm"), nil
	}
	return nil, fmt.Errorf("pptx: p:%s has no position", e.Local)
}

func plainPos(e *Element, which int) (*int64, error) {
	x, err := xfrmOf(e)
	if err != nil || x == nil {
		return nil, err
	}
	child, attr := "off", "x"
	switch which {
	case Top:
		attr = "y"
	case Width:
		child, attr = "ext", "cx"
	case Height:
		child, attr = "ext", "cy"
	}
	c := x.Child(NSA, child)
	if c == nil {
		return nil, nil
	}
	v, err := intAttr(c, attr)
	if err != nil {
		return nil, err
	}
	if v == nil && e.Local != "graphicFrame" {
		// python-pptx declares these attributes required.
		return nil, fmt.Errorf("pptx: a:%s without %s", child, attr)
	}
	return v, nil
}

// Paragraphs returns the shape's text frame paragraphs: python-pptx adds
// a text body with one empty paragraph to a shape that has none.
func (s *Shape) Paragraphs() []*Paragraph {
	return paragraphsOf(s.El.Child(NSP, "txBody"))
}

func paragraphsOf(txBody *Element) []*Paragraph {
	if txBody == nil {
		return []*Paragraph{{El: &Element{Space: NSA, Local: "p"}}}
	}
	var out []*Paragraph
	for _, p := range txBody.ChildrenNamed(NSA, "p") {
		out = append(out, &Paragraph{El: p})
	}
	return out
}

// Text returns the text frame's text: paragraphs joined by "\n".
func (s *Shape) Text() (string, error) {
	return framesText(s.Paragraphs())
}

func framesText(ps []*Paragraph) (string, error) {
	var b []byte
	for i, p := range ps {
		if i > 0 {
			b = append(b, '\n')
		}
		t, err := p.Text()
		if err != nil {
			return "", err
		}
		b = append(b, t...)
	}
	return string(b), nil
}

// Table is a table's grid of cells.
type Table struct {
	Rows    []*Element // a:tr
	Columns int        // a:tblGrid/a:gridCol
}

// Table returns the graphic frame's table (python-pptx's shape.table).
func (s *Shape) Table() (*Table, error) {
	if s.El.Local != "graphicFrame" {
		return nil, errors.New("pptx: shape has no table")
	}
	typ, err := s.ShapeType()
	if err != nil {
		return nil, err
	}
	if typ != TypeTable {
		return nil, errors.New("pptx: shape does not contain a table")
	}
	tbl := s.El.Path(NSA, "graphic", "graphicData", "tbl")
	if tbl == nil {
		return nil, errors.New("pptx: table graphic frame without a:tbl")
	}
	grid := tbl.Child(NSA, "tblGrid")
	if grid == nil {
		return nil, errors.New("pptx: a:tbl without a:tblGrid")
	}
	return &Table{Rows: tbl.ChildrenNamed(NSA, "tr"), Columns: len(grid.ChildrenNamed(NSA, "gridCol"))}, nil
}

// Cell returns the paragraphs of cell (r, c).
func (t *Table) Cell(r, c int) ([]*Paragraph, error) {
	tcs := t.Rows[r].ChildrenNamed(NSA, "tc")
	if c >= len(tcs) {
		return nil, fmt.Errorf("pptx: table row %d has no cell %d", r, c)
	}
	return paragraphsOf(tcs[c].Child(NSA, "txBody")), nil
}

// ImageBlob returns a picture's image bytes (python-pptx's image.blob).
func (s *Shape) ImageBlob() ([]byte, error) {
	if s.El.Local != "pic" || s.slide == nil {
		return nil, errors.New("pptx: shape is not a picture")
	}
	blip := s.El.Path(NSP, "blipFill").Child(NSA, "blip")
	rID, ok := blip.Attr(NSR, "embed")
	if !ok {
		return nil, errors.New("pptx: picture without an embedded image")
	}
	part, err := s.slide.Pres.Pkg.Related(s.slide.Part, rID)
	if err != nil {
		return nil, err
	}
	return s.slide.Pres.Pkg.Blob(part)
}

func boolAttr(e *Element, name string) (*bool, error) {
	v, ok := e.Attr("", name)
	if !ok {
		return nil, nil
	}
	switch v {
	case "1", "true":
		b := true
		return &b, nil
	case "0", "false":
		b := false
		return &b, nil
	}
	return nil, fmt.Errorf("pptx: %s %s is not an xsd:boolean", name, strconv.Quote(v))
}
