package media

import (
	"errors"
	"fmt"
	"io"
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
// body; an end tag closes up to its element when it is open (across
// elements of lower end priority) and is ignored otherwise; non-blank text
// directly in html or head opens a paragraph.
func parseLibxml2(text string) (*html.Node, error) {
	doc := &html.Node{Type: html.DocumentNode}
	var stack []*html.Node
	var root, head, body *html.Node
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
		if p := cur(); p != nil {
			p.AppendChild(n)
		} else {
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
	start := func(name string, attrs []html.Attribute, selfClosing bool) {
		switch {
		case name == "html" && len(stack) > 0,
			name == "head" && (head != nil || body != nil),
			name == "body" && body != nil:
			// Misplaced or repeated: libxml2 ignores the tag.
			return
		}
		autoClose(name)
		implied(name)
		push(name, attrs)
		if info, ok := htmlInfo[name]; ok && info[1] || selfClosing {
			pop()
		}
	}
	end := func(name string) {
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
	addText := func(s string) {
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
		switch tt {
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
			start(tok.Data, tok.Attr, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			tok := z.Token()
			end(tok.Data)
		case html.CommentToken:
			tok := z.Token()
			if strings.HasPrefix(tok.Data, "?") {
				// An <?xml ...?> declaration: a PI outside the root.
				continue
			}
			if p := cur(); p != nil {
				p.AppendChild(&html.Node{Type: html.CommentNode, Data: tok.Data})
			}
		}
	}
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

// startClose is libxml2's htmlStartClose: for a new tag, the open
// elements it closes.
var startClose = func() map[string]map[string]bool {
	heads := "h1 h2 h3 h4 h5 h6"
	fontstyle := "tt i b u s strike big small"
	rules := map[string]string{
		"form":       "form p hr " + heads + " dl ul ol menu dir address pre listing xmp head",
		"head":       "p",
		"title":      "p",
		"body":       "head style script title",
		"frameset":   "head style script title",
		"li":         "p " + heads + " dl address pre listing xmp head li",
		"hr":         "p head",
		"h1":         "p head h2 h3 h4 h5 h6",
		"h2":         "p head h1 h3 h4 h5 h6",
		"h3":         "p head h1 h2 h4 h5 h6",
		"h4":         "p head h1 h2 h3 h5 h6",
		"h5":         "p head h1 h2 h3 h4 h6",
		"h6":         "p head h1 h2 h3 h4 h5",
		"dir":        "p head",
		"address":    "p head ul",
		"pre":        "p head ul",
		"listing":    "p head",
		"xmp":        "p",
		"blockquote": "p head",
		"dl":         "p dt menu dir address pre listing xmp head",
		"dt":         "p menu dir address pre listing xmp head dd",
		"dd":         "p menu dir address pre listing xmp head dt",
		"ul":         "p head ol menu dir address pre listing xmp",
		"ol":         "p head ul",
		"menu":       "p head ul",
		"p":          "p head " + heads + " " + fontstyle,
		"div":        "p head",
		"noscript":   "script",
		"center":     "font b i p head",
		"a":          "a head",
		"caption":    "p",
		"colgroup":   "caption colgroup col p",
		"col":        "caption col p",
		"table":      "p head " + heads + " pre listing xmp a",
		"th":         "th td p span font a b i u",
		"td":         "th td p span font a b i u",
		"tr":         "th td tr caption col colgroup p",
		"thead":      "caption col colgroup",
		"tfoot":      "th td tr caption col colgroup thead tbody p",
		"tbody":      "th td tr caption col colgroup thead tfoot tbody p",
		"optgroup":   "option",
		"option":     "option",
		"fieldset":   "legend p head " + heads + " pre listing xmp a",
	}
	// Most other elements close an open head.
	for _, n := range strings.Fields("tt i b u s strike big small em strong dfn code samp kbd var cite abbr acronym img font br map q sub sup span bdo iframe") {
		if _, ok := rules[n]; !ok {
			rules[n] = "head"
		}
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
