package pptx

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// Namespaces of the parts this package reads.
const (
	NSA   = "http://schemas.openxmlformats.org/drawingml/2006/main"
	NSP   = "http://schemas.openxmlformats.org/presentationml/2006/main"
	NSR   = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsRel = "http://schemas.openxmlformats.org/package/2006/relationships"
)

// Limits of parsed documents. libxml2 (under python-pptx) refuses
// documents nested deeper than 256 elements; the element caps (per
// document, and for all the parts of a package) keep dense parts from
// costing gigabytes as trees.
const (
	maxDepth           = 256
	maxElements        = 1 << 21
	maxPackageElements = 1 << 22
)

// Element is one XML element as ElementTree sees it: the namespace URI
// and local name, the attributes, the children, and Text, the character
// data before the first child (nil when there is none, as ElementTree's
// None).
type Element struct {
	Space, Local string
	Attrs        []xml.Attr
	Children     []*Element
	Text         *string
}

// ParseXML parses a document into an Element tree.
func ParseXML(data []byte) (*Element, error) {
	root, _, err := parseXML(data, maxElements)
	return root, err
}

// parseXML parses a document of at most limit elements and returns the
// number of elements.
func parseXML(data []byte, limit int) (*Element, int, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	var (
		root  *Element
		stack []*Element
		n     int
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("parse xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n++
			if n > limit {
				return nil, 0, fmt.Errorf("parse xml: more than %d elements: %w", limit, ErrTooLarge)
			}
			if len(stack) >= maxDepth {
				return nil, 0, fmt.Errorf("parse xml: nested deeper than %d", maxDepth)
			}
			e := &Element{Space: t.Name.Space, Local: t.Name.Local}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
					continue
				}
				e.Attrs = append(e.Attrs, a)
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, 0, fmt.Errorf("parse xml: more than one root element")
				}
				root = e
			} else {
				p := stack[len(stack)-1]
				p.Children = append(p.Children, e)
			}
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				continue
			}
			e := stack[len(stack)-1]
			if len(e.Children) == 0 {
				s := string(t)
				if e.Text != nil {
					s = *e.Text + s
				}
				e.Text = &s
			}
		}
	}
	if root == nil {
		return nil, 0, fmt.Errorf("parse xml: no root element")
	}
	return root, n, nil
}

// Is reports whether e is the element space:local.
func (e *Element) Is(space, local string) bool {
	return e != nil && e.Space == space && e.Local == local
}

// Attr returns the attribute space:local and whether it is present.
func (e *Element) Attr(space, local string) (string, bool) {
	if e == nil {
		return "", false
	}
	for _, a := range e.Attrs {
		if a.Name.Space == space && a.Name.Local == local {
			return a.Value, true
		}
	}
	return "", false
}

// Child returns the first child space:local, or nil.
func (e *Element) Child(space, local string) *Element {
	if e == nil {
		return nil
	}
	for _, c := range e.Children {
		if c.Space == space && c.Local == local {
			return c
		}
	}
	return nil
}

// Path follows first children named local in namespace space.
func (e *Element) Path(space string, locals ...string) *Element {
	for _, l := range locals {
		e = e.Child(space, l)
	}
	return e
}

// ChildrenNamed returns the children space:local in document order.
func (e *Element) ChildrenNamed(space, local string) []*Element {
	if e == nil {
		return nil
	}
	var out []*Element
	for _, c := range e.Children {
		if c.Space == space && c.Local == local {
			out = append(out, c)
		}
	}
	return out
}

// Descendants returns the descendants space:local of e (e itself
// excluded) in document order, as ElementTree's ".//name" does.
func (e *Element) Descendants(space, local string) []*Element {
	var out []*Element
	var walk func(*Element)
	walk = func(x *Element) {
		for _, c := range x.Children {
			if c.Space == space && c.Local == local {
				out = append(out, c)
			}
			walk(c)
		}
	}
	if e != nil {
		walk(e)
	}
	return out
}

// Find returns the first descendant space:local of e, or nil.
func (e *Element) Find(space, local string) *Element {
	if e == nil {
		return nil
	}
	for _, c := range e.Children {
		if c.Space == space && c.Local == local {
			return c
		}
		if f := c.Find(space, local); f != nil {
			return f
		}
	}
	return nil
}

// TextOr returns Text, or def when Text is nil.
func (e *Element) TextOr(def string) string {
	if e == nil || e.Text == nil {
		return def
	}
	return *e.Text
}
