package browser

import (
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// PyURL is Python's urllib.parse.ParseResult: the six parts of urlparse.
type PyURL struct {
	Scheme, Netloc, Path, Params, Query, Fragment string
}

// schemeChars are the characters urlsplit accepts in a scheme.
const schemeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-."

// usesParams are the schemes whose last path segment urlparse splits at ";".
var usesParams = map[string]bool{
	"": true, "ftp": true, "hdl": true, "prospero": true, "http": true, "imap": true,
	"https": true, "shttp": true, "rtsp": true, "rtsps": true, "rtspu": true, "sip": true,
	"sips": true, "mms": true, "sftp": true, "tel": true,
}

// usesNetloc are the schemes for which urlunsplit writes "//" even with an
// empty netloc.
var usesNetloc = map[string]bool{
	"": true, "ftp": true, "http": true, "gopher": true, "nntp": true, "telnet": true,
	"imap": true, "wais": true, "file": true, "mms": true, "https": true, "shttp": true,
	"snews": true, "prospero": true, "rtsp": true, "rtsps": true, "rtspu": true, "rsync": true,
	"svn": true, "svn+ssh": true, "sftp": true, "nfs": true, "git": true, "git+ssh": true,
	"ws": true, "wss": true, "itms-services": true,
}

// URLParse is Python's urllib.parse.urlparse: the metrics compare URLs by
// its parts, and Go's net/url rejects or re-escapes inputs Python keeps.
func URLParse(u string) PyURL {
	// urlsplit strips leading C0 controls and spaces, and drops tabs and
	// newlines anywhere.
	u = strings.TrimLeft(u, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	u = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(u)
	var p PyURL
	if i := strings.IndexByte(u, ':'); i > 0 && isASCIIAlpha(u[0]) {
		ok := true
		for _, c := range []byte(u[:i]) {
			if !strings.ContainsRune(schemeChars, rune(c)) {
				ok = false
				break
			}
		}
		if ok {
			p.Scheme, u = strings.ToLower(u[:i]), u[i+1:]
		}
	}
	if strings.HasPrefix(u, "//") {
		rest := u[2:]
		end := len(rest)
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			end = i
		}
		p.Netloc, u = rest[:end], rest[end:]
	}
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u, p.Fragment = u[:i], u[i+1:]
	}
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u, p.Query = u[:i], u[i+1:]
	}
	if usesParams[p.Scheme] && strings.Contains(u, ";") {
		var i int
		if j := strings.LastIndexByte(u, '/'); j >= 0 {
			i = strings.IndexByte(u[j:], ';')
			if i >= 0 {
				i += j
			}
		} else {
			i = strings.IndexByte(u, ';')
		}
		if i >= 0 {
			u, p.Params = u[:i], u[i+1:]
		}
	}
	p.Path = u
	return p
}

func isASCIIAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// String is Python's urlunparse.
func (p PyURL) String() string {
	u := p.Path
	if p.Params != "" {
		u += ";" + p.Params
	}
	switch {
	case p.Netloc != "":
		if u != "" && u[0] != '/' {
			u = "/" + u
		}
		u = "//" + p.Netloc + u
	case strings.HasPrefix(u, "//"):
		u = "//" + u
	case p.Scheme != "" && usesNetloc[p.Scheme] && (u == "" || u[0] == '/'):
		u = "//" + u
	}
	if p.Scheme != "" {
		u = p.Scheme + ":" + u
	}
	if p.Query != "" {
		u += "?" + p.Query
	}
	if p.Fragment != "" {
		u += "#" + p.Fragment
	}
	return u
}

var hasScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+\-.]*://`)

// CompareURLs is OSWorld's compare_urls (metrics/utils.py) with full=True:
// URLs are equal after lowercasing the scheme, reducing the host to
// tldextract's subdomain and registered name (the public suffix, the port,
// the user info and a lone "www" dropped) and treating a root path "/" as
// empty. A URL without a scheme is read as http.
func CompareURLs(a, b string) bool {
	return normalizeURL(a) == normalizeURL(b)
}

func normalizeURL(u string) string {
	if !hasScheme.MatchString(u) {
		u = "http://" + u
	}
	p := URLParse(u)
	sub, dom := extractHost(strings.ToLower(p.Netloc))
	if sub == "www" {
		sub = ""
	}
	p.Netloc = dom
	if sub != "" {
		p.Netloc = sub + "." + dom
	}
	if p.Path == "/" {
		p.Path = ""
	}
	return p.String()
}

var ipv4 = regexp.MustCompile(`^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$`)

// extractHost is tldextract's extract(netloc) without private suffixes
// (its default): the subdomain and the domain label.
func extractHost(netloc string) (sub, domain string) {
	// tldextract's lenient_netloc: no user info, no port, no root label.
	if i := strings.LastIndexByte(netloc, '@'); i >= 0 {
		netloc = netloc[i+1:]
	}
	if strings.HasPrefix(netloc, "[") {
		if i := strings.IndexByte(netloc, ']'); i >= 0 {
			return "", netloc[:i+1]
		}
	}
	if i := strings.IndexByte(netloc, ':'); i >= 0 {
		netloc = netloc[:i]
	}
	netloc = strings.TrimRight(strings.TrimSpace(netloc), ".\u3002\uff0e\uff61")
	if ipv4.MatchString(netloc) {
		return "", netloc
	}
	labels := strings.Split(netloc, ".")
	n := len(labels) - icannSuffixLabels(netloc)
	if n <= 0 {
		return "", ""
	}
	return strings.Join(labels[:n-1], "."), labels[n-1]
}

// icannSuffixLabels counts the labels of host's ICANN public suffix, 0 when
// the host's top label is in no list (tldextract then has no suffix). The
// publicsuffix package also answers with private suffixes (github.io) and
// with the last label for unlisted ones; tldextract by default ignores the
// private section, so a private answer is retried on its parent.
func icannSuffixLabels(host string) int {
	for host != "" {
		s, icann := publicsuffix.PublicSuffix(host)
		if icann {
			return strings.Count(s, ".") + 1
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return 0
		}
		host = s[i+1:]
	}
	return 0
}

// stripQuery is urlunparse(urlparse(u)._replace(query="")).
func stripQuery(u string) string {
	p := URLParse(u)
	p.Query = ""
	return p.String()
}
