package media

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// parseLibxml2 builds the tree libxml2's HTML parser (which lxml.html
// uses) builds, from x/net/html's tokens: the HTML5 tree builder differs
// where it matters for compare_epub, e.g. a stray </p> becomes an empty
// paragraph in HTML5 and is ignored by libxml2, and HTML5 adds tbody.
// The rules kept are libxml2's: a start tag first closes the open element
// while its htmlStartClose entry lists it, then implies html, head or
// body, and a misplaced html, head or body is ignored with as many of
// their end tags; an end tag closes up to its element when it is open
// (across elements of lower end priority) and is ignored otherwise;
// non-blank text directly in html or head opens a paragraph; blanks
// before the first tag or text are skipped; a "<" that starts no tag is
// text; past the root's end tag a new html is implied where lxml does not
// look.
func parseLibxml2(text string) (*html.Node, error) {
	doc := &html.Node{Type: html.DocumentNode}
	var stack []*html.Node
	var root, head, body *html.Node
	hasDoctype := false
	cur := func() *html.Node {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	curName := func() string {
		if n := cur(); n != nil {
			return n.Data
		}
		return ""
	}
	push := func(name string, attrs []html.Attribute) *html.Node {
		n := &html.Node{Type: html.ElementNode, Data: name, Attr: attrs}
		switch p := cur(); {
		case p != nil:
			p.AppendChild(n)
		case root != nil && !hasDoctype:
			// Past the root's end tag, libxml2's tree builder puts a new
			// element under the document's first child: the root (an
			// html it implies, and within it what follows, where lxml's
			// fromstring does not look), or, with a doctype, beside it.
			root.AppendChild(n)
		default:
			doc.AppendChild(n)
		}
		stack = append(stack, n)
		switch name {
		case "html":
			if root == nil {
				root = n
			}
		case "head":
			head = n
		case "body":
			body = n
		}
		return n
	}
	pop := func() { stack = stack[:len(stack)-1] }
	autoClose := func(name string) {
		for len(stack) > 0 && startCloses(name, curName()) {
			pop()
		}
	}
	implied := func(name string) {
		if name == "html" {
			return
		}
		if len(stack) == 0 {
			push("html", nil)
		}
		if name == "body" || name == "head" {
			return
		}
		if len(stack) <= 1 && headTags[name] {
			if head != nil || body != nil {
				return
			}
			push("head", nil)
			return
		}
		if name == "noframes" || name == "frame" || name == "frameset" || body != nil {
			return
		}
		for _, n := range stack {
			if n.Data == "body" || n.Data == "head" {
				return
			}
		}
		push("body", nil)
	}
	// depth counts the html, head and body start tags ignored as
	// misplaced; as many of their end tags are ignored too.
	depth := 0
	inStack := func(name string) bool {
		return slices.ContainsFunc(stack, func(n *html.Node) bool { return n.Data == name })
	}
	start := func(name string, attrs []html.Attribute, selfClosing bool) {
		autoClose(name)
		implied(name)
		switch {
		case name == "html" && len(stack) > 0,
			name == "head" && len(stack) != 1,
			name == "body" && inStack("body"):
			// Misplaced: libxml2 ignores the tag, after what it closed
			// and implied.
			depth++
			return
		}
		push(name, attrs)
		if info, ok := htmlInfo[name]; ok && info[1] || selfClosing {
			pop()
		}
	}
	end := func(name string) {
		if depth > 0 && (name == "html" || name == "body" || name == "head") {
			depth--
			return
		}
		i := len(stack) - 1
		for ; i >= 0; i-- {
			if stack[i].Data == name {
				break
			}
		}
		if i < 0 {
			return // not open: ignored
		}
		prio := endPriority(name)
		for j := len(stack) - 1; j > i; j-- {
			if endPriority(stack[j].Data) > prio {
				return
			}
		}
		stack = stack[:i]
	}
	started := false // libxml2 skips blanks before the first tag or text
	addText := func(s string) {
		if !started {
			if s = strings.TrimLeft(s, " \t\n\r"); s == "" {
				return
			}
		}
		started = true
		blank := strings.TrimLeft(s, " \t\n\r") == ""
		if !blank && (len(stack) == 0 || curName() == "html" || curName() == "head") {
			autoClose("p")
			implied("p")
			push("p", nil)
		}
		p := cur()
		if p == nil {
			return
		}
		if last := p.LastChild; last != nil && last.Type == html.TextNode {
			last.Data += s
			return
		}
		p.AppendChild(&html.Node{Type: html.TextNode, Data: s})
	}
	// bareLess is a "<" that starts no tag: libxml2 hands it to the tree
	// builder as text on its own, which puts it in the open element as
	// it is (no paragraph implied) or, with none open, drops it.
	bareLess := func() {
		p := cur()
		if p == nil {
			return
		}
		if last := p.LastChild; last != nil && last.Type == html.TextNode {
			last.Data += "<"
			return
		}
		p.AppendChild(&html.Node{Type: html.TextNode, Data: "<"})
	}
	afterDoctype := false
	z := html.NewTokenizer(strings.NewReader(text))
	for tokens := 0; ; tokens++ {
		if tokens > maxHTMLTokens {
			// libxml2 reads any length.
			return nil, fmt.Errorf("html of more than %d tokens: %w", maxHTMLTokens, metric.ErrOverCap)
		}
		if len(stack) > maxHTMLDepth {
			// libxml2 stops far shallower (256 levels without huge_tree).
			return nil, errors.New("html nested too deeply")
		}
		tt := z.Next()
		if afterDoctype {
			// libxml2 reads on from a misplaced doctype without looking
			// for an end tag or a declaration: their "<" is text.
			afterDoctype = false
			if raw := string(z.Raw()); tt == html.EndTagToken || tt == html.DoctypeToken ||
				tt == html.CommentToken && strings.HasPrefix(raw, "<!") && !strings.HasPrefix(raw, "<!--") {
				bareLess()
				addText(html.UnescapeString(raw[1:]))
				continue
			}
		}
		switch tt {
		case html.DoctypeToken:
			// One before any content is the document's; a misplaced one
			// libxml2 skips. Either puts a DTD first in the document.
			afterDoctype = started
			hasDoctype = true
		case html.ErrorToken:
			if errors.Is(z.Err(), io.EOF) {
				if root == nil {
					return nil, errEPUBRaises
				}
				return doc, nil
			}
			return nil, z.Err()
		case html.TextToken:
			addText(string(z.Text()))
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			started = true
			if tok.Data != "script" && tok.Data != "style" {
				// libxml2 reads only these two as raw text; x/net/html
				// also reads title, textarea, noscript and others so.
				z.NextIsNotRawText()
			}
			start(tok.Data, tok.Attr, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			started = true
			tok := z.Token()
			end(tok.Data)
		case html.CommentToken:
			raw := string(z.Raw())
			tok := z.Token()
			p := cur()
			switch {
			case strings.HasPrefix(raw, "<?"):
				// A processing instruction, kept in the tree and printed
				// as "<?target data>"; before the root (an <?xml ...?>
				// declaration) lxml does not print it.
				if p != nil {
					p.AppendChild(&html.Node{Type: html.RawNode, Data: piText(tok.Data[1:])})
				}
			case strings.HasPrefix(raw, "<!--"):
				if p != nil {
					p.AppendChild(&html.Node{Type: html.CommentNode, Data: tok.Data})
				}
			case strings.HasPrefix(raw, "<!"):
				// "<![CDATA[...]]>" and other "<!" that is no comment or
				// doctype: libxml2 reads it as text.
				bareLess()
				addText(html.UnescapeString(raw[1:]))
			}
		}
	}
}

// piText is a processing instruction as libxml2's HTML serializer prints
// it, from what x/net/html read between "<?" and ">": the target, then
// the data after the blanks that follow it.
func piText(in string) string {
	target, data, _ := strings.Cut(in, " ")
	if i := strings.IndexAny(in, " \t\n\r"); i >= 0 {
		target, data = in[:i], strings.TrimLeft(in[i:], " \t\n\r")
	}
	if data == "" {
		return "<?" + target + ">"
	}
	return "<?" + target + " " + data + ">"
}

// headTags are the elements libxml2 puts in an implied head.
var headTags = map[string]bool{"script": true, "style": true, "meta": true, "link": true, "title": true, "base": true}

// endPriority is libxml2's htmlEndPriority: an end tag closes open elements
// of at most its priority on the way to its own.
func endPriority(name string) int {
	switch name {
	case "div":
		return 150
	case "td", "th":
		return 160
	case "tr":
		return 170
	case "thead", "tbody", "tfoot":
		return 180
	case "table":
		return 190
	case "head", "body":
		return 200
	case "html":
		return 220
	}
	return 100
}

// startClose is libxml2's htmlStartClose (2.9.14, Debian bookworm's, which
// lxml uses there): for a new tag, the open elements it closes.
var startClose = func() map[string]map[string]bool {
	rules := map[string]string{
		"a":          "a head",
		"abbr":       "head",
		"acronym":    "head",
		"address":    "head p ul",
		"b":          "head",
		"bdo":        "head",
		"big":        "head",
		"blockquote": "head p",
		"body":       "head link p style title",
		"br":         "head",
		"caption":    "p",
		"center":     "b font head i p",
		"cite":       "head",
		"code":       "head",
		"col":        "caption col p",
		"colgroup":   "caption col colgroup p",
		"dd":         "address dir dt head listing menu p pre xmp",
		"dfn":        "head",
		"dir":        "head p",
		"div":        "head p",
		"dl":         "address dir dt head listing menu p pre xmp",
		"dt":         "address dd dir head listing menu p pre xmp",
		"em":         "head",
		"fieldset":   "a h1 h2 h3 h4 h5 h6 head legend listing p pre xmp",
		"font":       "head",
		"form":       "address dir dl form h1 h2 h3 h4 h5 h6 head hr listing menu ol p pre ul xmp",
		"frameset":   "head link p style title",
		"h1":         "head p",
		"h2":         "head p",
		"h3":         "head p",
		"h4":         "head p",
		"h5":         "head p",
		"h6":         "head p",
		"head":       "p",
		"hr":         "head p",
		"i":          "head",
		"iframe":     "head",
		"img":        "head",
		"kbd":        "head",
		"li":         "address dl h1 h2 h3 h4 h5 h6 head li listing p pre xmp",
		"listing":    "head p",
		"map":        "head",
		"menu":       "head p ul",
		"noscript":   "script",
		"ol":         "head p ul",
		"optgroup":   "option",
		"option":     "option",
		"p":          "b big h1 h2 h3 h4 h5 h6 head i p s small strike tt u",
		"pre":        "head p ul",
		"q":          "head",
		"s":          "head",
		"samp":       "head",
		"small":      "head",
		"span":       "head",
		"strike":     "head",
		"strong":     "head",
		"sub":        "head",
		"sup":        "head",
		"table":      "a h1 h2 h3 h4 h5 h6 head listing p pre xmp",
		"tbody":      "caption col colgroup p tbody td tfoot th thead tr",
		"td":         "a b font i p span td th u",
		"tfoot":      "caption col colgroup p tbody td th thead tr",
		"th":         "a b font i p span td th u",
		"thead":      "caption col colgroup",
		"title":      "p",
		"tr":         "caption col colgroup p td th tr",
		"tt":         "head",
		"u":          "head",
		"ul":         "address dir head listing menu ol p pre xmp",
		"var":        "head",
		"xmp":        "head p",
	}
	m := map[string]map[string]bool{}
	for tag, closes := range rules {
		m[tag] = map[string]bool{}
		for _, c := range strings.Fields(closes) {
			m[tag][c] = true
		}
	}
	return m
}()

func startCloses(newTag, open string) bool { return startClose[newTag][open] }
