package docx

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Limits of one parsed XML part: a crafted part must not exhaust memory or
// the stack of the walkers below. lxml has no cap on nodes (a part past
// maxNodes is metric.ErrOverCap), and itself refuses nesting deeper than
// 256 levels (without huge_tree), so a part past maxDepth fails there too.
const (
	maxNodes = 2 << 20
	maxDepth = 512
)

// node is one element of a parsed XML part, a text node (Local "" and
// Text set), or a comment or processing instruction (Local "" and Opaque).
// Mixed content keeps its order, since lxml's .text (used by python-docx
// for w:t) is only the text before the first child, and lxml counts a
// comment as a child; adjacent text nodes (text around CDATA or entities)
// are not merged, so readers concatenate them.
type node struct {
	Space, Local string
	Attr         []xml.Attr
	Kids         []*node
	Text         string
	Opaque       bool
	Parent       *node
}

// parseXML parses one part into a tree. Comments and processing
// instructions are kept only with lxml: odfpy's SAX handler and
// ElementTree drop them, and lxml (python-docx) does not.
func parseXML(data []byte, lxml bool) (*node, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8") {
			return r, nil
		}
		return nil, fmt.Errorf("xml encoding %q is not supported", label)
	}
	root := &node{}
	cur := root
	depth, count := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse xml: %w", err)
		}
		count++
		if count > maxNodes {
			return nil, fmt.Errorf("parse xml: over %d nodes: %w", maxNodes, metric.ErrOverCap)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth > maxDepth {
				return nil, fmt.Errorf("parse xml: nested over %d levels", maxDepth)
			}
			n := &node{Space: t.Name.Space, Local: t.Name.Local, Attr: t.Attr, Parent: cur}
			cur.Kids = append(cur.Kids, n)
			cur = n
		case xml.EndElement:
			depth--
			cur = cur.Parent
		case xml.CharData:
			if cur == root {
				continue
			}
			cur.Kids = append(cur.Kids, &node{Text: string(t), Parent: cur})
		case xml.Comment, xml.ProcInst:
			if lxml && cur != root {
				cur.Kids = append(cur.Kids, &node{Opaque: true, Parent: cur})
			}
		}
	}
	for _, k := range root.Kids {
		if k.Local != "" {
			k.Parent = nil
			return k, nil
		}
	}
	return nil, fmt.Errorf("parse xml: no root element")
}

// isText reports whether n is a text node.
func (n *node) isText() bool { return n.Local == "" && !n.Opaque }

// is reports whether n is the element ns:local.
func (n *node) is(ns, local string) bool { return n.Local == local && n.Space == ns }

// attr returns the attribute ns:local and whether it is present.
func (n *node) attr(ns, local string) (string, bool) {
	for _, a := range n.Attr {
		if a.Name.Local == local && a.Name.Space == ns {
			return a.Value, true
		}
	}
	return "", false
}

// child returns the first child element ns:local, or nil.
func (n *node) child(ns, local string) *node {
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		if k.is(ns, local) {
			return k
		}
	}
	return nil
}

// children returns the child elements ns:local.
func (n *node) children(ns, local string) []*node {
	if n == nil {
		return nil
	}
	var out []*node
	for _, k := range n.Kids {
		if k.is(ns, local) {
			out = append(out, k)
		}
	}
	return out
}

// walk visits n and its descendant elements in document order (pre-order),
// descending into an element only when visit returns true.
func (n *node) walk(visit func(*node) bool) {
	if n == nil || n.Local == "" {
		return
	}
	if !visit(n) {
		return
	}
	for _, k := range n.Kids {
		k.walk(visit)
	}
}

// leadText is lxml's .text: the text before the first child element,
// comment or processing instruction.
func (n *node) leadText() string {
	var b strings.Builder
	for _, k := range n.Kids {
		if !k.isText() {
			break
		}
		b.WriteString(k.Text)
	}
	return b.String()
}
