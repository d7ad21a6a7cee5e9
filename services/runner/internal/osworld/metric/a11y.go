package metric

import (
	"fmt"
	"strings"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// a11yNamespaces are the prefixes OSWorld's accessibility trees use for
// attribute namespaces, per guest OS (metrics/general.py).
var a11yNamespaces = map[string]map[string]string{
	"ubuntu":  a11yNS("ubuntu", "st", "attr", "cp", "doc", "docattr", "txt", "val", "act"),
	"windows": a11yNS("windows", "st", "attr", "cp", "doc", "docattr", "txt", "val", "act", "class"),
	"macos":   a11yNS("macos", "st", "attr", "cp", "doc", "txt", "val", "act", "role"),
}

func a11yNS(osname string, prefixes ...string) map[string]string {
	paths := map[string]string{
		"st": "state", "attr": "attributes", "cp": "component", "doc": "document",
		"docattr": "document/attributes", "txt": "text", "val": "value", "act": "action",
		"class": "class", "role": "role",
	}
	m := map[string]string{}
	for _, p := range prefixes {
		m[p] = "https://accessibility." + osname + ".example.org/ns/" + paths[p]
	}
	return m
}

// maxA11yTree bounds the accessibility tree a metric parses.
const maxA11yTree = 64 << 20

// metricAccessibilityTree checks an accessibility tree (XML) against a
// list of rules, each selecting elements by "xpath" or by CSS
// "selectors" (joined with ", "): a rule selecting nothing scores 0; with
// "text", the best match of an element's text (exact, or fuzz.ratio when
// "exact" is false) multiplies the score.
func metricAccessibilityTree(result, expected any, _ bool, opts map[string]any) (float64, error) {
	rules, ok := pyList(expected)
	if !ok {
		return 0, fmt.Errorf("check_accessibility_tree: rules must be a list")
	}
	osname := "ubuntu"
	if v, ok := opts["osname"].(string); ok {
		osname = v
	}
	ns, ok := a11yNamespaces[osname]
	if !ok {
		return 0, fmt.Errorf("check_accessibility_tree: unknown osname %q", osname)
	}
	s, ok := result.(string)
	if !ok || len(s) > maxA11yTree {
		return 0, nil
	}
	doc, err := xmlquery.Parse(strings.NewReader(s))
	if err != nil {
		return 0, nil
	}
	root := firstElement(doc)
	if root == nil {
		return 0, nil
	}
	total := 1.0
	for _, raw := range rules {
		r, ok := pyDict(raw)
		if !ok {
			return 0, fmt.Errorf("check_accessibility_tree: a rule must be an object")
		}
		var elems []*xmlquery.Node
		if xp, ok := r["xpath"].(string); ok {
			expr, err := xpath.CompileWithNS(xp, ns)
			if err != nil {
				return 0, fmt.Errorf("check_accessibility_tree: xpath %q: %w", xp, err)
			}
			elems = xmlquery.QuerySelectorAll(root, expr)
		} else if sels, ok := pyList(r["selectors"]); ok {
			parts := make([]string, len(sels))
			for i, e := range sels {
				parts[i] = PyStr(e)
			}
			sel, err := parseSelector(strings.Join(parts, ", "), ns)
			if err != nil {
				return 0, fmt.Errorf("check_accessibility_tree: %w", err)
			}
			elems = sel.selectAll(root)
		} else {
			return 0, fmt.Errorf("check_accessibility_tree: a rule needs xpath or selectors")
		}
		if len(elems) == 0 {
			return 0, nil
		}
		score := 1.0
		if text, ok := r["text"]; ok {
			exact, ok := r["exact"]
			if !ok {
				return 0, fmt.Errorf("check_accessibility_tree: a text rule needs exact")
			}
			score = 0
			for _, e := range elems {
				t, has := elementText(e)
				switch {
				case Truthy(exact):
					if has && PyEqual(text, t) || !has && text == nil {
						score = max(score, 1)
					}
				default:
					ts, ok := text.(string)
					if has && ok {
						score = max(score, IndelRatio(ts, t))
					}
				}
			}
		}
		total *= score
	}
	return total, nil
}

func firstElement(n *xmlquery.Node) *xmlquery.Node {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xmlquery.ElementNode {
			return c
		}
	}
	return nil
}

// elementText is lxml's element.text or None: the text before the first
// child element; has is false when there is none (an empty text is None
// too).
func elementText(n *xmlquery.Node) (string, bool) {
	if n.Type != xmlquery.ElementNode {
		return "", false
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xmlquery.TextNode || c.Type == xmlquery.CharDataNode {
			b.WriteString(c.Data)
			continue
		}
		if c.Type == xmlquery.ElementNode {
			break
		}
	}
	return b.String(), b.Len() > 0
}

// The CSS selectors of lxml's cssselect, as far as OSWorld's tasks use
// them: type and universal selectors, [attr], [ns|attr] with = ~= |= ^=
// $= *= and !=, #id and .class, the descendant, child (>), general (~)
// and adjacent (+) sibling combinators, and selector groups.

type attrTest struct {
	ns, name, op, value string
}

type compound struct {
	tag   string // "" or "*" for any element
	attrs []attrTest
	// comb joins this compound to the previous one: ' ', '>', '~', '+'.
	comb byte
}

// selectorGroup is a comma-separated list of complex selectors.
type selectorGroup [][]compound

func parseSelector(s string, ns map[string]string) (selectorGroup, error) {
	p := &selParser{s: s, ns: ns}
	var group selectorGroup
	for {
		sel, err := p.complex()
		if err != nil {
			return nil, fmt.Errorf("selector %q: %w", s, err)
		}
		group = append(group, sel)
		p.space()
		if p.i >= len(p.s) {
			return group, nil
		}
		if p.s[p.i] != ',' {
			return nil, fmt.Errorf("selector %q: unexpected %q at %d", s, p.s[p.i], p.i)
		}
		p.i++
	}
}

type selParser struct {
	s  string
	i  int
	ns map[string]string
}

func (p *selParser) space() bool {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r\f", p.s[p.i]) >= 0 {
		p.i++
	}
	return p.i > start
}

func (p *selParser) complex() ([]compound, error) {
	p.space()
	var out []compound
	comb := byte(0)
	for {
		c, err := p.compound()
		if err != nil {
			return nil, err
		}
		c.comb = comb
		out = append(out, c)
		sp := p.space()
		if p.i >= len(p.s) || p.s[p.i] == ',' {
			return out, nil
		}
		switch p.s[p.i] {
		case '>', '~', '+':
			comb = p.s[p.i]
			p.i++
			p.space()
		default:
			if !sp {
				return nil, fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
			}
			comb = ' '
		}
	}
}

func isIdentByte(c byte) bool {
	return c == '-' || c == '_' || c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *selParser) ident() string {
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\\' && p.i+1 < len(p.s) {
			b.WriteByte(p.s[p.i+1])
			p.i += 2
			continue
		}
		if !isIdentByte(c) {
			break
		}
		b.WriteByte(c)
		p.i++
	}
	return b.String()
}

func (p *selParser) compound() (compound, error) {
	var c compound
	if p.i < len(p.s) && p.s[p.i] == '*' {
		c.tag = "*"
		p.i++
	} else if p.i < len(p.s) && isIdentByte(p.s[p.i]) {
		c.tag = p.ident()
	}
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case '[':
			p.i++
			a, err := p.attr()
			if err != nil {
				return c, err
			}
			c.attrs = append(c.attrs, a)
		case '#':
			p.i++
			c.attrs = append(c.attrs, attrTest{name: "id", op: "=", value: p.ident()})
		case '.':
			p.i++
			c.attrs = append(c.attrs, attrTest{name: "class", op: "~=", value: p.ident()})
		case ':':
			return c, fmt.Errorf("pseudo-classes are not supported (at %d)", p.i)
		default:
			if c.tag == "" && len(c.attrs) == 0 {
				return c, fmt.Errorf("expected a selector at %d", p.i)
			}
			return c, nil
		}
	}
	if c.tag == "" && len(c.attrs) == 0 {
		return c, fmt.Errorf("empty selector")
	}
	return c, nil
}

func (p *selParser) attr() (attrTest, error) {
	p.space()
	var a attrTest
	name := p.ident()
	if p.i < len(p.s) && p.s[p.i] == '|' && (p.i+1 >= len(p.s) || p.s[p.i+1] != '=') {
		p.i++
		uri, ok := p.ns[name]
		if !ok {
			return a, fmt.Errorf("unknown namespace prefix %q", name)
		}
		a.ns = uri
		name = p.ident()
	}
	if name == "" {
		return a, fmt.Errorf("attribute name expected at %d", p.i)
	}
	a.name = name
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return a, nil
	}
	for _, op := range []string{"=", "~=", "|=", "^=", "$=", "*=", "!="} {
		if strings.HasPrefix(p.s[p.i:], op) {
			a.op = op
			p.i += len(op)
			break
		}
	}
	if a.op == "" {
		return a, fmt.Errorf("attribute operator expected at %d", p.i)
	}
	p.space()
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') {
		q := p.s[p.i]
		p.i++
		var b strings.Builder
		for p.i < len(p.s) && p.s[p.i] != q {
			if p.s[p.i] == '\\' && p.i+1 < len(p.s) {
				p.i++
			}
			b.WriteByte(p.s[p.i])
			p.i++
		}
		if p.i >= len(p.s) {
			return a, fmt.Errorf("unterminated string")
		}
		p.i++
		a.value = b.String()
	} else {
		a.value = p.ident()
	}
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != ']' {
		return a, fmt.Errorf("] expected at %d", p.i)
	}
	p.i++
	return a, nil
}

// selectAll returns the elements of the tree under (and including) root
// that some selector of the group matches, in document order.
func (g selectorGroup) selectAll(root *xmlquery.Node) []*xmlquery.Node {
	var out []*xmlquery.Node
	var walk func(n *xmlquery.Node)
	walk = func(n *xmlquery.Node) {
		if n.Type == xmlquery.ElementNode {
			for _, sel := range g {
				if matchComplex(n, sel, len(sel)-1, root) {
					out = append(out, n)
					break
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// matchComplex tells whether n matches sel[:i+1], its ancestors and
// siblings (within root) matching the earlier compounds.
func matchComplex(n *xmlquery.Node, sel []compound, i int, root *xmlquery.Node) bool {
	if !matchCompound(n, sel[i]) {
		return false
	}
	if i == 0 {
		return true
	}
	switch sel[i].comb {
	case '>':
		p := n.Parent
		return p != nil && p.Type == xmlquery.ElementNode && inTree(p, root) && matchComplex(p, sel, i-1, root)
	case ' ':
		for p := n.Parent; p != nil && p.Type == xmlquery.ElementNode && inTree(p, root); p = p.Parent {
			if matchComplex(p, sel, i-1, root) {
				return true
			}
		}
		return false
	case '+':
		s := prevElement(n)
		return s != nil && matchComplex(s, sel, i-1, root)
	case '~':
		for s := prevElement(n); s != nil; s = prevElement(s) {
			if matchComplex(s, sel, i-1, root) {
				return true
			}
		}
	}
	return false
}

// inTree tells whether n is root or under it: cssselect's
// descendant-or-self axis starts at the element the selector is applied
// to.
func inTree(n, root *xmlquery.Node) bool {
	for ; n != nil; n = n.Parent {
		if n == root {
			return true
		}
	}
	return false
}

func prevElement(n *xmlquery.Node) *xmlquery.Node {
	for s := n.PrevSibling; s != nil; s = s.PrevSibling {
		if s.Type == xmlquery.ElementNode {
			return s
		}
	}
	return nil
}

func matchCompound(n *xmlquery.Node, c compound) bool {
	if c.tag != "" && c.tag != "*" && (n.Data != c.tag || n.NamespaceURI != "") {
		return false
	}
	for _, a := range c.attrs {
		v, ok := attrValue(n, a.ns, a.name)
		if !matchAttr(v, ok, a) {
			return false
		}
	}
	return true
}

func attrValue(n *xmlquery.Node, ns, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Name.Local == name && a.NamespaceURI == ns {
			return a.Value, true
		}
	}
	return "", false
}

// matchAttr is cssselect's translation of an attribute test: the empty
// value matches nothing with ~= ^= $= *=.
func matchAttr(v string, ok bool, a attrTest) bool {
	if a.op == "!=" {
		return !ok || v != a.value
	}
	if !ok {
		return false
	}
	switch a.op {
	case "":
		return true
	case "=":
		return v == a.value
	case "~=":
		if a.value == "" || strings.ContainsAny(a.value, " \t\n\r\f") {
			return false
		}
		for _, w := range strings.Fields(v) {
			if w == a.value {
				return true
			}
		}
		return false
	case "|=":
		return v == a.value || strings.HasPrefix(v, a.value+"-")
	case "^=":
		return a.value != "" && strings.HasPrefix(v, a.value)
	case "$=":
		return a.value != "" && strings.HasSuffix(v, a.value)
	case "*=":
		return a.value != "" && strings.Contains(v, a.value)
	}
	return false
}
