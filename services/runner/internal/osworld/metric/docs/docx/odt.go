package docx

import (
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

// AutoStyle is one automatic style.
type AutoStyle struct {
	Name string
	// BackgroundColors holds each child element's fo:background-color
	// ("" when it has none).
	BackgroundColors []string
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
	for _, root := range []*node{content, styles} {
		for _, as := range root.children(nsOffice, "automatic-styles") {
			for _, s := range as.Kids {
				if s.isText() {
					continue
				}
				st := AutoStyle{}
				st.Name, _ = s.attr(nsStyle, "name")
				for _, prop := range s.Kids {
					if prop.isText() {
						continue
					}
					bg, _ := prop.attr(nsFO, "background-color")
					st.BackgroundColors = append(st.BackgroundColors, bg)
				}
				d.AutoStyles = append(d.AutoStyles, st)
			}
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
				name, _ := n.attr(nsText, "style-name")
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
