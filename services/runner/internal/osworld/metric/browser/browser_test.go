package browser

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("test JSON %s: %v", s, err)
	}
	return v
}

type metricCase struct {
	name     string
	fn       string
	result   any
	rules    string
	opts     map[string]any
	want     float64
	wantErr  bool
	expected any // overrides rules when set
}

func runCases(t *testing.T, cases []metricCase) {
	t.Helper()
	table := Metrics()
	for _, c := range cases {
		t.Run(c.fn+"/"+c.name, func(t *testing.T) {
			spec, ok := table[c.fn]
			if !ok {
				t.Fatalf("metric %s not registered", c.fn)
			}
			exp := c.expected
			if exp == nil && c.rules != "" {
				exp = decode(t, c.rules)
			}
			got, err := spec.Fn(context.Background(), c.result, exp, exp != nil, c.opts)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if got != c.want {
				t.Errorf("score = %v, want %v", got, c.want)
			}
		})
	}
}

func TestURLMetrics(t *testing.T) {
	tab := func(u string) any { return map[string]any{"title": "t", "url": u, "content": "<html></html>"} }
	runCases(t, []metricCase{
		{name: "all patterns", fn: "is_expected_url_pattern_match", result: "https://www.drugs.com/npc/?search=x",
			rules: `{"expected": ["drugs\\.com", "(?<=npc/)\\?search"]}`, want: 1},
		{name: "one pattern fails", fn: "is_expected_url_pattern_match", result: tab("https://a.com/b"),
			rules: `{"expected": ["a\\.com", "^/b"]}`, want: 0},
		{name: "dict result", fn: "is_expected_url_pattern_match", result: tab("https://a.com/b?q=1"),
			rules: `{"expected": ["q=\\d"]}`, want: 1},
		{name: "none result", fn: "is_expected_url_pattern_match", result: nil, rules: `{"expected": ["a"]}`, want: 0},
		{name: "empty url", fn: "is_expected_url_pattern_match", result: "", rules: `{"expected": ["a"]}`, want: 0},
		{name: "bad pattern", fn: "is_expected_url_pattern_match", result: "x", rules: `{"expected": ["("]}`, wantErr: true},

		{name: "www and slash", fn: "is_expected_active_tab", result: tab("https://www.example.com/"),
			rules: `{"type": "url", "url": "https://example.com"}`, want: 1},
		{name: "string result", fn: "is_expected_active_tab", result: "https://example.com/a",
			rules: `{"type": "url", "url": "https://example.com/b"}`, want: 0},
		{name: "unknown type", fn: "is_expected_active_tab", result: "https://example.com/a",
			rules: `{"type": "title", "url": "https://example.com/a"}`, want: 0},
		{name: "none", fn: "is_expected_active_tab", result: nil, rules: `{"type": "url", "url": "x"}`, want: 0},

		{name: "query ignored", fn: "is_expected_active_tab_approximate", result: tab("https://example.com/a?x=1"),
			rules: `{"type": "url", "url": "https://example.com/a?y=2"}`, want: 1},
		{name: "www not ignored", fn: "is_expected_active_tab_approximate", result: tab("https://www.example.com/a"),
			rules: `{"type": "url", "url": "https://example.com/a"}`, want: 0},

		{name: "same set", fn: "is_expected_tabs",
			result: decode(t, `[{"url": "https://www.a.com/"}, {"url": "https://b.org/x"}]`),
			rules:  `{"type": "url", "urls": ["https://b.org/x", "https://a.com"]}`, want: 1},
		{name: "different length", fn: "is_expected_tabs",
			result: decode(t, `[{"url": "https://a.com/"}]`),
			rules:  `{"type": "url", "urls": ["https://a.com", "https://a.com"]}`, want: 0},
		{name: "duplicates match one tab", fn: "is_expected_tabs",
			result: decode(t, `[{"url": "https://a.com/"}, {"url": "https://c.com/"}]`),
			rules:  `{"type": "url", "urls": ["https://a.com", "https://a.com"]}`, want: 1},
		{name: "empty tabs", fn: "is_expected_tabs", result: []any{}, rules: `{"type": "url", "urls": []}`, want: 0},

		{name: "pattern", fn: "is_expected_search_query", result: tab("https://www.google.com/search?q=cheap+flights"),
			rules: `{"expect": {"pattern": "q=cheap\\+flights"}}`, want: 1},
		{name: "no match", fn: "is_expected_search_query", result: tab("https://www.google.com/search?q=x"),
			rules: `{"expect": {"pattern": "q=y"}}`, want: 0},
	})
}

const bookmarksRoots = `{
  "bookmark_bar": {"type": "folder", "name": "Bookmarks bar", "children": [
    {"type": "folder", "name": "Favorites", "children": []},
    {"type": "folder", "name": "Liked Authors", "children": [
      {"type": "url", "name": "A", "url": "https://a.example/"},
      {"type": "url", "name": "B", "url": "https://b.example/2"}
    ]},
    {"type": "url", "name": "News", "url": "https://news.example/"}
  ]},
  "other": {"type": "folder", "name": "Other bookmarks", "children": []}
}`

func TestBookmarks(t *testing.T) {
	roots := decode(t, bookmarksRoots)
	runCases(t, []metricCase{
		{name: "folders", fn: "is_expected_bookmarks", result: roots,
			rules: `{"type": "bookmark_bar_folders_names", "names": ["Liked Authors", "Favorites"]}`, want: 1},
		{name: "folders missing one", fn: "is_expected_bookmarks", result: roots,
			rules: `{"type": "bookmark_bar_folders_names", "names": ["Favorites"]}`, want: 0},
		{name: "urls", fn: "is_expected_bookmarks", result: roots,
			rules: `{"type": "bookmark_bar_websites_urls", "urls": ["https://news.example/"]}`, want: 1},
		{name: "liked authors alternatives", fn: "is_expected_bookmarks", result: roots,
			rules: `{"type": "liked_authors_websites_urls", "urls": [["https://a.example", "https://a.example/"], "https://b.example/2"]}`, want: 1},
		{name: "liked authors wrong", fn: "is_expected_bookmarks", result: roots,
			rules: `{"type": "liked_authors_websites_urls", "urls": ["https://a.example/"]}`, want: 0},
		{name: "no bookmarks file", fn: "is_expected_bookmarks", result: []any{},
			rules: `{"type": "bookmark_bar_folders_names", "names": []}`, want: 0},
		{name: "unknown type", fn: "is_expected_bookmarks", result: roots, rules: `{"type": "x"}`, wantErr: true},
	})
}

func TestProfileMetrics(t *testing.T) {
	cookies := []any{
		[]any{int64(13300000000000000), ".google.com", "", "NID", "v"},
		[]any{int64(13300000000000001), "www.example.org", "", "a", "b"},
	}
	history := []any{
		[]any{"https://www.youtube.com/watch?v=1", "YouTube", int64(1)},
		[]any{"https://example.org/", "Example", int64(2)},
	}
	runCases(t, []metricCase{
		{name: "deleted", fn: "is_cookie_deleted", result: cookies, rules: `{"type": "domains", "domains": [".amazon.com"]}`, want: 1},
		{name: "still there", fn: "is_cookie_deleted", result: cookies, rules: `{"type": "domains", "domains": ["example.org"]}`, want: 0},
		{name: "dotted host", fn: "is_cookie_deleted", result: cookies, rules: `{"type": "domains", "domains": [".google.com"]}`, want: 0},
		{name: "no cookies", fn: "is_cookie_deleted", result: []any{}, rules: `{"type": "domains", "domains": [".google.com"]}`, want: 1},
		{name: "bad type", fn: "is_cookie_deleted", result: cookies, rules: `{"type": "names"}`, wantErr: true},

		{name: "kept", fn: "check_history_deleted", result: history, rules: `{"type": "keywords", "keywords": ["youtube"]}`, want: 0},
		{name: "deleted", fn: "check_history_deleted", result: history[1:], rules: `{"type": "keywords", "keywords": ["youtube"]}`, want: 1},

		{name: "subset", fn: "is_expected_installed_extensions", result: []any{"Zoom Chrome Extension", "Momentum", "Other"},
			rules: `{"expected": ["Zoom for Google Chrome", "Momentum"]}`, want: 1},
		{name: "missing", fn: "is_expected_installed_extensions", result: []any{"Momentum"},
			rules: `{"expected": ["Zoom for Google Chrome", "Momentum"]}`, want: 0},

		{name: "range", fn: "check_font_size", result: decode(t, `{"default_font_size": 20}`),
			rules: `{"type": "range", "min": 16, "max": 99999}`, want: 1},
		{name: "range is strict", fn: "check_font_size", result: decode(t, `{"default_font_size": 16}`),
			rules: `{"type": "range", "min": 16, "max": 99999}`, want: 0},
		{name: "value", fn: "check_font_size", result: decode(t, `{"default_font_size": 16}`),
			rules: `{"type": "value", "value": 16}`, want: 1},
		// A KeyError on the getter's result: a 0, noted.
		{name: "no size", fn: "check_font_size", result: decode(t, `{}`),
			rules: `{"type": "value", "value": 16}`, want: 0},
		// Python's == and <, as chrome.py applies them (checked with
		// OSWorld's chrome.py).
		{name: "a string size equals a string value", fn: "check_font_size", result: decode(t, `{"default_font_size": "16"}`),
			rules: `{"type": "value", "value": "16"}`, want: 1},
		{name: "16.0 equals 16", fn: "check_font_size", result: decode(t, `{"default_font_size": 16.0}`),
			rules: `{"type": "value", "value": 16}`, want: 1},
		{name: "a string size is out of a range", fn: "check_font_size", result: decode(t, `{"default_font_size": "20"}`),
			rules: `{"type": "range", "min": 16, "max": 99999}`, want: 0},
		{name: "a rule without min fails", fn: "check_font_size", result: decode(t, `{"default_font_size": 20}`),
			rules: `{"type": "range", "max": 99999}`, wantErr: true},

		{name: "in cart", fn: "is_added_to_steam_cart", result: map[string]any{"content": "<div>The Dota 2 Official Soundtrack</div>"},
			rules: `{"items": ["The Dota 2 Official Soundtrack"]}`, want: 1},
		{name: "not in cart", fn: "is_added_to_steam_cart", result: map[string]any{"content": "<div>empty</div>"},
			rules: `{"items": ["The Dota 2 Official Soundtrack"]}`, want: 0},
		{name: "no page", fn: "is_added_to_steam_cart", result: nil, rules: `{"items": ["x"]}`, want: 0},
	})
}

func TestShortcutOnDesktop(t *testing.T) {
	shortcuts := map[string]any{
		"chrome-abc-Default.desktop": "[Desktop Entry]\nVersion=1.0\nName=2048 Game\nExec=/opt/google/chrome/google-chrome --profile-directory=Default --app-id=abc\r\n",
	}
	runCases(t, []metricCase{
		{name: "exact", fn: "is_shortcut_on_desktop", result: shortcuts, rules: `{"type": "name", "name": "2048 Game"}`, want: 1},
		{name: "contained either way, case-insensitive", fn: "is_shortcut_on_desktop", result: shortcuts,
			rules: `{"type": "name", "name": "Play Puzzle 2048 game online"}`, want: 1},
		{name: "other name", fn: "is_shortcut_on_desktop", result: shortcuts, rules: `{"type": "name", "name": "Play Puzzle Game 2048"}`, want: 0},
		{name: "exec contained", fn: "is_shortcut_on_desktop", result: shortcuts, rules: `{"type": "exec", "exec": "--app-id=abc"}`, want: 1},
		{name: "exec is case-sensitive", fn: "is_shortcut_on_desktop", result: shortcuts, rules: `{"type": "exec", "exec": "--APP-ID=abc"}`, want: 0},
		{name: "no shortcuts", fn: "is_shortcut_on_desktop", result: map[string]any{}, rules: `{"type": "name", "name": "x"}`, want: 0},
		{name: "url type", fn: "is_shortcut_on_desktop", result: shortcuts, rules: `{"type": "url", "url": "x"}`, wantErr: true},
	})
}

func TestCompareHTMLs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gold := write("gold.html", `<!DOCTYPE html><html><body><table><tr><td sdnum="1033;0;0.00" class="a  b">1.00</td></tr></table></body></html>`)
	same := write("same.html", `<!DOCTYPE html><html><body><table><tr><td class="a b" sdnum="1033;0;0.00">1.00</td></tr></table></body></html>`)
	sdnum := write("sdnum.html", `<!DOCTYPE html><html><body><table><tr><td sdnum="1033;0;0" class="a b">1.00</td></tr></table></body></html>`)
	text := write("text.html", `<!DOCTYPE html><html><body><table><tr><td sdnum="1033;0;0.00" class="a b">2.00</td></tr></table></body></html>`)
	indented1 := write("indented1.html", "<html><body><table>\n\t<tr>\n\t\t<td>1</td>\n\t</tr>\n</table></body></html>")
	indented2 := write("indented2.html", "<html><body><table>\r\n    <tr>\n\n<td>1</td>  \n</tr>\n</table></body></html>")
	spaced := write("spaced.html", "<html><body><table> <tr>\n\t\t<td>1</td>\n\t</tr>\n</table></body></html>")
	pre1 := write("pre1.html", "<html><body><pre>\n  </pre></body></html>")
	pre2 := write("pre2.html", "<html><body><pre>\n\t</pre></body></html>")
	runCases(t, []metricCase{
		{name: "same", fn: "compare_htmls", result: same, expected: gold, want: 1},
		{name: "sdnum differs", fn: "compare_htmls", result: sdnum, expected: gold, want: 0},
		{name: "sdnum ignored", fn: "compare_htmls", result: sdnum, expected: gold, opts: map[string]any{"ignore_sdnum": true}, want: 1},
		{name: "text differs", fn: "compare_htmls", result: text, expected: gold, opts: map[string]any{"ignore_sdnum": true}, want: 0},
		{name: "missing result", fn: "compare_htmls", result: nil, expected: gold, want: 0},
		{name: "missing gold", fn: "compare_htmls", result: same, expected: filepath.Join(dir, "none.html"), wantErr: true},
		// BeautifulSoup makes a string of only whitespace "\n" or " ", but
		// not in pre (each checked with python3-bs4 on lxml).
		{name: "indentation differs", fn: "compare_htmls", result: indented2, expected: indented1, want: 1},
		{name: "a line break against a space", fn: "compare_htmls", result: spaced, expected: indented1, want: 0},
		{name: "whitespace in pre differs", fn: "compare_htmls", result: pre2, expected: pre1, want: 0},
	})
}
