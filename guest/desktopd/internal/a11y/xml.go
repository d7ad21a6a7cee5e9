// Package a11y builds OSWorld's accessibility tree: XML with a
// <desktop-frame> root and namespaced attributes (st: states, attr:
// toolkit attributes, cp: position and size, val: values, act: actions),
// read from AT-SPI over D-Bus when an accessibility bus is available and
// otherwise from the X window tree. The root's source attribute says which.
package a11y

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Namespaces as OSWorld's server declares them for Ubuntu.
var namespaces = []struct{ prefix, uri string }{
	{"st", "https://accessibility.ubuntu.example.org/ns/state"},
	{"attr", "https://accessibility.ubuntu.example.org/ns/attributes"},
	{"cp", "https://accessibility.ubuntu.example.org/ns/component"},
	{"doc", "https://accessibility.ubuntu.example.org/ns/document"},
	{"docattr", "https://accessibility.ubuntu.example.org/ns/document/attributes"},
	{"txt", "https://accessibility.ubuntu.example.org/ns/text"},
	{"val", "https://accessibility.ubuntu.example.org/ns/value"},
	{"act", "https://accessibility.ubuntu.example.org/ns/action"},
}

// Node is one element of the tree.
type Node struct {
	Role     string
	Attrs    []Attr // in output order; Name is "prefix:local" or "local"
	Text     string
	Children []*Node
}

// Attr is one attribute.
type Attr struct{ Name, Value string }

func (n *Node) add(name, value string) { n.Attrs = append(n.Attrs, Attr{name, value}) }

// Render writes the tree under a <desktop-frame> root that declares the
// namespaces, marking the source ("atspi" or "x11") and, when the walk
// was cut short (its deadline or the node budget), truncated="true".
func Render(source string, truncated bool, apps []*Node) string {
	var b strings.Builder
	b.WriteString("<desktop-frame")
	for _, ns := range namespaces {
		b.WriteString(" xmlns:" + ns.prefix + `="` + ns.uri + `"`)
	}
	b.WriteString(` source="` + source + `"`)
	if truncated {
		b.WriteString(` truncated="true"`)
	}
	if len(apps) == 0 {
		b.WriteString("/>")
		return b.String()
	}
	b.WriteString(">")
	for _, a := range apps {
		write(&b, a)
	}
	b.WriteString("</desktop-frame>")
	return b.String()
}

func write(b *strings.Builder, n *Node) {
	tag := xmlName(n.Role, "unknown")
	b.WriteString("<" + tag)
	seen := map[string]bool{}
	for _, a := range n.Attrs {
		name := a.Name
		if i := strings.IndexByte(name, ':'); i >= 0 {
			name = name[:i+1] + xmlName(name[i+1:], "_")
		} else {
			name = xmlName(name, "_")
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		b.WriteString(" " + name + `="`)
		escape(b, a.Value, true)
		b.WriteString(`"`)
	}
	if n.Text == "" && len(n.Children) == 0 {
		b.WriteString("/>")
		return
	}
	b.WriteString(">")
	escape(b, n.Text, false)
	for _, c := range n.Children {
		write(b, c)
	}
	b.WriteString("</" + tag + ">")
}

// xmlName makes s a valid XML name: OSWorld replaces spaces in role names
// with '-'; anything else invalid becomes '_'.
func xmlName(s, empty string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return empty
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '_' || unicode.IsLetter(r):
			b.WriteRune(r)
		case i > 0 && (r == '-' || r == '.' || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// escape writes s as XML character data, dropping characters XML cannot
// carry (and U+FFFC/U+FFFD, which OSWorld strips from text).
func escape(b *strings.Builder, s string, attr bool) {
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"' && attr:
			b.WriteString("&quot;")
		case (r == '\n' || r == '\r' || r == '\t') && attr:
			b.WriteString("&#" + itoa(int(r)) + ";")
		case r == 0xfffc || r == 0xfffd || r == utf8.RuneError:
		case r < 0x20 && r != '\n' && r != '\r' && r != '\t':
		case r >= 0xd800 && r <= 0xdfff, r == 0xfffe || r == 0xffff:
		default:
			b.WriteRune(r)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
