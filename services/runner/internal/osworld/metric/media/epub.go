package media

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_epub (others.py) unpacks both EPUBs into text files and averages
// difflib's line ratio over the pairs: toc.ncx without its navPoint lines,
// content.opf without dc:identifier lines, and every .html page re-printed
// by lxml (parsed with newlines removed, serialised with pretty_print),
// which htmlenc.go (the encoding libxml2 picks), htmlparse.go (its tree)
// and dumpHTML reproduce. TestLxmlPrettyMatchesPy and
// TestCompareEPUBMatchesOthersPy check them against lxml and others.py.
// Only entries at the top of the archive are found: an .html page inside
// a folder makes OSWorld's write fail, which scores 0.

// EPUB bounds: an archive entry and the whole archive as read, and the
// tokens of one page. OSWorld reads any size, so an EPUB past them is not
// scored (metric.ErrOverCap).
const (
	maxEPUBEntry  = 32 << 20
	maxEPUBTotal  = 128 << 20
	maxHTMLTokens = 1 << 22
)

var errEPUBRaises = errors.New("compare_epub raises on this archive")

// epubLines returns the line lists of process_epub's files in sorted path
// order; ok is false for a file that is not a zip (process_epub's empty
// list).
func epubLines(path string) ([][]string, error) {
	data, ok, err := metric.ReadText(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errEPUBRaises
	}
	return epubLinesFrom(path, data)
}

// epubLinesFrom is epubLines on the archive's bytes.
func epubLinesFrom(path, data string) ([][]string, error) {
	zr, err := zip.NewReader(strings.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil
	}
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	total := 0
	read := func(name string) (string, error) {
		for _, f := range zr.File {
			if f.Name != name {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				return "", errEPUBRaises
			}
			defer rc.Close()
			b, err := io.ReadAll(io.LimitReader(rc, maxEPUBEntry+1))
			if err != nil {
				return "", errEPUBRaises
			}
			if len(b) > maxEPUBEntry {
				return "", fmt.Errorf("epub %s: %s inflates past %d bytes: %w", path, name, maxEPUBEntry, metric.ErrOverCap)
			}
			if total += len(b); total > maxEPUBTotal {
				return "", fmt.Errorf("epub %s unpacks past %d bytes: %w", path, maxEPUBTotal, metric.ErrOverCap)
			}
			if !utf8.Valid(b) {
				// bytes.decode() raises UnicodeDecodeError.
				return "", errEPUBRaises
			}
			return string(b), nil
		}
		return "", errEPUBRaises
	}
	type file struct {
		name  string
		lines []string
	}
	var files []file
	drop := func(name, marker string) error {
		text, err := read(name)
		if err != nil {
			return err
		}
		var kept []string
		for _, l := range metric.SplitLines(text) {
			if !strings.Contains(l, marker) {
				kept = append(kept, l)
			}
		}
		files = append(files, file{name, kept})
		return nil
	}
	if names["toc.ncx"] {
		if err := drop("toc.ncx", "navPoint"); err != nil {
			return nil, err
		}
	}
	if names["content.opf"] {
		if err := drop("content.opf", "dc:identifier"); err != nil {
			return nil, err
		}
	}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".html") {
			continue
		}
		if strings.Contains(f.Name, "/") {
			// open(base_dir/dir/page.html, "w") has no folder to write in.
			return nil, errEPUBRaises
		}
		text, err := read(f.Name)
		if err != nil {
			return nil, err
		}
		text = strings.NewReplacer("\n", "", "\r", "").Replace(text)
		pretty, err := lxmlPretty(text)
		if err != nil {
			return nil, err
		}
		files = append(files, file{f.Name, metric.SplitLines(pretty)})
	}
	slices.SortStableFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	out := make([][]string, len(files))
	for i, f := range files {
		out[i] = f.lines
	}
	return out, nil
}

// metricCompareEPUB is compare_epub: the sum of diff_text_file over the
// pairs of unpacked files, divided by the result's file count.
func metricCompareEPUB(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if result == nil {
		return 0, nil
	}
	p1, _ := result.(string)
	a, err := epubLines(p1)
	if err != nil {
		return 0, epubFailure(ctx, err)
	}
	p2, _ := expected.(string)
	b, err := epubLines(p2)
	if err != nil {
		return 0, epubFailure(ctx, err)
	}
	sum := 0.0
	for i := 0; i < min(len(a), len(b)); i++ {
		r, err := metric.SequenceRatio(ctx, a[i], b[i])
		if err != nil {
			return 0, fmt.Errorf("compare_epub: %w", err)
		}
		sum += r
	}
	if len(a) > 0 {
		sum /= float64(len(a))
	}
	return sum, nil
}

// epubFailure is what an EPUB that does not unpack as compare_epub
// unpacks it comes to: Python raises, so no reward (noted); an archive
// over the caps, or a page in an encoding not decoded here, is not judged
// and fails the evaluation.
func epubFailure(ctx context.Context, err error) error {
	if errors.Is(err, errEncoding) {
		return err
	}
	return metric.Because(ctx, err)
}

// htmlInfo is libxml2's HTML 4 element table as its serializer reads it:
// whether an element is inline (no line breaks around it) and void.
var htmlInfo = func() map[string][2]bool {
	m := map[string][2]bool{}
	inline := "a abbr acronym applet b basefont bdo big br button cite code del dfn em embed font i iframe img input ins kbd label map object q s samp script select small span strike strong sub sup textarea tt u var"
	block := "address area base blockquote body caption center col colgroup dd dir div dl dt fieldset form frame frameset h1 h2 h3 h4 h5 h6 head hr html isindex legend li link menu meta noframes noscript ol optgroup option p param pre style table tbody td tfoot th thead title tr ul"
	void := map[string]bool{"area": true, "base": true, "basefont": true, "br": true, "col": true, "frame": true, "hr": true, "img": true, "input": true, "isindex": true, "link": true, "meta": true, "param": true}
	for _, n := range strings.Fields(inline) {
		m[n] = [2]bool{true, void[n]}
	}
	for _, n := range strings.Fields(block) {
		m[n] = [2]bool{false, void[n]}
	}
	return m
}()

var booleanAttrs = map[string]bool{"checked": true, "compact": true, "declare": true, "defer": true, "disabled": true,
	"ismap": true, "multiple": true, "nohref": true, "noresize": true, "noshade": true, "nowrap": true, "readonly": true, "selected": true}

// lxmlPretty is lxml.html.tostring(lxml.html.fromstring(text),
// pretty_print=True, encoding="unicode") for a document with a head: the
// html element as libxml2's HTML serializer formats it.
func lxmlPretty(text string) (string, error) {
	if strings.TrimLeft(text, " \t\n\r") == "" {
		return "", errEPUBRaises // lxml: "Document is empty"
	}
	page := text
	text, err := libxml2Decode(text)
	if err != nil {
		return "", err
	}
	doc, err := parseLibxml2(text)
	if err != nil {
		// A page over the token cap is not scored; any other failure
		// raises in lxml too.
		if oc := metric.OverCap(err); oc != nil {
			return "", oc
		}
		return "", errEPUBRaises
	}
	var root *html.Node
	for c := doc.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			root = c
			break
		}
	}
	if root == nil {
		return "", errEPUBRaises
	}
	el := root
	if !looksFullHTML.MatchString(page) {
		el = fromstringElement(root)
	}
	var b bytes.Buffer
	// lxml dumps a copy of the element, which has no next sibling (so no
	// line break after it), then its tail: the text nodes that follow it.
	next := el.NextSibling
	el.NextSibling = nil
	dumpHTML(&b, el, 0)
	el.NextSibling = next
	for t := next; t != nil && t.Type == html.TextNode; t = t.NextSibling {
		dumpHTML(&b, t, 0)
	}
	b.WriteString("\n")
	// lxml.html.tostring drops what matches this from libxml2's output
	// unless include_meta_content_type is set.
	return metaContentType.ReplaceAllString(b.String(), ""), nil
}

// metaContentType is lxml.html's pattern for the meta tags tostring
// leaves out: as libxml2 prints them, so case and attribute order count.
var metaContentType = regexp.MustCompile(`<meta http-equiv="Content-Type"[^>]*>`)

// looksFullHTML is lxml.html's _looks_like_full_html_bytes: fromstring
// returns the whole document for such a page.
var looksFullHTML = regexp.MustCompile(`^(?i)[ \t\n\r\f\v]*<(?:html|!doctype)`)

// blockTags is lxml.html.defs.block_tags.
var blockTags = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range strings.Fields("address blockquote center del div h1 h2 h3 h4 h5 h6 hr ins isindex noscript p pre " +
		"dir dl dt dd li menu ol ul table caption colgroup col thead tfoot tbody tr td th fieldset form legend optgroup option") {
		m[t] = true
	}
	return m
}()

// fromstringElement is the element lxml.html.fromstring returns for a
// document that does not start with <html or <!doctype (looksFullHTML):
// the root when it has a head; else the body's only element, or the body
// renamed div (when it holds a block element) or span.
func fromstringElement(root *html.Node) *html.Node {
	var head, body *html.Node
	var bodies []*html.Node
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "head" && head == nil {
			head = c
		}
		if c.Type == html.ElementNode && c.Data == "body" {
			bodies = append(bodies, c)
		}
	}
	if len(bodies) > 0 {
		// Several bodies are smashed into the first: their children
		// appended, their text after its last child, their attributes
		// dropped (drop_tree keeps a tail where it was).
		body = bodies[0]
		for _, other := range bodies[1:] {
			for c := other.FirstChild; c != nil; {
				next := c.NextSibling
				other.RemoveChild(c)
				if c.Type == html.TextNode && body.LastChild != nil && body.LastChild.Type == html.TextNode {
					body.LastChild.Data += c.Data
				} else {
					body.AppendChild(c)
				}
				c = next
			}
			root.RemoveChild(other)
		}
	}
	if head != nil || body == nil {
		return root
	}
	var elems []*html.Node
	for c := body.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode || c.Type == html.CommentNode || c.Type == html.RawNode {
			elems = append(elems, c)
		}
	}
	blankText := func(n *html.Node) bool {
		return n == nil || n.Type != html.TextNode || strings.TrimSpace(n.Data) == ""
	}
	if len(elems) == 1 && (body.FirstChild == elems[0] || blankText(body.FirstChild)) && blankText(elems[0].NextSibling) {
		return elems[0]
	}
	body.Data = "span"
	var walk func(n *html.Node, depth int) bool
	walk = func(n *html.Node, depth int) bool {
		if depth > maxHTMLDepth {
			return false
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (blockTags[c.Data] || walk(c, depth+1)) {
				return true
			}
		}
		return false
	}
	if walk(body, 0) {
		body.Data = "div"
	}
	return body
}

const maxHTMLDepth = 512

func isTextLike(n *html.Node) bool { return n != nil && n.Type == html.TextNode }

// dumpHTML is htmlNodeDumpFormatOutput with format on.
func dumpHTML(b *bytes.Buffer, n *html.Node, depth int) {
	if depth > maxHTMLDepth {
		return
	}
	switch n.Type {
	case html.TextNode:
		if p := n.Parent; p != nil && (p.Data == "script" || p.Data == "style") {
			b.WriteString(n.Data)
			return
		}
		b.WriteString(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\r", "&#13;").Replace(n.Data))
		return
	case html.CommentNode:
		b.WriteString("<!--" + n.Data + "-->")
		return
	case html.RawNode: // a processing instruction, as piText prints it
		b.WriteString(n.Data)
		return
	case html.ElementNode:
	default:
		return
	}
	info, known := htmlInfo[n.Data]
	isInline, isVoid := info[0], info[1]
	block := known && !isInline
	parentP := n.Parent == nil || n.Parent.Type != html.ElementNode || strings.HasPrefix(n.Parent.Data, "p")
	newlineAfter := func() {
		if block && n.NextSibling != nil && !isTextLike(n.NextSibling) && !parentP {
			b.WriteString("\n")
		}
	}
	b.WriteString("<" + n.Data)
	for _, a := range n.Attr {
		name := a.Key
		if a.Namespace != "" {
			name = a.Namespace + ":" + a.Key
		}
		b.WriteString(" " + name)
		if booleanAttrs[strings.ToLower(name)] {
			continue
		}
		b.WriteString("=" + attrValue(n.Data, name, a.Val))
	}
	if known && isVoid {
		b.WriteString(">")
		newlineAfter()
		return
	}
	if n.FirstChild == nil {
		// li is the one element whose end tag libxml2 leaves out when
		// it is empty (saveEndTag).
		if known && n.Data == "li" {
			b.WriteString(">")
		} else {
			b.WriteString("></" + n.Data + ">")
		}
		newlineAfter()
		return
	}
	b.WriteString(">")
	several := n.FirstChild != n.LastChild
	notP := !strings.HasPrefix(n.Data, "p")
	if block && !isTextLike(n.FirstChild) && several && notP {
		b.WriteString("\n")
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		dumpHTML(b, c, depth+1)
	}
	if block && !isTextLike(n.LastChild) && several && notP {
		b.WriteString("\n")
	}
	b.WriteString("</" + n.Data + ">")
	newlineAfter()
}

// attrValue quotes an attribute as libxml2 does: URI attributes are
// percent-escaped first (xmlURIEscapeStr); then &, < and > become
// entities.
func attrValue(elem, name, v string) string {
	lname := strings.ToLower(name)
	if lname == "href" || lname == "action" || lname == "src" || (lname == "name" && elem == "a") {
		v = strings.TrimLeft(v, " \t\n\r")
		var e strings.Builder
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
				strings.IndexByte("-_.!~*'()@/:=?;#%&,+<>", c) >= 0 {
				e.WriteByte(c)
				continue
			}
			fmt.Fprintf(&e, "%%%02X", c)
		}
		return quoted(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(e.String()))
	}
	return quoted(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(v))
}

// quoted is xmlBufWriteQuotedString: double quotes, or single quotes for
// a value with a double quote, or &quot; when it has both kinds.
func quoted(v string) string {
	if !strings.Contains(v, `"`) {
		return `"` + v + `"`
	}
	if !strings.Contains(v, "'") {
		return "'" + v + "'"
	}
	return `"` + strings.ReplaceAll(v, `"`, "&quot;") + `"`
}
