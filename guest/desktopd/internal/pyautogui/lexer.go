// Package pyautogui interprets the small part of Python that agents emit to
// drive pyautogui (OSWorld's action space): import statements, assignments
// of literals, and calls of pyautogui, time.sleep and pyperclip.copy with
// literal arguments. A program is parsed and checked completely before any
// of it runs; code outside the subset is reported as Unsupported so the
// caller can hand it to a real Python instead.
package pyautogui

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SyntaxError is code that no Python accepts (unterminated string,
// unbalanced brackets, stray characters, a call missing a comma...).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("SyntaxError: %s (line %d, column %d)", e.Msg, e.Line, e.Col)
}

// Unsupported is valid-looking code outside the interpreted subset.
type Unsupported struct {
	Line, Col int
	What      string
}

func (e *Unsupported) Error() string {
	return fmt.Sprintf("not in the interpreted pyautogui subset: %s (line %d, column %d)", e.What, e.Line, e.Col)
}

// IsUnsupported reports whether err means "valid Python we do not
// interpret", as opposed to an error in the code itself.
func IsUnsupported(err error) bool {
	var u *Unsupported
	return errors.As(err, &u)
}

type tokKind int

const (
	tEOF tokKind = iota
	tNewline
	tName
	tNumber
	tString
	tOp
)

type token struct {
	kind      tokKind
	text      string // names, operators; the decoded value for strings
	num       any    // int64, *big.Int or float64 for numbers
	line, col int
}

// maxNesting is Python's own limit on nested brackets; it also bounds the
// parser's recursion.
const maxNesting = 200

// MaxCode bounds the source size the interpreter accepts.
const MaxCode = 1 << 20

// operators, longest first for maximal munch.
var operators = []string{
	"**=", "//=", ">>=", "<<=", "...",
	"->", ":=", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=",
	"+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">",
	"(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "=",
}

var closing = map[string]string{"(": ")", "[": "]", "{": "}"}

type lexer struct {
	src       string
	i         int
	line, col int
	depth     int // bracket nesting; newlines inside brackets are not statement ends
	brackets  []token
	atLineBeg bool
	toks      []token
}

func tokenize(src string) ([]token, error) {
	if len(src) > MaxCode {
		return nil, &Unsupported{Line: 1, Col: 1, What: fmt.Sprintf("code longer than %d bytes", MaxCode)}
	}
	if !utf8.ValidString(src) {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: "source is not valid UTF-8"}
	}
	l := &lexer{src: src, line: 1, col: 1, atLineBeg: true}
	if err := l.run(); err != nil {
		return nil, err
	}
	return l.toks, nil
}

func (l *lexer) peek(off int) byte {
	if l.i+off < len(l.src) {
		return l.src[l.i+off]
	}
	return 0
}

func (l *lexer) advance(n int) {
	for k := 0; k < n && l.i < len(l.src); k++ {
		if l.src[l.i] == '\n' {
			l.line++
			l.col = 1
		} else if l.src[l.i]&0xc0 != 0x80 {
			l.col++
		}
		l.i++
	}
}

func (l *lexer) emit(t token) {
	l.toks = append(l.toks, t)
	l.atLineBeg = false
}

func (l *lexer) newline() {
	if n := len(l.toks); n > 0 && l.toks[n-1].kind != tNewline {
		l.toks = append(l.toks, token{kind: tNewline, line: l.line, col: l.col})
	}
	l.atLineBeg = true
}

func (l *lexer) run() error {
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == '\n':
			if l.depth == 0 {
				l.newline()
			}
			l.advance(1)
		case c == ' ' || c == '\t' || c == '\f' || c == '\r':
			for l.i < len(l.src) && strings.IndexByte(" \t\f\r", l.src[l.i]) >= 0 {
				l.advance(1)
			}
			// Leading whitespace on a line with a statement is indentation,
			// which only compound statements (not interpreted) may use.
			if l.atLineBeg && l.depth == 0 && l.i < len(l.src) && l.src[l.i] != '\n' && l.src[l.i] != '#' && l.src[l.i] != '\\' {
				if n := len(l.toks); n >= 2 && l.toks[n-2].kind == tOp && l.toks[n-2].text == ":" {
					return &Unsupported{Line: l.line, Col: l.col, What: "indented block"}
				}
				return &SyntaxError{Line: l.line, Col: l.col, Msg: "unexpected indent"}
			}
		case c == '#':
			for l.i < len(l.src) && l.src[l.i] != '\n' {
				l.advance(1)
			}
		case c == '\\':
			if l.peek(1) == '\n' {
				l.advance(2)
			} else if l.peek(1) == '\r' && l.peek(2) == '\n' {
				l.advance(3)
			} else {
				return &SyntaxError{Line: l.line, Col: l.col, Msg: "unexpected character after line continuation character"}
			}
		case c >= '0' && c <= '9' || c == '.' && l.peek(1) >= '0' && l.peek(1) <= '9':
			if err := l.number(); err != nil {
				return err
			}
		case c == '"' || c == '\'':
			if err := l.str("", l.line, l.col); err != nil {
				return err
			}
		default:
			r, _ := utf8.DecodeRuneInString(l.src[l.i:])
			if r == '_' || unicode.IsLetter(r) {
				start, line, col := l.i, l.line, l.col
				for l.i < len(l.src) {
					r, size := utf8.DecodeRuneInString(l.src[l.i:])
					if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
						break
					}
					l.advance(size)
				}
				name := l.src[start:l.i]
				// A string prefix: r"..", b'..', f"..", rb"..." and so on.
				if l.i < len(l.src) && (l.src[l.i] == '"' || l.src[l.i] == '\'') && len(name) <= 2 &&
					strings.Trim(strings.ToLower(name), "rbuf") == "" {
					if err := l.str(strings.ToLower(name), line, col); err != nil {
						return err
					}
					continue
				}
				l.emit(token{kind: tName, text: name, line: line, col: col})
				continue
			}
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(l.src[l.i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return &SyntaxError{Line: l.line, Col: l.col, Msg: fmt.Sprintf("invalid character %q (U+%04X)", r, r)}
			}
			t := token{kind: tOp, text: op, line: l.line, col: l.col}
			switch op {
			case "(", "[", "{":
				if l.depth >= maxNesting {
					return &SyntaxError{Line: l.line, Col: l.col, Msg: "too many nested parentheses"}
				}
				l.depth++
				l.brackets = append(l.brackets, t)
			case ")", "]", "}":
				if l.depth == 0 {
					return &SyntaxError{Line: l.line, Col: l.col, Msg: fmt.Sprintf("unmatched '%s'", op)}
				}
				open := l.brackets[len(l.brackets)-1]
				if want := closing[open.text]; want != op {
					return &SyntaxError{Line: l.line, Col: l.col, Msg: fmt.Sprintf("closing parenthesis '%s' does not match opening parenthesis '%s' on line %d", op, open.text, open.line)}
				}
				l.depth--
				l.brackets = l.brackets[:len(l.brackets)-1]
			}
			l.advance(len(op))
			l.emit(t)
		}
	}
	if l.depth > 0 {
		open := l.brackets[len(l.brackets)-1]
		return &SyntaxError{Line: open.line, Col: open.col, Msg: fmt.Sprintf("'%s' was never closed", open.text)}
	}
	l.newline()
	l.toks = append(l.toks, token{kind: tEOF, line: l.line, col: l.col})
	return nil
}

func isDigitIn(c byte, base int) bool {
	switch base {
	case 2:
		return c == '0' || c == '1'
	case 8:
		return c >= '0' && c <= '7'
	case 16:
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	return c >= '0' && c <= '9'
}

func (l *lexer) number() error {
	start, line, col := l.i, l.line, l.col
	bad := func(msg string) error { return &SyntaxError{Line: line, Col: col, Msg: msg} }
	digits := func(base int) {
		for l.i < len(l.src) && (isDigitIn(l.src[l.i], base) || l.src[l.i] == '_' && isDigitIn(l.peek(1), base)) {
			l.advance(1)
		}
	}
	base := 10
	isFloat := false
	if l.src[l.i] == '0' && strings.IndexByte("xXoObB", l.peek(1)) >= 0 {
		base = map[byte]int{'x': 16, 'o': 8, 'b': 2}[l.src[l.i+1]|0x20]
		l.advance(2)
		if !isDigitIn(l.peek(0), base) && l.peek(0) != '_' {
			return bad("invalid number literal")
		}
		if l.peek(0) == '_' {
			l.advance(1)
		}
		digits(base)
	} else {
		digits(10)
		if l.peek(0) == '.' {
			isFloat = true
			l.advance(1)
			digits(10)
		}
		if l.peek(0) == 'e' || l.peek(0) == 'E' {
			isFloat = true
			l.advance(1)
			if l.peek(0) == '+' || l.peek(0) == '-' {
				l.advance(1)
			}
			if !isDigitIn(l.peek(0), 10) {
				return bad("invalid decimal literal")
			}
			digits(10)
		}
	}
	text := l.src[start:l.i]
	if c := l.peek(0); c == 'j' || c == 'J' {
		return &Unsupported{Line: line, Col: col, What: "complex number"}
	}
	if r, _ := utf8.DecodeRuneInString(l.src[l.i:]); l.i < len(l.src) && (r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return bad("invalid decimal literal")
	}
	clean := strings.ReplaceAll(text, "_", "")
	t := token{kind: tNumber, text: text, line: line, col: col}
	if isFloat {
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil {
			return bad("invalid float literal")
		}
		t.num = f
	} else {
		if base == 10 && len(clean) > 1 && clean[0] == '0' && strings.Trim(clean, "0") != "" {
			return bad("leading zeros in decimal integer literals are not permitted")
		}
		digitsOnly := clean
		if base != 10 {
			digitsOnly = clean[2:]
		}
		n, ok := new(big.Int).SetString(digitsOnly, base)
		if !ok {
			return bad("invalid integer literal")
		}
		if n.IsInt64() {
			t.num = n.Int64()
		} else {
			t.num = n
		}
	}
	l.emit(t)
	return nil
}

// str lexes a string literal starting at the quote; prefix is the
// lower-cased prefix already consumed and line, col where it began.
func (l *lexer) str(prefix string, line, col int) error {
	q := l.src[l.i]
	triple := strings.HasPrefix(l.src[l.i:], strings.Repeat(string(q), 3))
	delim := string(q)
	if triple {
		delim = strings.Repeat(string(q), 3)
	}
	l.advance(len(delim))
	raw := strings.Contains(prefix, "r")
	var b strings.Builder
	for {
		if l.i >= len(l.src) {
			if triple {
				return &SyntaxError{Line: line, Col: col, Msg: "unterminated triple-quoted string literal"}
			}
			return &SyntaxError{Line: line, Col: col, Msg: "unterminated string literal"}
		}
		if strings.HasPrefix(l.src[l.i:], delim) {
			l.advance(len(delim))
			break
		}
		c := l.src[l.i]
		if c == '\n' && !triple {
			return &SyntaxError{Line: line, Col: col, Msg: "unterminated string literal"}
		}
		if c != '\\' {
			r, size := utf8.DecodeRuneInString(l.src[l.i:])
			b.WriteRune(r)
			l.advance(size)
			continue
		}
		if l.i+1 >= len(l.src) {
			return &SyntaxError{Line: line, Col: col, Msg: "unterminated string literal"}
		}
		if raw {
			// In raw strings a backslash keeps the next character too,
			// and so stops it from closing the string.
			b.WriteByte('\\')
			r, size := utf8.DecodeRuneInString(l.src[l.i+1:])
			b.WriteRune(r)
			l.advance(1 + size)
			continue
		}
		if err := l.escape(&b); err != nil {
			return err
		}
	}
	if strings.Contains(prefix, "b") {
		return &Unsupported{Line: line, Col: col, What: "bytes literal"}
	}
	if strings.Contains(prefix, "f") && strings.ContainsAny(b.String(), "{}") {
		return &Unsupported{Line: line, Col: col, What: "f-string with replacement fields"}
	}
	l.emit(token{kind: tString, text: b.String(), line: line, col: col})
	return nil
}

func (l *lexer) escape(b *strings.Builder) error {
	line, col := l.line, l.col
	c := l.src[l.i+1]
	simple := map[byte]string{'\n': "", '\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b",
		'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v"}
	if s, ok := simple[c]; ok {
		b.WriteString(s)
		l.advance(2)
		return nil
	}
	hex := func(n int) error {
		if l.i+2+n > len(l.src) {
			return &SyntaxError{Line: line, Col: col, Msg: "truncated escape sequence"}
		}
		v, err := strconv.ParseUint(l.src[l.i+2:l.i+2+n], 16, 32)
		if err != nil {
			return &SyntaxError{Line: line, Col: col, Msg: "truncated escape sequence"}
		}
		if v > unicode.MaxRune {
			return &SyntaxError{Line: line, Col: col, Msg: "illegal Unicode character"}
		}
		b.WriteRune(rune(v))
		l.advance(2 + n)
		return nil
	}
	switch {
	case c == 'x':
		return hex(2)
	case c == 'u':
		return hex(4)
	case c == 'U':
		return hex(8)
	case c >= '0' && c <= '7':
		n := 1
		for n < 3 && l.i+1+n < len(l.src) && l.src[l.i+1+n] >= '0' && l.src[l.i+1+n] <= '7' {
			n++
		}
		v, _ := strconv.ParseUint(l.src[l.i+1:l.i+1+n], 8, 32)
		b.WriteRune(rune(v))
		l.advance(1 + n)
		return nil
	case c == 'N':
		return &Unsupported{Line: line, Col: col, What: `\N{...} escape`}
	}
	// Unknown escapes keep the backslash, as Python does (with a warning).
	b.WriteByte('\\')
	l.advance(1)
	return nil
}
