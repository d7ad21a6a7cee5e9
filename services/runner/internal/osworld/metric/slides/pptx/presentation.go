// Package pptx reads PowerPoint (OOXML) presentations the way python-pptx
// reports them, for OSWorld's presentation metrics: the slides through
// presentation.xml's relationships, their shapes with positions (inherited
// from the layout and master for placeholders), text frames, runs and run
// properties (nil where python-pptx says None), tables, pictures, notes and
// backgrounds. Every zip entry is read under a size cap.
//
// Values python-pptx parses lazily are parsed lazily here too, with the
// error python-pptx would raise, so that a metric fails exactly where
// OSWorld's would.
package pptx

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// MSO_SHAPE_TYPE values python-pptx reports.
const (
	TypeNone        = 0 // python-pptx's None (a graphic frame holding SmartArt, say)
	TypeAutoShape   = 1
	TypeChart       = 3
	TypeFreeform    = 5
	TypeGroup       = 6
	TypeEmbeddedOLE = 7
	TypeLine        = 9
	TypeLinkedOLE   = 10
	TypePicture     = 13
	TypePlaceholder = 14
	TypeMedia       = 16
	TypeTextBox     = 17
	TypeTable       = 19
)

// MSO_FILL values.
const (
	FillNone       = 0 // no fill element: python-pptx's None
	FillSolid      = 1
	FillPatterned  = 2
	FillGradient   = 3
	FillBackground = 5 // a:noFill
	FillPicture    = 6
	FillGroup      = 101
)

// Presentation is an open pptx.
type Presentation struct {
	Pkg    *Package
	Part   string
	Root   *Element
	Slides []*Slide
}

// Open reads the presentation at path.
func Open(path string) (*Presentation, error) {
	pk, err := OpenPackage(path)
	if err != nil {
		return nil, err
	}
	return load(pk)
}

// Read reads a presentation from memory.
func Read(data []byte) (*Presentation, error) {
	pk, err := ReadPackage(data)
	if err != nil {
		return nil, err
	}
	return load(pk)
}

func load(pk *Package) (*Presentation, error) {
	if err := pk.checkLoadable(); err != nil {
		return nil, err
	}
	part, ok, err := pk.RelatedByType("", "officeDocument")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("pptx: no main document relationship")
	}
	if !strings.HasSuffix(pk.types[part], ".main+xml") {
		return nil, fmt.Errorf("pptx: main part %q is not a presentation (%q)", part, pk.types[part])
	}
	root, err := pk.XML(part)
	if err != nil {
		return nil, err
	}
	if !root.Is(NSP, "presentation") {
		return nil, fmt.Errorf("pptx: %q is not a presentation", part)
	}
	p := &Presentation{Pkg: pk, Part: part, Root: root}
	for _, id := range root.Path(NSP, "sldIdLst").ChildrenNamed(NSP, "sldId") {
		rID, _ := id.Attr(NSR, "id")
		sp, err := pk.Related(part, rID)
		if err != nil {
			return nil, err
		}
		s, err := p.loadSlide(sp)
		if err != nil {
			return nil, err
		}
		p.Slides = append(p.Slides, s)
	}
	return p, nil
}

// SlideSize returns presentation.xml's sldSz cx and cy, nil when absent.
func (p *Presentation) SlideSize() (w, h *int64, err error) {
	sz := p.Root.Child(NSP, "sldSz")
	if sz == nil {
		return nil, nil, nil
	}
	if w, err = intAttr(sz, "cx"); err != nil {
		return nil, nil, err
	}
	if h, err = intAttr(sz, "cy"); err != nil {
		return nil, nil, err
	}
	if w == nil || h == nil {
		return nil, nil, errors.New("pptx: sldSz without cx or cy")
	}
	return w, h, nil
}

// Slide is one slide with its layout and master.
type Slide struct {
	Pres *Presentation
	Part string
	Root *Element
}

func (p *Presentation) loadSlide(part string) (*Slide, error) {
	if err := p.Pkg.checkType(part, "presentationml.slide+xml"); err != nil {
		return nil, err
	}
	root, err := p.Pkg.XML(part)
	if err != nil {
		return nil, err
	}
	if !root.Is(NSP, "sld") {
		return nil, fmt.Errorf("pptx: %q is not a slide", part)
	}
	return &Slide{Pres: p, Part: part, Root: root}, nil
}

// Layout returns the slide's layout part and root.
func (s *Slide) Layout() (string, *Element, error) {
	lp, ok, err := s.Pres.Pkg.RelatedByType(s.Part, "slideLayout")
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, fmt.Errorf("pptx: %q has no slide layout", s.Part)
	}
	root, err := s.Pres.Pkg.XML(lp)
	return lp, root, err
}

// Master returns the slide's master root (through its layout).
func (s *Slide) Master() (*Element, error) {
	lp, _, err := s.Layout()
	if err != nil {
		return nil, err
	}
	mp, ok, err := s.Pres.Pkg.RelatedByType(lp, "slideMaster")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("pptx: %q has no slide master", lp)
	}
	return s.Pres.Pkg.XML(mp)
}

func spTree(root *Element) (*Element, error) {
	t := root.Path(NSP, "cSld", "spTree")
	if t == nil {
		return nil, errors.New("pptx: slide without cSld/spTree")
	}
	return t, nil
}

var shapeTags = map[string]bool{"sp": true, "grpSp": true, "graphicFrame": true, "cxnSp": true, "pic": true, "contentPart": true}

func shapeElements(tree *Element) []*Element {
	var out []*Element
	for _, c := range tree.Children {
		if c.Space == NSP && shapeTags[c.Local] {
			out = append(out, c)
		}
	}
	return out
}

// Shapes returns the slide's top-level shapes in document order.
func (s *Slide) Shapes() ([]*Shape, error) {
	t, err := spTree(s.Root)
	if err != nil {
		return nil, err
	}
	var out []*Shape
	for _, e := range shapeElements(t) {
		out = append(out, &Shape{El: e, slide: s, topLevel: true})
	}
	return out, nil
}

// Fill is a fill as python-pptx's FillFormat reports it.
type Fill struct {
	Type  int      // FillNone, FillSolid, ...
	Color *Element // the solid fill's colour choice element, or nil
}

var fillTags = map[string]int{"noFill": FillBackground, "solidFill": FillSolid, "gradFill": FillGradient, "blipFill": FillPicture, "pattFill": FillPatterned, "grpFill": FillGroup}

var colorTags = map[string]bool{"scrgbClr": true, "srgbClr": true, "hslClr": true, "sysClr": true, "schemeClr": true, "prstClr": true}

// fillOf returns the fill of a fill-properties parent (its first fill
// child).
func fillOf(parent *Element) Fill {
	if parent == nil {
		return Fill{}
	}
	for _, c := range parent.Children {
		if c.Space != NSA {
			continue
		}
		if t, ok := fillTags[c.Local]; ok {
			f := Fill{Type: t}
			if t == FillSolid {
				for _, cc := range c.Children {
					if cc.Space == NSA && colorTags[cc.Local] {
						f.Color = cc
						break
					}
				}
			}
			return f
		}
	}
	return Fill{}
}

// ErrNoRGB is python-pptx's AttributeError on .rgb of a colour that is
// not an sRGB one (a theme colour, say, or none).
var ErrNoRGB = errors.New("pptx: colour has no rgb")

// RGB returns the solid fill's colour as python-pptx's ColorFormat.rgb.
func (f Fill) RGB() ([3]uint8, error) {
	if f.Color == nil || f.Color.Local != "srgbClr" {
		return [3]uint8{}, ErrNoRGB
	}
	v, ok := f.Color.Attr("", "val")
	if !ok {
		return [3]uint8{}, errors.New("pptx: srgbClr without val")
	}
	return ParseRGB(v)
}

// ParseRGB parses a hex colour as RGBColor.from_string: two digits of red,
// two of green, the rest blue.
func ParseRGB(v string) ([3]uint8, error) {
	if len(v) < 5 {
		return [3]uint8{}, fmt.Errorf("pptx: bad rgb %q", v)
	}
	var out [3]uint8
	for i, s := range []string{v[:2], v[2:4], v[4:]} {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 16, 64)
		if err != nil || n > 255 {
			return [3]uint8{}, fmt.Errorf("pptx: bad rgb %q", v)
		}
		out[i] = uint8(n)
	}
	return out, nil
}

// backgroundFill is python-pptx's background.fill of a slide or master:
// an inherited background (no p:bg/p:bgPr, or a style reference) reads as
// noFill, since python-pptx replaces it with one on access.
func backgroundFill(root *Element) Fill {
	bgPr := root.Path(NSP, "cSld", "bg", "bgPr")
	if bgPr == nil {
		return Fill{Type: FillBackground}
	}
	return fillOf(bgPr)
}

// Background returns the slide's background fill.
func (s *Slide) Background() Fill { return backgroundFill(s.Root) }

// MasterBackground returns the background fill of the slide's master.
func (s *Slide) MasterBackground() (Fill, error) {
	m, err := s.Master()
	if err != nil {
		return Fill{}, err
	}
	return backgroundFill(m), nil
}

// ErrNoNotesBody is python-pptx's notes_text_frame being None: the notes
// slide (or the notes master a new one would be cloned from) has no body
// placeholder.
var ErrNoNotesBody = errors.New("pptx: notes without a body placeholder")

// NotesText returns slide.notes_slide.notes_text_frame.text. python-pptx
// creates a notes slide when there is none, from the notes master (or its
// default one), so a slide without notes reads "" unless that master has
// no body placeholder.
func (s *Slide) NotesText() (string, error) {
	pk := s.Pres.Pkg
	np, ok, err := pk.RelatedByType(s.Part, "notesSlide")
	if err != nil {
		return "", err
	}
	if !ok {
		mp, ok, err := pk.RelatedByType(s.Pres.Part, "notesMaster")
		if err != nil || !ok {
			return "", err
		}
		m, err := pk.XML(mp)
		if err != nil {
			return "", err
		}
		body, err := bodyPlaceholder(m)
		if err != nil {
			return "", err
		}
		if body == nil {
			return "", ErrNoNotesBody
		}
		return "", nil
	}
	n, err := pk.XML(np)
	if err != nil {
		return "", err
	}
	body, err := bodyPlaceholder(n)
	if err != nil {
		return "", err
	}
	if body == nil {
		return "", ErrNoNotesBody
	}
	if !body.Is(NSP, "sp") {
		return "", errors.New("pptx: notes body placeholder is not a shape with text")
	}
	return (&Shape{El: body}).Text()
}

func bodyPlaceholder(root *Element) (*Element, error) {
	t, err := spTree(root)
	if err != nil {
		return nil, err
	}
	for _, e := range shapeElements(t) {
		ph := phOf(e)
		if ph == nil {
			continue
		}
		if typ, _ := ph.Attr("", "type"); typ == "body" {
			return e, nil
		}
	}
	return nil, nil
}

func intAttr(e *Element, name string) (*int64, error) {
	v, ok := e.Attr("", name)
	if !ok {
		return nil, nil
	}
	n, err := metric.PyInt(v, 10)
	if err != nil {
		return nil, fmt.Errorf("pptx: %s %q: %w", name, v, err)
	}
	return &n, nil
}
