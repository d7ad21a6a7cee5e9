package docx

import (
	"errors"
	"fmt"
	"strings"
)

// Namespaces of OpenDocument.
const (
	nsOffice   = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
	nsText     = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
	nsStyle    = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
	nsFO       = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
	nsManifest = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
)

// ODT is an OpenDocument text file as odfpy's load() sees it.
type ODT struct {
	// Paragraphs are the texts of every text:p in odfpy's element order
	// (content.xml's, then styles.xml's headers and footers), each its
	// direct text plus the direct text of its direct
	// text:span children: docs.py's get_paragraph_texts_odt. Headings
	// (text:h) are not text:p and so are absent.
	Paragraphs []string
	// SpanStyles are the text:style-name of every text:span.
	SpanStyles []string
	// AutoStyles are the children of office:automatic-styles, content.xml's
	// first and styles.xml's after, as odfpy merges them.
	AutoStyles []AutoStyle
}

// AutoStyle is one child node of office:automatic-styles as odfpy holds
// it: a style element, or the text between two (whitespace, usually).
type AutoStyle struct {
	// Text marks a text node; odfpy's getAttribute raises on one.
	Text bool
	// Name is the element's name attribute (getAttribute("name")), ""
	// when absent.
	Name string
	// NameRaises: the schema gives the element no name attribute, so
	// getAttribute("name") raises.
	NameRaises bool
	// Props are the element's child nodes.
	Props []StyleProp
}

// StyleProp is one child node of a style.
type StyleProp struct {
	// BackgroundColor is fo:background-color (getAttribute
	// ("backgroundcolor")), "" when absent.
	BackgroundColor string
	// Raises: a text node, or an element the schema gives no
	// fo:background-color.
	Raises bool
}

// ErrODFRaises marks a document on which odfpy raises while a metric
// reads it.
var ErrODFRaises = errors.New("odfpy raises reading this document")

// Highlighted is check_highlighted_words' test: whether a text:span with
// a style name names an automatic style with a child of that background
// colour. It reads, in odfpy's order, every automatic style's name for
// every styled span and every child of each style so named, and fails
// with ErrODFRaises where one of those reads raises in odfpy (a score of
// 0 either way, so it may stop at the first colour found).
func (d *ODT) Highlighted(color string) (bool, error) {
	for _, name := range d.SpanStyles {
		if name == "" {
			continue
		}
		for _, s := range d.AutoStyles {
			if s.Text || s.NameRaises {
				return false, ErrODFRaises
			}
			if s.Name != name {
				continue
			}
			for _, p := range s.Props {
				if p.Raises {
					return false, ErrODFRaises
				}
				if p.BackgroundColor == color {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// OpenODT reads the .odt file at path.
func OpenODT(path string) (*ODT, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ReadODT(b)
}

// ReadODT reads an .odt package held in memory. Like odfpy, it needs
// META-INF/manifest.xml and reads content.xml and styles.xml only when the
// manifest lists them.
func ReadODT(data []byte) (*ODT, error) {
	p, err := openPkg(data)
	if err != nil {
		return nil, err
	}
	man, err := p.xmlPart("META-INF/manifest.xml")
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, e := range man.children(nsManifest, "file-entry") {
		if fp, ok := e.attr(nsManifest, "full-path"); ok {
			listed[fp] = true
		}
	}
	read := func(name string) (*node, error) {
		if !listed[name] || !p.has(name) {
			// odfpy skips a part the manifest does not list, and
			// ignores a listed one that is missing (KeyError).
			return nil, nil
		}
		return p.xmlPart(name)
	}
	content, err := read("content.xml")
	if err != nil {
		return nil, err
	}
	styles, err := read("styles.xml")
	if err != nil {
		return nil, err
	}
	d := &ODT{}
	names := odfpyNames(content, styles)
	for _, root := range []*node{content, styles} {
		for _, as := range root.children(nsOffice, "automatic-styles") {
			d.AutoStyles = append(d.AutoStyles, autoStyles(as, names)...)
		}
	}
	// odfpy indexes elements as its parser adds them, content.xml before
	// styles.xml, so the body's paragraphs come before the headers' and
	// footers'.
	for _, root := range []*node{content, styles} {
		root.walk(func(n *node) bool {
			if n.is(nsText, "p") {
				d.Paragraphs = append(d.Paragraphs, odtParagraphText(n))
			}
			return true
		})
	}
	for _, root := range []*node{content, styles} {
		root.walk(func(n *node) bool {
			if n.is(nsText, "span") {
				name, ok := names.refs[n]
				if !ok {
					name, _ = n.attr(nsText, "style-name")
				}
				d.SpanStyles = append(d.SpanStyles, name)
			}
			return true
		})
	}
	if content == nil && styles == nil {
		return nil, fmt.Errorf("odt: no content.xml or styles.xml")
	}
	return d, nil
}

// odtParagraphText is get_paragraph_texts_odt for one text:p: its text
// nodes and the text nodes of its direct text:span children; spaces
// written as text:s, tabs and line breaks, links and nested spans add
// nothing.
func odtParagraphText(p *node) string {
	var b strings.Builder
	for _, k := range p.Kids {
		switch {
		case k.isText():
			b.WriteString(k.Text)
		case k.is(nsText, "span"):
			for _, t := range k.Kids {
				if t.isText() {
					b.WriteString(t.Text)
				}
			}
		}
	}
	return b.String()
}

// autoStyles reads one office:automatic-styles element's children as
// odfpy's loader leaves them in document.automaticstyles. Its text goes
// there only when the element has a child element: odfpy adds text to
// the element being built, which for automatic-styles is a copy it drops
// unless a child's start switched it to the document's own.
func autoStyles(as *node, names styleNames) []AutoStyle {
	hasElement := false
	for _, k := range as.Kids {
		hasElement = hasElement || !k.isText()
	}
	var out []AutoStyle
	for _, s := range as.Kids {
		if s.isText() {
			if hasElement {
				out = append(out, AutoStyle{Text: true})
			}
			continue
		}
		st := AutoStyle{}
		if ns, ok := nameAttrNS[s.Space+" "+s.Local]; ok {
			st.Name, _ = s.attr(ns, "name")
			if renamed, ok := names.styles[s]; ok {
				st.Name = renamed
			}
		} else {
			st.NameRaises = true
		}
		for _, prop := range s.Kids {
			if prop.isText() || prop.Space != nsStyle || !backgroundElements[prop.Local] {
				st.Props = append(st.Props, StyleProp{Raises: true})
				continue
			}
			bg, _ := prop.attr(nsFO, "background-color")
			st.Props = append(st.Props, StyleProp{BackgroundColor: bg})
		}
		out = append(out, st)
	}
	return out
}

// styleNames are the names odfpy's loader rewrites: a style:style
// directly in office:styles or office:automatic-styles whose style:name
// an earlier one (content.xml's, then styles.xml's) already took is
// renamed "M"+name, and from then on every element's text:style-name
// that names it is rewritten to the new name.
type styleNames struct {
	styles map[*node]string // style:style -> its name after renaming
	refs   map[*node]string // element -> its text:style-name after rewriting
}

// odfpyNames replays that renaming over the parts in the loader's order.
func odfpyNames(roots ...*node) styleNames {
	names := styleNames{styles: map[*node]string{}, refs: map[*node]string{}}
	taken := map[string]bool{}
	fix := map[string]string{}
	for _, root := range roots {
		root.walk(func(n *node) bool {
			if n.is(nsStyle, "style") && n.Parent != nil && n.Parent.Space == nsOffice &&
				(n.Parent.Local == "styles" || n.Parent.Local == "automatic-styles") {
				if name, ok := n.attr(nsStyle, "name"); ok {
					if taken[name] {
						fix[name] = "M" + name
						name = "M" + name
						names.styles[n] = name
					}
					taken[name] = true
				}
			}
			if ref, ok := n.attr(nsText, "style-name"); ok {
				if to, ok := fix[ref]; ok {
					names.refs[n] = to
				}
			}
			return true
		})
	}
	return names
}
