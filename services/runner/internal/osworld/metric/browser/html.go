package browser

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// metricCompareHTMLs is compare_htmls: the two documents' nodes, walked in
// document order and paired as Python's zip pairs them (the shorter walk
// ends the comparison), must agree: strings by value, elements by name,
// stripped text and attributes (without sdnum, LibreOffice's number
// format, under ignore_sdnum).
func metricCompareHTMLs(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	a, ok, err := metric.ReadText(result)
	if err != nil || !ok {
		return 0, err
	}
	b, ok, err := metric.ReadText(expected)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("expected HTML file %v is missing", expected)
	}
	da, err := html.Parse(strings.NewReader(a))
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	db, err := html.Parse(strings.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("expected HTML: %v", err)
	}
	collapseBlanks(da)
	collapseBlanks(db)
	ignoreSdnum, _ := opts["ignore_sdnum"].(bool)
	na, nb := descendants(da), descendants(db)
	for i := range min(len(na), len(nb)) {
		if !sameNode(na[i], nb[i], ignoreSdnum) {
			return 0, nil
		}
	}
	return 1, nil
}

// collapseBlanks does what BeautifulSoup does to a string of only ASCII
// whitespace (space, tab, LF, FF, CR) as it builds the tree: it becomes
// "\n" when it holds a line break and " " otherwise, except inside pre and
// textarea. The HTML5 parser here keeps such strings as they are, so
// without this a line's indentation, which LibreOffice's export and a
// person's edit lay out differently, would make two tables differ.
func collapseBlanks(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.ElementNode && (c.Data == "pre" || c.Data == "textarea"):
			continue
		case c.Type == html.TextNode && c.Data != "" && strings.Trim(c.Data, " \t\n\f\r") == "":
			if strings.Contains(c.Data, "\n") {
				c.Data = "\n"
			} else {
				c.Data = " "
			}
		}
		collapseBlanks(c)
	}
}

// descendants is BeautifulSoup's recursiveChildGenerator: every node below
// the document, in document order.
func descendants(doc *html.Node) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			out = append(out, c)
			walk(c)
		}
	}
	walk(doc)
	return out
}

func sameNode(a, b *html.Node, ignoreSdnum bool) bool {
	ea, eb := a.Type == html.ElementNode, b.Type == html.ElementNode
	if !ea || !eb {
		// bs4 strings (text, comments, doctypes) compare as str; a tag never
		// equals a string.
		return !ea && !eb && a.Data == b.Data
	}
	if a.Data != b.Data {
		return false
	}
	if strings.TrimSpace(text(a)) != strings.TrimSpace(text(b)) {
		return false
	}
	aa, ab := attrs(a), attrs(b)
	if maps.EqualFunc(aa, ab, slices.Equal) {
		return true
	}
	if !ignoreSdnum {
		return false
	}
	delete(aa, "sdnum")
	delete(ab, "sdnum")
	return maps.EqualFunc(aa, ab, slices.Equal)
}

// text is bs4's Tag.text: the text nodes below n, without comments and
// without the content of script and style elements.
func text(n *html.Node) string {
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			switch c.Type {
			case html.TextNode:
				if p := c.Parent; p == nil || (p.Data != "script" && p.Data != "style") {
					sb.WriteString(c.Data)
				}
			case html.ElementNode:
				walk(c)
			}
		}
	}
	walk(n)
	return sb.String()
}

// multiValued are the attributes bs4 splits on whitespace into lists.
var multiValued = map[string]bool{
	"class": true, "rel": true, "rev": true, "accept-charset": true,
	"headers": true, "accesskey": true, "dropzone": true,
}

// attrs is bs4's Tag.attrs: the first value of each attribute, the
// multi-valued ones split on whitespace.
func attrs(n *html.Node) map[string][]string {
	out := map[string][]string{}
	for _, at := range n.Attr {
		k := at.Key
		if at.Namespace != "" {
			k = at.Namespace + ":" + k
		}
		if _, dup := out[k]; dup {
			continue
		}
		if multiValued[k] {
			out[k] = strings.Fields(at.Val)
		} else {
			out[k] = []string{at.Val}
		}
	}
	return out
}
