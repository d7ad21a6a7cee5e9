package chrome

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the SQLite driver for History and Cookies

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// Profile files, relative to the profile directory.
const (
	PreferencesFile = "Default/Preferences"
	BookmarksFile   = "Default/Bookmarks"
	HistoryFile     = "Default/History"
	CookiesFile     = "Default/Cookies"
)

// DefaultProfileDir is the guest's profile directory on x86 Linux, where
// OSWorld's getters look ("~" is expanded by the guest server);
// ARMProfileDir is the snap Chromium's, which OSWorld uses on ARM guests.
const (
	DefaultProfileDir = "~/.config/google-chrome"
	ARMProfileDir     = "~/snap/chromium/common/chromium"
)

// parsePrefs decodes a Preferences (or Bookmarks) file; why says what
// stops it reading ("" when it reads), where OSWorld's getters raise and
// answer their fallbacks.
func parsePrefs(data []byte) (m map[string]any, why string) {
	if data == nil {
		return nil, "no file"
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Sprintf("not JSON (%v)", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, notObject(nil, v)
	}
	return m, ""
}

// dictPath is Python's d.get(k1, {}).get(k2, {})...get(kn, def) on a
// decoded JSON value; why names the value on the way that is not an
// object (an AttributeError there, which OSWorld's getters answer with
// their fallback), "" when there is none.
func dictPath(d any, def any, keys ...string) (v any, why string) {
	v = d
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, notObject(keys[:i], v)
		}
		x, present := m[k]
		switch {
		case present:
			v = x
		case i == len(keys)-1:
			v = def
		default:
			v = map[string]any{}
		}
	}
	return v, ""
}

// notObject says that the value at path is not an object.
func notObject(path []string, v any) string {
	if len(path) == 0 {
		return "a JSON " + jsonKind(v) + ", not an object"
	}
	return strings.Join(path, ".") + " is a JSON " + jsonKind(v) + ", not an object"
}

func pyBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// The Preferences readers below return what their OSWorld getter answers
// and, when that is the getter's fallback after a raise, why (the runner
// notes it); "" when the value was read, a default included.

// DefaultSearchEngine is get_default_search_engine:
// default_search_provider_data.template_url_data.short_name, "Google" when
// unset or unreadable.
func DefaultSearchEngine(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "Google", why
	}
	v, why := dictPath(m, "Google", "default_search_provider_data", "template_url_data", "short_name")
	if why != "" {
		return "Google", why
	}
	return v, ""
}

// ProfileName is get_profile_name: profile.name, nil when unset.
func ProfileName(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return nil, why
	}
	return dictPath(m, nil, "profile", "name")
}

// FontSize is get_chrome_font_size: webkit.webprefs, Chrome's three
// defaults when unset, and two of them (OSWorld's fallback) when the file
// or a value on the way is unreadable.
func FontSize(prefs []byte) (any, string) {
	unreadable := map[string]any{"default_fixed_font_size": 13.0, "default_font_size": 16.0}
	m, why := parsePrefs(prefs)
	if why != "" {
		return unreadable, why
	}
	v, why := dictPath(m, map[string]any{"default_fixed_font_size": 13.0, "default_font_size": 16.0, "minimum_font_size": 13.0}, "webkit", "webprefs")
	if why != "" {
		return unreadable, why
	}
	return v, ""
}

// DoNotTrack is get_enable_do_not_track: "true" when enable_do_not_track
// is truthy.
func DoNotTrack(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "false", why
	}
	return pyBool(metric.Truthy(m["enable_do_not_track"])), ""
}

// SafeBrowsing is get_enable_safe_browsing: "true" when safebrowsing
// .enhanced or .enabled is truthy.
func SafeBrowsing(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "false", why
	}
	sb, _ := dictPath(m, map[string]any{}, "safebrowsing")
	o, isObj := sb.(map[string]any)
	if !isObj {
		// .get on a non-dict raises; OSWorld answers "false".
		return "false", notObject([]string{"safebrowsing"}, sb)
	}
	return pyBool(metric.Truthy(o["enhanced"]) || metric.Truthy(o["enabled"])), ""
}

// NewStartupPage is get_new_startup_page: "true" without a session key,
// else whether session.restore_on_startup is 5. An unreadable file gives
// OSWorld's odd "Google".
func NewStartupPage(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "Google", why
	}
	if _, present := m["session"]; !present {
		return "true", ""
	}
	v, why := dictPath(m, map[string]any{}, "session", "restore_on_startup")
	if why != "" {
		return "Google", why
	}
	n, _ := v.(float64)
	return pyBool(n == 5), ""
}

// DataDeleteAutomatically is get_data_delete_automacally: "true" when
// profile.default_content_setting_values is present and not null; a
// missing profile key gives "Google".
func DataDeleteAutomatically(prefs []byte) (any, string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "Google", why
	}
	v, present := m["profile"]
	p, isObj := v.(map[string]any)
	switch {
	case !present:
		return "Google", "no profile key"
	case !isObj:
		return "Google", notObject([]string{"profile"}, v)
	}
	return pyBool(p["default_content_setting_values"] != nil), ""
}

// extensionSettings returns extensions.settings and its keys in the
// file's order (Python's dict keeps it: a key given twice stays where it
// first was, with its last value), or why not where OSWorld's getters
// raise: a value on the way that is not an object.
func extensionSettings(prefs []byte) (settings map[string]any, ids []string, why string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return nil, nil, why
	}
	v, why := dictPath(m, map[string]any{}, "extensions", "settings")
	if why != "" {
		return nil, nil, why
	}
	settings, isObj := v.(map[string]any)
	if !isObj {
		return nil, nil, notObject([]string{"extensions", "settings"}, v)
	}
	if len(settings) == 0 {
		return settings, nil, ""
	}
	// Maps, not structs: a key given twice keeps its last value whole, as
	// in Python, and keys match exactly.
	var top, ext map[string]json.RawMessage
	if json.Unmarshal(prefs, &top) != nil || json.Unmarshal(top["extensions"], &ext) != nil {
		return nil, nil, "extensions does not read"
	}
	ids, err := objectKeys(ext["settings"])
	if err != nil || len(ids) != len(settings) {
		return nil, nil, "extensions.settings does not read"
	}
	return settings, ids, ""
}

// objectKeys is the keys of the JSON object raw in the order they first
// appear; none for an empty raw.
func objectKeys(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// UnpackedExtensionPaths is get_find_unpacked_extension_path: every
// extensions.settings entry's path, in the file's order; an entry without
// one (a missing key raises in OSWorld) gives "Google".
func UnpackedExtensionPaths(prefs []byte) (any, string) {
	s, ids, why := extensionSettings(prefs)
	if why != "" {
		return "Google", why
	}
	out := []any{}
	for _, id := range ids {
		e, _ := s[id].(map[string]any)
		p, present := e["path"]
		if !present {
			return "Google", fmt.Sprintf("extension %q has no path", id)
		}
		out = append(out, p)
	}
	return out, ""
}

// InstalledExtensionNames is get_find_installed_extension_name: every
// extensions.settings entry's manifest.name, in the file's order;
// "Google" when one lacks it.
func InstalledExtensionNames(prefs []byte) (any, string) {
	s, ids, why := extensionSettings(prefs)
	if why != "" {
		return "Google", why
	}
	out := []any{}
	for _, id := range ids {
		e, _ := s[id].(map[string]any)
		man, _ := e["manifest"].(map[string]any)
		n, present := man["name"]
		if !present {
			return "Google", fmt.Sprintf("extension %q has no manifest.name", id)
		}
		out = append(out, n)
	}
	return out, ""
}

// Bookmarks is get_bookmarks: the roots object of the Bookmarks file, an
// empty list when the file is missing or empty. A file that is not JSON is
// an error, as json.loads raises in OSWorld.
func Bookmarks(data []byte) (any, error) {
	if len(data) == 0 {
		return []any{}, nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("chrome: Bookmarks: %v", err)
	}
	// data.get("roots", {}) raises on anything but an object, null
	// included.
	r, why := dictPath(v, map[string]any{}, "roots")
	if why != "" {
		return nil, fmt.Errorf("chrome: Bookmarks: the file holds a JSON %s, not an object", jsonKind(v))
	}
	return r, nil
}

// jsonKind names a decoded JSON value's type for an error.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// MaxRows bounds the rows read from a profile database.
const MaxRows = 1 << 20

// queryTimeout bounds one query of a profile database.
const queryTimeout = 30 * time.Second

// openDB opens a copy of a profile database read-only: immutable, so
// SQLite neither writes nor looks for the journal of the live profile.
func openDB(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: "mode=ro&immutable=1"}
	return sql.Open("sqlite", u.String())
}

// QueryRows runs query on the SQLite file at path and returns the rows as
// lists (TEXT as string, INTEGER as int64, BLOB as []byte, NULL as nil),
// as Python's cursor.fetchall. It is how the history and cookie_data
// getters read their copies.
func QueryRows(ctx context.Context, path, query string) ([]any, error) {
	db, err := openDB(path)
	if err != nil {
		return nil, fmt.Errorf("chrome: open %s: %w", filepath.Base(path), err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("chrome: query %s: %w", filepath.Base(path), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := []any{}
	for rows.Next() {
		if len(out) >= MaxRows {
			return nil, fmt.Errorf("chrome: %s has more than %d rows", filepath.Base(path), MaxRows)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// HistoryQuery and CookiesQuery are the getters' queries.
const (
	HistoryQuery = "SELECT url, title, last_visit_time FROM urls"
	CookiesQuery = "SELECT * FROM cookies"
)

// HistoryItem is one entry of update_browse_history.
type HistoryItem struct {
	URL, Title string
	// Ago is visit_time_from_now_in_seconds.
	Ago time.Duration
}

// chromeEpochUnix is Chrome's time origin, 1601-01-01 UTC, in Unix
// seconds: Chrome's timestamps count microseconds since then.
const chromeEpochUnix = -11644473600

// ChromeTime is t in Chrome's timestamp format. The span since 1601 is
// longer than a time.Duration holds, so it is counted in seconds first.
func ChromeTime(t time.Time) int64 {
	return (t.Unix()-chromeEpochUnix)*1e6 + int64(t.Nanosecond()/1e3)
}

// typedLinkTransition is the visits.transition OSWorld writes: 805306368,
// a link transition with the chain start and end qualifiers.
const typedLinkTransition = 805306368

// maxHistoryDB bounds the History database the step writes into.
const maxHistoryDB = 256 << 20

// AddHistory is the database work of update_browse_history: it copies the
// History database at base to a temporary file, adds each item to urls and
// visits as OSWorld does (visit count 1, typed count 0, a link transition,
// the visit time now minus Ago, written in local time as Python's naive
// datetime.now() is), and returns the new file's bytes.
func AddHistory(ctx context.Context, base string, items []HistoryItem, now time.Time) ([]byte, error) {
	data, err := boundedread.ReadFile(base, maxHistoryDB)
	if err != nil {
		return nil, fmt.Errorf("chrome: History template: %w", err)
	}
	dir, err := os.MkdirTemp("", "chrome-history-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "History")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	// Python's naive datetime.now() minus datetime(1601,1,1) counts local
	// wall-clock time; the UTC offset is kept to match.
	_, off := now.Zone()
	for _, it := range items {
		ts := ChromeTime(now.Add(-it.Ago)) + int64(off)*1e6
		res, err := db.ExecContext(ctx, `INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden) VALUES (?, ?, ?, ?, ?, ?)`,
			it.URL, it.Title, 1, 0, ts, 0)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("chrome: History: add %s: %w", it.URL, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			db.Close()
			return nil, err
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, visit_duration) VALUES (?, ?, ?, ?, ?, ?)`,
			id, ts, 0, typedLinkTransition, 0, 0); err != nil {
			db.Close()
			return nil, fmt.Errorf("chrome: History: add visit of %s: %w", it.URL, err)
		}
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	return boundedread.ReadFile(p, maxHistoryDB)
}

// colorSchemes maps Chrome's browser.theme.color_scheme(2) values.
var colorSchemes = map[string]string{
	"system": "system", "default": "system", "0": "system",
	"light": "light", "1": "light",
	"dark": "dark", "2": "dark",
}

// ColorScheme is the file side of OSWorld's appearance getter
// (get_chrome_color_scheme): browser.theme.color_scheme2 (or, when that
// key is absent, the older color_scheme) as "system", "light" or "dark",
// read as Python reads it (a string stripped and lowered, a number or a
// boolean truncated to 0, 1 or 2), except that an
// extensions.theme.system_theme equal to 0 or "0" (False is 0 in Python)
// reads as "light" (OSWorld's reading of the Linux classic theme);
// "system" when unset. Where OSWorld's reading raises (the file is
// unreadable or a value on the way is not an object), why says so and
// mode is empty.
func ColorScheme(prefs []byte) (mode, why string) {
	m, why := parsePrefs(prefs)
	if why != "" {
		return "", why
	}
	t, why := dictPath(m, map[string]any{}, "browser", "theme")
	if why != "" {
		return "", why
	}
	theme, isObj := t.(map[string]any)
	if !isObj {
		return "", notObject([]string{"browser", "theme"}, t)
	}
	raw, present := theme["color_scheme2"]
	if !present {
		raw = theme["color_scheme"]
	}
	switch v := raw.(type) {
	case string:
		mode = colorSchemes[metric.PyLower(metric.PyStrip(v))]
	case bool:
		mode = "system"
		if v {
			mode = "light"
		}
	case float64:
		// int() truncates toward zero; only 0, 1 and 2 name a mode.
		if v > -1 && v < 3 {
			mode = colorSchemes[strconv.Itoa(int(v))]
		}
	}
	flag, why := dictPath(m, nil, "extensions", "theme", "system_theme")
	if why != "" {
		return "", why
	}
	switch v := flag.(type) {
	case float64:
		if v == 0 {
			return "light", ""
		}
	case bool:
		if !v {
			return "light", ""
		}
	case string:
		if v == "0" {
			return "light", ""
		}
	}
	if mode == "" {
		mode = "system"
	}
	return mode, ""
}
