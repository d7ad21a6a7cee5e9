// Package browser implements OSWorld's Chrome metrics
// (desktop_env/evaluators/metrics/chrome.py): URLs, tabs, bookmarks,
// cookies, history, extensions, desktop shortcuts and saved HTML.
//
// Results come from the chrome getters: a URL string, a tab as
// {"title","url","content"}, a list of tabs, the Bookmarks roots object,
// SQLite rows as lists, a map of shortcut file name to content. OSWorld
// raises on a rule it does not know and on a result of the wrong shape;
// those are errors here, while a missing result (Python's None or an empty
// value, which the Python code tests with `if not result`) scores 0.
package browser

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/pyre"
)

// Metrics returns the metrics of this package.
func Metrics() metric.Table {
	return metric.Table{
		"is_expected_url_pattern_match":      {Fn: metricURLPatternMatch},
		"is_expected_active_tab":             {Fn: metricActiveTab},
		"is_expected_active_tab_approximate": {Fn: metricActiveTabApproximate},
		"is_expected_tabs":                   {Fn: metricTabs},
		"is_expected_bookmarks":              {Fn: metricBookmarks},
		"is_expected_installed_extensions":   {Fn: metricInstalledExtensions},
		"is_expected_search_query":           {Fn: metricSearchQuery},
		"is_cookie_deleted":                  {Fn: metricCookieDeleted},
		"check_history_deleted":              {Fn: metricHistoryDeleted},
		"is_shortcut_on_desktop":             {Fn: metricShortcutOnDesktop},
		"is_added_to_steam_cart":             {Fn: metricSteamCart},
		"check_font_size":                    {Fn: metricFontSize},
		"compare_htmls":                      {Fn: metricCompareHTMLs, Options: []string{"ignore_sdnum"}},
		// compare_archive passes its other options to the file metric.
		"compare_archive": {Fn: metricCompareArchive, Options: []string{"file_path", "file_type"}},
	}
}

// tabURL is the URL of a tab result: the string itself, or a tab object's
// "url" (nil when absent, as dict.get).
func tabURL(v any) any {
	if m, ok := v.(map[string]any); ok {
		return m["url"]
	}
	return v
}

// ruleType is rule['type']; a missing key raises KeyError in OSWorld.
func ruleType(r map[string]any) (string, error) {
	t, ok := r["type"].(string)
	if !ok {
		return "", fmt.Errorf("rule has no type")
	}
	return t, nil
}

// typedRule reads the rules object and its type.
func typedRule(expected any) (map[string]any, string, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return nil, "", err
	}
	t, err := ruleType(r)
	return r, t, err
}

// search is Python's bool(re.search(pattern, s)).
func search(pattern, s string) (bool, error) {
	re, err := pyre.Compile(pattern)
	if err != nil {
		return false, err
	}
	m, err := re.Search(s)
	return m != nil, err
}

// metricURLPatternMatch is is_expected_url_pattern_match: every pattern of
// rules["expected"] must re.search the URL.
func metricURLPatternMatch(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	if !metric.Truthy(result) {
		return 0, nil
	}
	var u string
	switch x := result.(type) {
	case string:
		u = x
	case map[string]any:
		s, ok := x["url"].(string)
		if !ok {
			// OSWorld logs an invalid result and scores 0.
			return 0, nil
		}
		u = s
	default:
		return 0, nil
	}
	var patterns []string
	switch p := r["expected"].(type) {
	case string:
		// Python iterates a string by characters.
		for _, c := range p {
			patterns = append(patterns, string(c))
		}
	case []any:
		for _, e := range p {
			s, ok := e.(string)
			if !ok {
				return 0, fmt.Errorf("expected patterns must be strings")
			}
			patterns = append(patterns, s)
		}
	default:
		return 0, fmt.Errorf("rules.expected must be a list of patterns")
	}
	for _, p := range patterns {
		ok, err := search(p, u)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, nil
		}
	}
	return 1, nil
}

// expectedURLRule reads a rule of type "url" and its "url"; ok is false for
// another type, which OSWorld logs and scores 0.
func expectedURLRule(expected any) (string, bool, error) {
	r, t, err := typedRule(expected)
	if err != nil || t != "url" {
		return "", false, err
	}
	u, ok := r["url"].(string)
	if !ok {
		return "", false, fmt.Errorf("rule of type url needs a url string")
	}
	return u, true, nil
}

// metricActiveTab is is_expected_active_tab: the active tab's URL equals
// rule["url"] under compare_urls.
func metricActiveTab(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if !metric.Truthy(result) {
		return 0, nil
	}
	want, ok, err := expectedURLRule(expected)
	if err != nil || !ok {
		return 0, err
	}
	got, ok := tabURL(result).(string)
	if !ok {
		// compare_urls(url, None) is False.
		return 0, nil
	}
	return metric.Bool(CompareURLs(want, got)), nil
}

// metricActiveTabApproximate is is_expected_active_tab_approximate: the
// URLs are equal once their query strings are dropped (no other
// normalisation).
func metricActiveTabApproximate(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if !metric.Truthy(result) {
		return 0, nil
	}
	want, ok, err := expectedURLRule(expected)
	if err != nil || !ok {
		return 0, err
	}
	got, ok := tabURL(result).(string)
	if !ok {
		return 0, fmt.Errorf("active tab has no url")
	}
	return metric.Bool(stripQuery(want) == stripQuery(got)), nil
}

// metricTabs is is_expected_tabs: the open tabs' URLs and rule["urls"] have
// the same length and every expected URL matches some open one
// (are_lists_equal with compare_urls).
func metricTabs(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	if !metric.Truthy(result) {
		return 0, nil
	}
	t, err := ruleType(r)
	if err != nil || t != "url" {
		return 0, err
	}
	tabs, ok := result.([]any)
	if !ok {
		return 0, fmt.Errorf("open tabs must be a list")
	}
	var actual []string
	for _, tab := range tabs {
		m, ok := tab.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("open tab entries must be objects")
		}
		u, _ := m["url"].(string)
		actual = append(actual, u)
	}
	want, ok := r["urls"].([]any)
	if !ok {
		return 0, fmt.Errorf("rule of type url needs urls")
	}
	if len(want) != len(actual) {
		return 0, nil
	}
	for _, w := range want {
		ws, ok := w.(string)
		if !ok {
			return 0, fmt.Errorf("rule urls must be strings")
		}
		if !slices.ContainsFunc(actual, func(a string) bool { return CompareURLs(ws, a) }) {
			return 0, nil
		}
	}
	return 1, nil
}

// bookmarkBarChildren returns bookmarks['bookmark_bar']['children'].
func bookmarkBarChildren(bookmarks any) ([]map[string]any, error) {
	roots, ok := bookmarks.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("bookmarks must be the roots object")
	}
	bar, ok := roots["bookmark_bar"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("bookmarks have no bookmark_bar")
	}
	return children(bar)
}

func children(node map[string]any) ([]map[string]any, error) {
	l, ok := node["children"].([]any)
	if !ok {
		return nil, fmt.Errorf("bookmark folder has no children list")
	}
	out := make([]map[string]any, 0, len(l))
	for _, c := range l {
		m, ok := c.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bookmark entries must be objects")
		}
		out = append(out, m)
	}
	return out, nil
}

// fieldsOfType collects field of the nodes whose type is typ; a node of
// that type without the field raises KeyError in OSWorld.
func fieldsOfType(nodes []map[string]any, typ, field string) ([]string, error) {
	var out []string
	for _, n := range nodes {
		if t, _ := n["type"].(string); t != typ {
			continue
		}
		v, ok := n[field].(string)
		if !ok {
			return nil, fmt.Errorf("bookmark %s has no %s", typ, field)
		}
		out = append(out, v)
	}
	return out, nil
}

func sameSet(a, b []string) bool {
	set := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}

// maxCombinations bounds the product of alternatives in a
// liked_authors_websites_urls rule.
const maxCombinations = 1 << 16

// metricBookmarks is is_expected_bookmarks over the Bookmarks roots.
func metricBookmarks(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	if !metric.Truthy(result) {
		return 0, nil
	}
	t, err := ruleType(r)
	if err != nil {
		return 0, err
	}
	switch t {
	case "bookmark_bar_folders_names", "bookmark_bar_websites_urls":
		kids, err := bookmarkBarChildren(result)
		if err != nil {
			return 0, err
		}
		typ, field, key := "folder", "name", "names"
		if t == "bookmark_bar_websites_urls" {
			typ, field, key = "url", "url", "urls"
		}
		got, err := fieldsOfType(kids, typ, field)
		if err != nil {
			return 0, err
		}
		return metric.Bool(sameSet(got, metric.Strings(r[key]))), nil
	case "liked_authors_websites_urls":
		kids, err := bookmarkBarChildren(result)
		if err != nil {
			return 0, err
		}
		var folder map[string]any
		for _, k := range kids {
			if ty, _ := k["type"].(string); ty == "folder" {
				if n, _ := k["name"].(string); n == "Liked Authors" {
					folder = k
					break
				}
			}
		}
		if folder == nil {
			return 0, nil
		}
		fk, err := children(folder)
		if err != nil {
			return 0, err
		}
		got, err := fieldsOfType(fk, "url", "url")
		if err != nil {
			return 0, err
		}
		// Each entry of rules["urls"] is a URL or a list of acceptable
		// alternatives; some choice of one per entry must equal the folder's
		// URLs as a set.
		urls, _ := r["urls"].([]any)
		alts := make([][]string, len(urls))
		n := 1
		for i, u := range urls {
			switch x := u.(type) {
			case string:
				alts[i] = []string{x}
			case []any:
				alts[i] = metric.Strings(x)
			default:
				return 0, fmt.Errorf("rule urls entries must be strings or lists")
			}
			n *= max(len(alts[i]), 1)
			if n > maxCombinations {
				return 0, fmt.Errorf("rule urls allow more than %d combinations", maxCombinations)
			}
		}
		for _, a := range alts {
			if len(a) == 0 {
				return 0, nil // the product of an empty list is empty
			}
		}
		idx := make([]int, len(alts))
		for {
			combo := make([]string, len(alts))
			for i, a := range alts {
				combo[i] = a[idx[i]]
			}
			if sameSet(combo, got) {
				return 1, nil
			}
			i := len(idx) - 1
			for ; i >= 0; i-- {
				idx[i]++
				if idx[i] < len(alts[i]) {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				return 0, nil
			}
		}
	}
	return 0, fmt.Errorf("bookmark rule type %q is not supported", t)
}

// extensionAliases are the names one extension has had in the Chrome Web
// Store; OSWorld counts them as one.
var extensionAliases = [][]string{{"Zoom Chrome Extension", "Zoom for Google Chrome"}}

func canonicalExtension(name string) string {
	for _, g := range extensionAliases {
		if slices.Contains(g, name) {
			return slices.Min(g)
		}
	}
	return name
}

// metricInstalledExtensions is is_expected_installed_extensions: every
// expected name is among the installed ones.
func metricInstalledExtensions(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	if !metric.Truthy(result) {
		return 0, nil
	}
	var installed []string
	switch x := result.(type) {
	case []any:
		installed = metric.Strings(x)
	case []string:
		installed = x
	case string:
		// The getter answers "Google" when Preferences cannot be read;
		// Python then makes a set of its characters.
		for _, c := range x {
			installed = append(installed, string(c))
		}
	default:
		return 0, fmt.Errorf("installed extensions must be a list of names")
	}
	have := map[string]bool{}
	for _, n := range installed {
		have[canonicalExtension(n)] = true
	}
	for _, n := range metric.Strings(r["expected"]) {
		if !have[canonicalExtension(n)] {
			return 0, nil
		}
	}
	return 1, nil
}

// metricSearchQuery is is_expected_search_query: rules.expect.pattern
// re.searches the active tab's URL.
func metricSearchQuery(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	if !metric.Truthy(result) {
		return 0, nil
	}
	exp, _ := r["expect"].(map[string]any)
	pattern, ok := exp["pattern"].(string)
	if !ok {
		return 0, fmt.Errorf("rules.expect.pattern is required")
	}
	u, ok := tabURL(result).(string)
	if !ok {
		return 0, fmt.Errorf("active tab has no url")
	}
	found, err := search(pattern, u)
	return metric.Bool(found), err
}

// rowColumn returns column i of each SQLite row (a list) as a string.
func rowColumn(rows any, i int) ([]string, error) {
	l, ok := rows.([]any)
	if !ok {
		return nil, fmt.Errorf("rows must be a list")
	}
	out := make([]string, 0, len(l))
	for _, row := range l {
		cols, ok := row.([]any)
		if !ok || len(cols) <= i {
			return nil, fmt.Errorf("row has no column %d", i)
		}
		s, ok := cols[i].(string)
		if !ok {
			return nil, fmt.Errorf("row column %d is not text", i)
		}
		out = append(out, s)
	}
	return out, nil
}

// metricCookieDeleted is is_cookie_deleted: no cookie's host_key (column 1
// of the cookies table) matches a rule domain under compare_urls.
func metricCookieDeleted(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	return noRowMatches(result, expected, "domains", 1, func(domain, host string) bool { return CompareURLs(domain, host) })
}

// metricHistoryDeleted is check_history_deleted: no history URL (column 0)
// contains a rule keyword.
func metricHistoryDeleted(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	return noRowMatches(result, expected, "keywords", 0, func(keyword, url string) bool { return strings.Contains(url, keyword) })
}

// noRowMatches scores the deletion checks over SQLite rows: the rule's
// type is typ and lists words under the same key, and no word may match
// column col of any row. A nil result means the getter could not read
// the database.
func noRowMatches(result, expected any, typ string, col int, match func(word, cell string) bool) (float64, error) {
	r, t, err := typedRule(expected)
	if err != nil {
		return 0, err
	}
	if t != typ {
		return 0, fmt.Errorf("deletion rule type %q is not supported (want %q)", t, typ)
	}
	if result == nil {
		return 0, nil
	}
	cells, err := rowColumn(result, col)
	if err != nil {
		return 0, err
	}
	for _, w := range metric.Strings(r[typ]) {
		for _, c := range cells {
			if match(w, c) {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// shortcutContents returns the shortcut contents keyed by file name, in
// name order (Python's dict keeps the guest's listing order; any order
// gives the same score).
func shortcutContents(v any) ([]string, error) {
	var out []string
	switch m := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s, ok := m[k].(string)
			if !ok {
				return nil, fmt.Errorf("shortcut %s content is not text", k)
			}
			out = append(out, s)
		}
	case map[string]string:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	default:
		return nil, fmt.Errorf("shortcuts must be an object of file name to content")
	}
	return out, nil
}

// metricShortcutOnDesktop is is_shortcut_on_desktop: some .desktop file has
// the expected Name= (type name) or Exec= (type exec) line, exactly or with
// one containing the other.
func metricShortcutOnDesktop(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, t, err := typedRule(expected)
	if err != nil {
		return 0, err
	}
	var key string
	var fold bool
	switch t {
	case "name":
		key, fold = "Name=", true
	case "exec":
		key = "Exec="
	default:
		return 0, fmt.Errorf("shortcut rule type %q is not supported", t)
	}
	if result == nil {
		return 0, nil
	}
	want, ok := r[t].(string)
	if !ok {
		return 0, fmt.Errorf("shortcut rule of type %s needs %s", t, t)
	}
	contents, err := shortcutContents(result)
	if err != nil {
		return 0, err
	}
	for _, c := range contents {
		if strings.Contains(c, key+want+"\n") {
			return 1, nil
		}
		for _, line := range strings.Split(c, "\n") {
			got, ok := strings.CutPrefix(line, key)
			if !ok {
				continue
			}
			a, b := got, want
			if fold {
				// Name lines compare case-insensitively, Exec lines do not.
				a, b = metric.PyLower(a), metric.PyLower(b)
			}
			if got == want || strings.Contains(a, b) || strings.Contains(b, a) {
				return 1, nil
			}
		}
	}
	return 0, nil
}

// metricSteamCart is is_added_to_steam_cart: every rule item is a
// substring of the cart page's HTML.
func metricSteamCart(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	tab, ok := result.(map[string]any)
	if !ok {
		return 0, nil
	}
	content, ok := tab["content"].(string)
	if !ok {
		return 0, fmt.Errorf("page info has no content")
	}
	for _, item := range metric.Strings(r["items"]) {
		if !strings.Contains(content, item) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricFontSize is check_font_size on Preferences' webkit.webprefs: the
// default_font_size equals rule.value (type value) or lies strictly
// between rule.min and rule.max (type range).
func metricFontSize(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	prefs, ok := result.(map[string]any)
	if !ok {
		// font_size['default_font_size'] raises on None or a list.
		return 0, metric.Because(ctx, fmt.Errorf("the font sizes are %T, not an object", result))
	}
	size, ok := prefs["default_font_size"]
	if !ok {
		return 0, metric.Because(ctx, errors.New("the font sizes have no default_font_size"))
	}
	t, err := ruleType(r)
	if err != nil {
		return 0, err
	}
	switch t {
	case "value":
		v, ok := r["value"]
		if !ok {
			return 0, errors.New(`font size rule of type "value" has no value`)
		}
		return metric.Bool(metric.PyEqual(size, v)), nil
	case "range":
		lo, ok1 := r["min"]
		hi, ok2 := r["max"]
		if !ok1 || !ok2 {
			return 0, errors.New(`font size rule of type "range" needs min and max`)
		}
		// rule['min'] < size < rule['max'], which stops at the first false.
		for _, pair := range [][2]any{{lo, size}, {size, hi}} {
			c, err := metric.PyCompare(pair[0], pair[1])
			if err != nil {
				return 0, metric.Because(ctx, err)
			}
			if c >= 0 {
				return 0, nil
			}
		}
		return 1, nil
	}
	return 0, fmt.Errorf("font size rule type %q is not supported", t)
}
