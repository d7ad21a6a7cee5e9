package metric

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// PyYAML's scanner skips only spaces between tokens and ends a plain
// scalar at a tab, so a tab anywhere but inside a quoted scalar, a comment
// or a block scalar's content ("a:\tb", "a: b\t", "\t- x") makes safe_load
// raise "found character '\t' that cannot start any token". yaml.v3, like
// libyaml, takes tabs as blanks in many of those places, and refuses one
// that starts a block scalar's first line, which PyYAML takes as text.
//
// So a document with tabs is parsed twice. In the first parse each tab is
// a character that is no blank to yaml.v3 (standInTabs): where PyYAML
// takes the tabs, that parse has the document's shape, and its nodes say
// where each quoted and block scalar lies, which with the comments around
// them are the places a tab may be. The values come from the second parse,
// of the text itself, where yaml.v3 folds and keeps tabs as PyYAML does;
// should yaml.v3 refuse a tab that opens a block scalar's text, that parse
// is of the text with each block scalar's indentation, as PyYAML worked it
// out, written into its header.

// tabbedYAML is what loadPyYAML parses of text, which holds a tab, given
// yaml.v3's own parse of it (doc, err).
func tabbedYAML(text string, doc *yaml.Node, err error) (*yaml.Node, error) {
	shape, perr := decodeOneYAML(standInTabs(text))
	if perr != nil {
		// A tab out of place broke the document's shape, or it is broken
		// anyway: PyYAML raises either way.
		return nil, fmt.Errorf("%w (with each tab taken as PyYAML's scanner takes it)", perr)
	}
	s := tabScan{text: text, lines: lineStarts(text), inside: make([]bool, len(text)), quoteEnds: map[int]bool{}}
	if shape != nil && !s.markScalars(shape) {
		// A scalar yaml.v3 placed where its quote or indicator is not: its
		// extent is unknown, so yaml.v3's reading stands.
		return doc, err
	}
	s.markComments()
	for i := range len(text) {
		if text[i] == '\t' && !s.inside[i] {
			line, col := s.position(i)
			return nil, fmt.Errorf("found character '\\t' that cannot start any token at line %d, column %d: %w", line, col, errPyYAML)
		}
	}
	if err == nil || len(s.blocks) == 0 {
		return doc, err
	}
	return decodeOneYAML(s.withIndents())
}

// standInTabs is text with each tab replaced by a private-use character
// text does not hold, or by a 't' after a backslash, since "\<tab>" is an
// escape in a double-quoted scalar. Either takes one column, as the tab
// did, so positions in the result are positions in text.
func standInTabs(text string) string {
	r := '\uE000'
	for strings.ContainsRune(text, r) && r < '\uF8FF' {
		r++
	}
	var b strings.Builder
	for i := range len(text) {
		switch {
		case text[i] != '\t':
			b.WriteByte(text[i])
		case i > 0 && text[i-1] == '\\':
			b.WriteByte('t')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// tabScan marks the bytes of text inside a quoted scalar (its quotes
// included), a block scalar's header and content, or a comment.
type tabScan struct {
	text string
	// lines holds the byte offset at which each line starts.
	lines  []int
	inside []bool
	// quoteEnds holds the offsets just past each quoted scalar: a '#' there
	// starts a comment, as it does after a blank.
	quoteEnds map[int]bool
	// blocks holds each block scalar whose header gives no indentation.
	blocks []blockIndent
	cursor struct{ line, col, off int }
}

// blockIndent is where a block scalar's indentation indicator would go
// (just past its '|' or '>'), and the indentation PyYAML found for it over
// the level around it.
type blockIndent struct{ at, digit int }

// withIndents is text with each block scalar's indentation written into
// its header, where it fits in a digit.
func (s *tabScan) withIndents() string {
	var b strings.Builder
	last := 0
	for _, bl := range slices.SortedFunc(slices.Values(s.blocks), func(a, b blockIndent) int { return a.at - b.at }) {
		if bl.digit < 1 || bl.digit > 9 {
			continue
		}
		b.WriteString(s.text[last:bl.at])
		b.WriteByte(byte('0' + bl.digit))
		last = bl.at
	}
	b.WriteString(s.text[last:])
	return b.String()
}

// lineStarts splits text at YAML's line breaks (CR LF, CR, LF, NEL, LS
// and PS), after a leading byte order mark, which neither parser counts.
func lineStarts(text string) []int {
	starts := []int{0}
	if strings.HasPrefix(text, "\uFEFF") {
		starts[0] = len("\uFEFF")
	}
	for i := starts[0]; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\r' && strings.HasPrefix(text[i:], "\r\n"):
			n = 2
			fallthrough
		case r == '\r' || r == '\n' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			starts = append(starts, i+n)
		}
		i += n
	}
	return starts
}

// offset is the byte offset of yaml.v3's 1-based line and column (counted
// in characters), or -1. It counts on from the last position asked for
// when that is earlier on the same line.
func (s *tabScan) offset(line, col int) int {
	if line < 1 || line > len(s.lines) || col < 1 {
		return -1
	}
	i, from := s.lines[line-1], 1
	if c := s.cursor; c.line == line && c.col <= col {
		i, from = c.off, c.col
	}
	for range col - from {
		if i >= len(s.text) {
			return -1
		}
		_, n := utf8.DecodeRuneInString(s.text[i:])
		i += n
	}
	s.cursor = struct{ line, col, off int }{line, col, i}
	return i
}

// position is the 1-based line and column of byte offset i.
func (s *tabScan) position(i int) (int, int) {
	line := 0
	for line+1 < len(s.lines) && s.lines[line+1] <= i {
		line++
	}
	return line + 1, utf8.RuneCountInString(s.text[s.lines[line]:i]) + 1
}

// lineEnd is the offset of the line break that ends the line holding i,
// or len(text).
func (s *tabScan) lineEnd(i int) int {
	for ; i < len(s.text); i++ {
		switch s.text[i] {
		case '\r', '\n':
			return i
		}
		if strings.HasPrefix(s.text[i:], "\u0085") || strings.HasPrefix(s.text[i:], "\u2028") || strings.HasPrefix(s.text[i:], "\u2029") {
			return i
		}
	}
	return i
}

func (s *tabScan) mark(from, to int) {
	for i := from; i < to && i < len(s.inside); i++ {
		s.inside[i] = true
	}
}

// markScalars marks every quoted and block scalar under doc, and says
// whether each was found where yaml.v3 placed it.
func (s *tabScan) markScalars(doc *yaml.Node) bool {
	type item struct {
		n *yaml.Node
		// indent is PyYAML's indentation level around the node: the
		// column of the block collection holding it, -1 at the top.
		indent int
	}
	stack := []item{{doc, -1}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := it.n
		switch n.Kind {
		case yaml.DocumentNode, yaml.MappingNode, yaml.SequenceNode:
			indent := it.indent
			if n.Kind != yaml.DocumentNode && n.Style&yaml.FlowStyle == 0 {
				indent = n.Column - 1
			}
			// Pushed last first, so that nodes come in the text's order,
			// which offset's cursor keeps linear.
			for _, c := range slices.Backward(n.Content) {
				stack = append(stack, item{c, indent})
			}
		case yaml.ScalarNode:
			var ok bool
			switch {
			case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
				ok = s.markQuoted(n)
			case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
				ok = s.markBlock(n, it.indent)
			default:
				ok = true
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// start is where n's scalar itself starts: past its anchor and tag, which
// yaml.v3's position includes. It is -1 when n's position is off the text.
func (s *tabScan) start(n *yaml.Node) int {
	i := s.offset(n.Line, n.Column)
	if i < 0 {
		return -1
	}
	for i < len(s.text) && (s.text[i] == '&' || s.text[i] == '!') {
		for i < len(s.text) && !strings.ContainsRune(" \t\r\n", rune(s.text[i])) {
			i++
		}
		for i < len(s.text) && strings.ContainsRune(" \t\r\n", rune(s.text[i])) {
			i++
		}
	}
	return i
}

// markQuoted marks a quoted scalar from its opening quote to its closing
// one: PyYAML takes tabs anywhere inside, its line breaks included.
func (s *tabScan) markQuoted(n *yaml.Node) bool {
	i := s.start(n)
	if i < 0 || i >= len(s.text) {
		return false
	}
	q := s.text[i]
	if q != '"' && q != '\'' || (q == '"') != (n.Style&yaml.DoubleQuotedStyle != 0) {
		return false
	}
	for j := i + 1; j < len(s.text); j++ {
		switch {
		case q == '"' && s.text[j] == '\\':
			j++
		case q == '\'' && strings.HasPrefix(s.text[j:], "''"):
			j++
		case s.text[j] == q:
			s.mark(i, j+1)
			s.quoteEnds[j+1] = true
			return true
		}
	}
	return false
}

// markBlock marks a block scalar's header comment and its content lines
// at and past its indentation, which PyYAML works out as
// scan_block_scalar does: the indicator's digit over the level around it,
// or else the deepest run of spaces before the first line with text.
func (s *tabScan) markBlock(n *yaml.Node, around int) bool {
	i := s.start(n)
	if i < 0 || i >= len(s.text) || (s.text[i] != '|' && s.text[i] != '>') {
		return false
	}
	end := s.lineEnd(i)
	header := s.text[i+1 : end]
	digit := 0
	// At most a chomping indicator and a digit, in either order.
	for k := 0; k < 2 && header != ""; k++ {
		c := header[0]
		if c >= '1' && c <= '9' {
			digit = int(c - '0')
		} else if c != '+' && c != '-' {
			break
		}
		header = header[1:]
	}
	if h := strings.TrimLeft(header, " "); strings.HasPrefix(h, "#") {
		s.mark(end-len(h), end)
	}
	minIndent := max(around+1, 1)
	first := s.nextLine(end)
	indent := minIndent + digit - 1
	if digit == 0 {
		deepest := 0
		for l := first; l < len(s.text); {
			spaces := countSpaces(s.text[l:])
			deepest = max(deepest, spaces)
			if e := s.lineEnd(l); e == l+spaces && e < len(s.text) {
				l = s.nextLine(e)
				continue
			}
			break
		}
		indent = max(minIndent, deepest)
		s.blocks = append(s.blocks, blockIndent{at: i + 1, digit: indent - max(around, 0)})
	}
	for l := first; l < len(s.text); {
		spaces := min(countSpaces(s.text[l:]), indent)
		e := s.lineEnd(l)
		switch {
		case l+spaces == e:
			if e == len(s.text) {
				return true
			}
			l = s.nextLine(e)
		case spaces == indent:
			s.mark(l+spaces, e)
			l = s.nextLine(e)
		default:
			return true
		}
	}
	return true
}

// nextLine is the start of the line after the break at e.
func (s *tabScan) nextLine(e int) int {
	if e >= len(s.text) {
		return e
	}
	if strings.HasPrefix(s.text[e:], "\r\n") {
		return e + 2
	}
	_, n := utf8.DecodeRuneInString(s.text[e:])
	return e + n
}

func countSpaces(s string) int {
	return len(s) - len(strings.TrimLeft(s, " "))
}

// markComments marks each comment outside the scalars already marked: a
// '#' where a token may start, that is at a line's start, after a blank,
// after a quoted scalar, or in a flow collection after one of its
// indicators.
func (s *tabScan) markComments() {
	flow := 0
	for i := 0; i < len(s.text); i++ {
		if s.inside[i] {
			continue
		}
		c := s.text[i]
		var prev byte
		lineStart := i == 0 || i == s.lines[0]
		if i > 0 {
			prev = s.text[i-1]
			lineStart = lineStart || prev == '\n' || prev == '\r' || strings.HasSuffix(s.text[:i], "\u0085") ||
				strings.HasSuffix(s.text[:i], "\u2028") || strings.HasSuffix(s.text[:i], "\u2029")
		}
		tokenStart := lineStart || prev == ' ' || prev == '\t' || s.quoteEnds[i]
		switch {
		case c == '#' && (tokenStart || flow > 0 && strings.IndexByte(",[]{}:", prev) >= 0):
			e := s.lineEnd(i)
			s.mark(i, e)
			i = e - 1
		case (c == '[' || c == '{') && (flow > 0 || tokenStart):
			flow++
		case (c == ']' || c == '}') && flow > 0:
			flow--
		}
	}
}
