package media

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// xnode is the part of an ElementTree element the metrics read: tag,
// attributes, children and .text (the character data before the first
// child, nil when there is none).
type xnode struct {
	tag      string
	attrs    map[string]string
	text     *string
	children []*xnode
}

// maxXMLDepth bounds the nesting parseXML follows. ElementTree (expat)
// has no such bound, so deeper XML is not scored (metric.ErrOverCap).
const maxXMLDepth = 256

// parseXML is ElementTree.fromstring: the root element.
func parseXML(s string) (*xnode, error) {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	var stack []*xnode
	var root *xnode
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= maxXMLDepth {
				return nil, fmt.Errorf("xml nested deeper than %d elements: %w", maxXMLDepth, metric.ErrOverCap)
			}
			n := &xnode{tag: t.Name.Local, attrs: map[string]string{}}
			for _, a := range t.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			} else if root == nil {
				root = n
			} else {
				return nil, errors.New("xml has several root elements")
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				n := stack[len(stack)-1]
				if len(n.children) == 0 {
					s := string(t)
					if n.text != nil {
						s = *n.text + s
					}
					n.text = &s
				}
			}
		}
	}
	if root == nil {
		return nil, errors.New("xml has no root element")
	}
	return root, nil
}

var stepRE = regexp.MustCompile(`^([^\[]+)(?:\[@([\w-]+)="([^"]*)"\])?$`)

// find is Element.find for paths of tags with an optional [@attr="value"]
// per step: the first match in document order.
func (n *xnode) find(p string) *xnode {
	steps := strings.Split(p, "/")
	var walk func(cur *xnode, i int) *xnode
	walk = func(cur *xnode, i int) *xnode {
		if i == len(steps) {
			return cur
		}
		m := stepRE.FindStringSubmatch(steps[i])
		if m == nil {
			return nil
		}
		for _, c := range cur.children {
			if c.tag != m[1] {
				continue
			}
			if m[2] != "" && c.attrs[m[2]] != m[3] {
				continue
			}
			if r := walk(c, i+1); r != nil {
				return r
			}
		}
		return nil
	}
	return walk(n, 0)
}
