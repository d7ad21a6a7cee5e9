package pptx

import (
	"errors"
	"fmt"
)

// Paragraph is an a:p.
type Paragraph struct{ El *Element }

// Text concatenates the paragraph's runs and fields, with "\v" for each
// line break, as python-pptx's _Paragraph.text.
func (p *Paragraph) Text() (string, error) {
	var b []byte
	for _, c := range p.El.Children {
		if c.Space != NSA {
			continue
		}
		switch c.Local {
		case "r":
			t, err := (&Run{El: c}).Text()
			if err != nil {
				return "", err
			}
			b = append(b, t...)
		case "br":
			b = append(b, '\v')
		case "fld":
			b = append(b, c.Child(NSA, "t").TextOr("")...)
		}
	}
	return string(b), nil
}

// Runs returns the paragraph's a:r children (fields and breaks are not
// runs in python-pptx).
func (p *Paragraph) Runs() []*Run {
	var out []*Run
	for _, r := range p.El.ChildrenNamed(NSA, "r") {
		out = append(out, &Run{El: r})
	}
	return out
}

// alignments are PP_ALIGN's XML values. python-pptx 1.0.2 maps no value
// to MIXED, whose XML value is "" (1.0.0 and 1.0.1 did): "" raises.
var alignments = map[string]bool{"l": true, "ctr": true, "r": true, "just": true, "justLow": true, "dist": true, "thaiDist": true}

// Alignment returns a:pPr@algn, "" when absent (python-pptx's None).
func (p *Paragraph) Alignment() (string, error) {
	v, ok := p.El.Child(NSA, "pPr").Attr("", "algn")
	if !ok {
		return "", nil
	}
	if !alignments[v] {
		return "", fmt.Errorf("pptx: bad paragraph alignment %q", v)
	}
	return v, nil
}

// Level returns a:pPr@lvl (0 when absent).
func (p *Paragraph) Level() (int64, error) {
	n, err := intAttr(p.El.Child(NSA, "pPr"), "lvl")
	if err != nil || n == nil {
		return 0, err
	}
	return *n, nil
}

// Run is an a:r.
type Run struct{ El *Element }

// Text returns the run's a:t text, which python-pptx requires.
func (r *Run) Text() (string, error) {
	t := r.El.Child(NSA, "t")
	if t == nil {
		return "", errors.New("pptx: a:r without a:t")
	}
	return t.TextOr(""), nil
}

// Font returns the run's character properties.
func (r *Run) Font() Font { return Font{rPr: r.El.Child(NSA, "rPr")} }

// Font is a run's a:rPr as python-pptx's Font reads it: each property nil
// when not set on the run itself (inherited values are not resolved).
type Font struct{ rPr *Element }

// Name returns a:latin@typeface.
func (f Font) Name() (*string, error) {
	l := f.rPr.Child(NSA, "latin")
	if l == nil {
		return nil, nil
	}
	v, ok := l.Attr("", "typeface")
	if !ok {
		return nil, errors.New("pptx: a:latin without typeface")
	}
	return &v, nil
}

// Size returns @sz in hundredths of a point.
func (f Font) Size() (*int64, error) { return intAttr(f.rPr, "sz") }

// Bold returns @b.
func (f Font) Bold() (*bool, error) { return boolAttr(f.rPr, "b") }

// Italic returns @i.
func (f Font) Italic() (*bool, error) { return boolAttr(f.rPr, "i") }

var underlines = map[string]bool{
	"none": true, "words": true, "sng": true, "dbl": true, "heavy": true, "dotted": true, "dottedHeavy": true,
	"dash": true, "dashHeavy": true, "dashLong": true, "dashLongHeavy": true, "dotDash": true, "dotDashHeavy": true,
	"dotDotDash": true, "dotDotDashHeavy": true, "wavy": true, "wavyHeavy": true, "wavyDbl": true,
}

// Underline values besides the ST_TextUnderlineType names.
const (
	UnderlineUnset = "<None>"  // no @u: python-pptx's None
	UnderlineFalse = "<False>" // u="none"
	UnderlineTrue  = "<True>"  // u="sng"
)

// Underline returns @u as python-pptx's Font.underline: UnderlineUnset,
// UnderlineFalse, UnderlineTrue or the enumeration's XML name.
func (f Font) Underline() (string, error) {
	v, ok := f.rPr.Attr("", "u")
	if !ok {
		return UnderlineUnset, nil
	}
	if !underlines[v] {
		return "", fmt.Errorf("pptx: bad underline %q", v)
	}
	switch v {
	case "none":
		return UnderlineFalse, nil
	case "sng":
		return UnderlineTrue, nil
	}
	return v, nil
}

// Strike returns @strike, "noStrike" when absent (OSWorld reads the raw
// attribute).
func (f Font) Strike() string {
	if v, ok := f.rPr.Attr("", "strike"); ok {
		return v
	}
	return "noStrike"
}

// Color returns the run's colour as OSWorld tests it with
// hasattr(font.color, "rgb"): ok is false unless the run has a solid fill
// of an sRGB colour; err is set for an sRGB value that does not parse.
func (f Font) Color() (rgb [3]uint8, ok bool, err error) {
	fill := fillOf(f.rPr)
	if fill.Type != FillSolid || fill.Color == nil || fill.Color.Local != "srgbClr" {
		return rgb, false, nil
	}
	rgb, err = fill.RGB()
	return rgb, err == nil, err
}
