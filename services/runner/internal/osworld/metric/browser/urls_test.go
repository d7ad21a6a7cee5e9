package browser

import "testing"

// TestURLParseLikePython checks urlParse and urlunparse against outputs
// recorded from CPython 3 (urllib.parse.urlparse, urlunparse, and
// urlunparse after _replace(query="")).
func TestURLParseLikePython(t *testing.T) {
	tests := []struct {
		in       string
		parts    [6]string
		unparsed string
		noQuery  string
	}{
		{"http://a.com/x;p?q#f", [6]string{"http", "a.com", "/x", "p", "q", "f"}, "http://a.com/x;p?q#f", "http://a.com/x;p#f"},
		{"file:///home/user/a.html", [6]string{"file", "", "/home/user/a.html", "", "", ""}, "file:///home/user/a.html", "file:///home/user/a.html"},
		{"about:blank", [6]string{"about", "", "blank", "", "", ""}, "about:blank", "about:blank"},
		{"http://www.google.com/", [6]string{"http", "www.google.com", "/", "", "", ""}, "http://www.google.com/", "http://www.google.com/"},
		{"chrome://settings/", [6]string{"chrome", "settings", "/", "", "", ""}, "chrome://settings/", "chrome://settings/"},
		{"x;y/z;w", [6]string{"", "", "x;y/z", "w", "", ""}, "x;y/z;w", "x;y/z;w"},
		{"https://a.com/b/c;d?x=1", [6]string{"https", "a.com", "/b/c", "d", "x=1", ""}, "https://a.com/b/c;d?x=1", "https://a.com/b/c;d"},
		{" \thttps://A.com/p?x", [6]string{"https", "A.com", "/p", "", "x", ""}, "https://A.com/p?x", "https://A.com/p"},
		{"HTTP://www.Example.com:8080/a/", [6]string{"http", "www.Example.com:8080", "/a/", "", "", ""}, "http://www.Example.com:8080/a/", "http://www.Example.com:8080/a/"},
		{"mailto:a@b.c", [6]string{"mailto", "", "a@b.c", "", "", ""}, "mailto:a@b.c", "mailto:a@b.c"},
		{"//host/p", [6]string{"", "host", "/p", "", "", ""}, "//host/p", "//host/p"},
		{"http:/x", [6]string{"http", "", "/x", "", "", ""}, "http:///x", "http:///x"},
		{"a.com/b?c#d", [6]string{"", "", "a.com/b", "", "c", "d"}, "a.com/b?c#d", "a.com/b#d"},
		{"data:text/html,<p>;x", [6]string{"data", "", "text/html,<p>;x", "", "", ""}, "data:text/html,<p>;x", "data:text/html,<p>;x"},
	}
	for _, tt := range tests {
		p := URLParse(tt.in)
		got := [6]string{p.Scheme, p.Netloc, p.Path, p.Params, p.Query, p.Fragment}
		if got != tt.parts {
			t.Errorf("urlParse(%q) = %q, want %q", tt.in, got, tt.parts)
		}
		if s := p.String(); s != tt.unparsed {
			t.Errorf("urlunparse(urlparse(%q)) = %q, want %q", tt.in, s, tt.unparsed)
		}
		if s := stripQuery(tt.in); s != tt.noQuery {
			t.Errorf("stripQuery(%q) = %q, want %q", tt.in, s, tt.noQuery)
		}
	}
}

func TestCompareURLs(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://www.google.com/", "https://google.com", true},
		{"https://www.airbnb.com/s", "https://airbnb.com.sg/s", true},
		{"https://www.airbnb.com/s", "http://airbnb.com/s", false},
		{"HTTPS://WWW.Example.COM/Path", "https://example.com/Path", true},
		{"https://example.com/Path", "https://example.com/path", false},
		{"https://example.com/a?x=1", "https://example.com/a?x=2", false},
		{"https://example.com/a#f", "https://example.com/a", false},
		{"google.com", "http://www.google.com/", true},
		{".amazon.com", "amazon.com", true},
		{".amazon.com", "www.amazon.com", true},
		{".amazon.com", "smile.amazon.com", false},
		{"https://foo.blogspot.com/", "https://foo.blogspot.co.uk/", true},
		{"https://foo.github.io/", "https://bar.github.io/", false},
		{"https://foo.blogspot.com/", "https://foo.blogspot.net/", true},
		{"http://127.0.0.1:8000/a", "http://127.0.0.1:9000/a", true},
		{"http://localhost:1/", "http://localhost", true},
		{"http://user:pw@example.com/", "http://example.com", true},
		{"https://news.bbc.co.uk/x", "https://news.bbc.com/x", true},
		{"https://www.drugs.com/npc/", "https://www.drugs.com/npc", false},
		{"file:///home/user/a.html", "file:///home/user/a.html", true},
	}
	for _, tt := range tests {
		if got := CompareURLs(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareURLs(%q, %q) = %v, want %v (%q vs %q)", tt.a, tt.b, got, tt.want, normalizeURL(tt.a), normalizeURL(tt.b))
		}
	}
}
