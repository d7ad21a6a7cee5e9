package media

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// compare_epub hands lxml.html.fromstring each page as UTF-8 bytes, with
// no encoding named, and libxml2's HTML parser then picks one as it reads:
//
//   - a page that starts with "<?xm" is UTF-8 from the start;
//   - a <meta charset> or <meta http-equiv="Content-Type" content="...;
//     charset=..."> it parses names the encoding of the bytes after it,
//     the first such meta only;
//   - at the first byte past ASCII, when no meta has named one, it looks
//     ahead for "HTTP-EQUIV", then "CONTENT", then "CHARSET=" anywhere in
//     the text (a meta commented out, or plain text, counts), and without
//     one it reads ISO-8859-1.
//
// So a page of UTF-8 text without a declaration reads as Latin-1 ("é"
// becomes "Ã©"), which compare_epub then compares. libxml2Decode does the
// same to a page's text, for libxml2's UTF-8, ISO-8859-1 and
// windows-1252; a page whose non-ASCII text another encoding decides is
// not reproduced, and fails the evaluation (errEncoding).

// htmlEncoding is a decoder libxml2 may switch a page to.
type htmlEncoding int

const (
	htmlUndecided htmlEncoding = iota // ASCII so far, nothing named
	htmlUTF8
	htmlLatin1
	htmlCP1252
)

var errEncoding = errors.New("compare_epub: a page's encoding is one libxml2 decodes and this reader does not")

// encodingByName is what libxml2 (xmlParseCharEncoding, then iconv) makes
// of a name, for the encodings decoded here; ok is false for any other
// name, which libxml2 may know through iconv. inMeta: libxml2 refuses
// UTF-16 and UCS-4 named in a meta and goes on in UTF-8.
func encodingByName(name string, inMeta bool) (htmlEncoding, bool) {
	switch strings.ToUpper(name) {
	case "UTF-8", "UTF8":
		return htmlUTF8, true
	case "UTF-16", "UTF16", "ISO-10646-UCS-2", "UCS-2", "UCS2", "ISO-10646-UCS-4", "UCS-4", "UCS4":
		return htmlUTF8, inMeta
	case "ISO-8859-1", "ISO-LATIN-1", "ISO LATIN 1", "ISO8859-1", "ISO_8859-1", "ISO_8859-1:1987", "LATIN1", "L1", "CP819", "IBM819", "CSISOLATIN1", "ISO-IR-100":
		return htmlLatin1, true
	case "WINDOWS-1252", "CP1252", "MS-ANSI":
		return htmlCP1252, true
	}
	return htmlUndecided, false
}

// cp1252High is windows-1252 from 0x80 to 0x9F; 0 where it has no
// character (iconv fails there).
var cp1252High = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}

// decodeAs decodes s (a page's bytes) in enc; stop is true at a byte enc
// has no character for, where libxml2's conversion fails and the rest of
// the page is lost.
func decodeAs(s string, enc htmlEncoding) (text string, stop bool) {
	switch enc {
	case htmlLatin1, htmlCP1252:
	default:
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x80 || c >= 0xA0 || enc == htmlLatin1:
			b.WriteRune(rune(c))
		case cp1252High[c-0x80] != 0:
			b.WriteRune(cp1252High[c-0x80])
		default:
			return b.String(), true
		}
	}
	return b.String(), false
}

// charsetAhead is htmlFindEncoding: the name after "CHARSET=" that
// follows "CONTENT" that follows "HTTP-EQUIV" in s, any case; "" when
// there is none.
func charsetAhead(s string) string {
	up := asciiUpper(s)
	i := strings.Index(up, "HTTP-EQUIV")
	if i < 0 {
		return ""
	}
	j := strings.Index(up[i:], "CONTENT")
	if j < 0 {
		return ""
	}
	k := strings.Index(up[i+j:], "CHARSET=")
	if k < 0 {
		return ""
	}
	rest := s[i+j+k+len("CHARSET="):]
	n := 0
	for n < len(rest) {
		c := rest[n]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '/' {
			n++
			continue
		}
		break
	}
	return rest[:n]
}

// asciiUpper upper-cases ASCII letters byte for byte, so that indexes
// into it are indexes into s.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// metaCharset is htmlCheckMeta: the encoding a meta's attributes name
// (charset, or content after an http-equiv of Content-Type), and whether
// they name one.
func metaCharset(attrs []html.Attribute) (string, bool) {
	http, content, hasContent := false, "", false
	for _, a := range attrs {
		switch strings.ToLower(a.Key) {
		case "http-equiv":
			if strings.EqualFold(a.Val, "Content-Type") {
				http = true
			}
		case "charset":
			return strings.TrimLeft(a.Val, " \t"), true
		case "content":
			content, hasContent = a.Val, true
		}
	}
	if !http || !hasContent {
		return "", false
	}
	// htmlCheckEncoding: after "charset", an "=" right away, or, past a
	// blank, from the value's first "=".
	i := strings.Index(asciiUpper(content), "CHARSET")
	if i < 0 {
		return "", false
	}
	rest := content[i+len("charset"):]
	if rest != "" && (rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r') {
		eq := strings.IndexByte(content, '=')
		if eq < 0 {
			return "", false
		}
		rest = content[eq:]
	}
	if !strings.HasPrefix(rest, "=") {
		return "", false
	}
	return strings.TrimLeft(rest[1:], " \t"), true
}

// libxml2Decode is the text libxml2's HTML parser reads from page, a
// page's UTF-8 bytes: see the top of this file.
func libxml2Decode(page string) (string, error) {
	if strings.IndexFunc(page, func(r rune) bool { return r >= 0x80 }) < 0 {
		return page, nil // ASCII reads the same in every encoding here
	}
	enc := htmlUndecided
	if strings.HasPrefix(page, "<?xm") {
		enc = htmlUTF8
	}
	named := false // libxml2's input->encoding is set: no meta switches again
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(page))
	off := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if !errors.Is(z.Err(), io.EOF) {
				return "", z.Err()
			}
			break
		}
		raw := string(z.Raw())
		if enc == htmlUndecided {
			if k := strings.IndexFunc(raw, func(r rune) bool { return r >= 0x80 }); k >= 0 {
				enc = htmlLatin1
				if !named {
					if name := charsetAhead(page[off+k:]); name != "" {
						e, ok := encodingByName(name, false)
						if !ok {
							return "", fmt.Errorf("the page names charset %q: %w", name, errEncoding)
						}
						enc = e
					}
				}
				named = true
			}
		}
		text, stop := decodeAs(raw, enc)
		b.WriteString(text)
		if stop {
			return b.String(), nil
		}
		off += len(raw)
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if tok.Data != "script" && tok.Data != "style" {
			z.NextIsNotRawText() // as parseLibxml2 reads the page
		}
		if tok.Data != "meta" || named {
			continue
		}
		if name, ok := metaCharset(tok.Attr); ok {
			named = true
			e, known := encodingByName(name, true)
			if !known && strings.IndexFunc(page[off:], func(r rune) bool { return r >= 0x80 }) >= 0 {
				// libxml2 switches to it if iconv knows the name.
				return "", fmt.Errorf("a meta names charset %q: %w", name, errEncoding)
			}
			if known {
				enc = e
			}
		}
	}
	// What no token covers (a tag cut off by the end of the page) goes
	// on in the encoding reached, for the parser to read as it would.
	text, _ := decodeAs(page[off:], enc)
	b.WriteString(text)
	return b.String(), nil
}
