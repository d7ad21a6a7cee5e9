package chrome

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestPreferenceReaders(t *testing.T) {
	prefs := []byte(`{
	  "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
	  "profile": {"name": "Thomas", "default_content_setting_values": {"cookies": 4}},
	  "webkit": {"webprefs": {"default_font_size": 20, "minimum_font_size": 6}},
	  "enable_do_not_track": true,
	  "safebrowsing": {"enabled": false, "enhanced": true},
	  "session": {"restore_on_startup": 5},
	  "extensions": {"settings": {
	    "b": {"path": "/home/user/ext/helloExtension", "manifest": {"name": "Hello"}},
	    "a": {"path": "mhjfbmdgcfjbbpaeojofohoefgiehjai/1.0", "manifest": {"name": "Chrome PDF Viewer"}}
	  }}
	}`)
	empty := []byte(`{}`)
	tests := []struct {
		name string
		fn   func([]byte) (any, string)
		data []byte
		want any
	}{
		{"search engine", DefaultSearchEngine, prefs, "Bing"},
		{"search engine unset", DefaultSearchEngine, empty, "Google"},
		{"search engine no file", DefaultSearchEngine, nil, "Google"},
		{"profile name", ProfileName, prefs, "Thomas"},
		{"profile name unset", ProfileName, empty, nil},
		{"font size", FontSize, prefs, map[string]any{"default_font_size": 20.0, "minimum_font_size": 6.0}},
		{"font size unset", FontSize, empty, map[string]any{"default_fixed_font_size": 13.0, "default_font_size": 16.0, "minimum_font_size": 13.0}},
		{"font size no file", FontSize, nil, map[string]any{"default_fixed_font_size": 13.0, "default_font_size": 16.0}},
		// webkit.get raises: OSWorld's fallback has two sizes, not three.
		{"font size, webkit not an object", FontSize, []byte(`{"webkit": 0}`), map[string]any{"default_fixed_font_size": 13.0, "default_font_size": 16.0}},
		{"do not track", DoNotTrack, prefs, "true"},
		{"do not track unset", DoNotTrack, empty, "false"},
		{"safe browsing", SafeBrowsing, prefs, "true"},
		{"safe browsing off", SafeBrowsing, []byte(`{"safebrowsing": {"enabled": false}}`), "false"},
		{"startup page", NewStartupPage, prefs, "true"},
		{"startup page restore", NewStartupPage, []byte(`{"session": {"restore_on_startup": 1}}`), "false"},
		{"startup page fresh", NewStartupPage, empty, "true"},
		{"startup page no file", NewStartupPage, nil, "Google"},
		{"data delete", DataDeleteAutomatically, prefs, "true"},
		{"data delete unset", DataDeleteAutomatically, []byte(`{"profile": {}}`), "false"},
		{"data delete no profile", DataDeleteAutomatically, empty, "Google"},
		// In the file's order, as Python's dict keeps it.
		{"extension paths", UnpackedExtensionPaths, prefs, []any{"/home/user/ext/helloExtension", "mhjfbmdgcfjbbpaeojofohoefgiehjai/1.0"}},
		{"extension paths, a key twice", UnpackedExtensionPaths, []byte(`{"extensions": {"settings": {"b": {"path": "1"}, "a": {"path": "2"}, "b": {"path": "3"}}}}`), []any{"3", "2"}},
		{"extensions not an object", UnpackedExtensionPaths, []byte(`{"extensions": null}`), "Google"},
		{"extensions given twice", UnpackedExtensionPaths, []byte(`{"extensions": {"settings": {"a": {"path": "1"}}}, "extensions": {"theme": {}}}`), []any{}},
		{"extension path missing", UnpackedExtensionPaths, []byte(`{"extensions": {"settings": {"a": {}}}}`), "Google"},
		{"extension names", InstalledExtensionNames, prefs, []any{"Hello", "Chrome PDF Viewer"}},
		{"extension names, settings a list", InstalledExtensionNames, []byte(`{"extensions": {"settings": []}}`), "Google"},
		{"extension names none", InstalledExtensionNames, empty, []any{}},
		{"corrupt file", InstalledExtensionNames, []byte(`{"extensions": `), "Google"},
	}
	for _, tt := range tests {
		if got, _ := tt.fn(tt.data); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

// TestPreferenceFallbackReasons: where a reader answers OSWorld's
// fallback because its getter raises, it says why; a value read from the
// file, a default included, has no reason.
func TestPreferenceFallbackReasons(t *testing.T) {
	tests := []struct {
		name string
		fn   func([]byte) (any, string)
		data string
		want string
	}{
		{"read", DefaultSearchEngine, `{"default_search_provider_data": {"template_url_data": {"short_name": "Bing"}}}`, ""},
		{"default", DefaultSearchEngine, `{}`, ""},
		{"cut", DefaultSearchEngine, `{"default_search`, "not JSON (unexpected end of JSON input)"},
		{"array", ProfileName, `[]`, "a JSON array, not an object"},
		{"a string on the way", DefaultSearchEngine, `{"default_search_provider_data": {"template_url_data": "x"}}`,
			"default_search_provider_data.template_url_data is a JSON string, not an object"},
		{"webkit null", FontSize, `{"webkit": null}`, "webkit is a JSON null, not an object"},
		{"safebrowsing a number", SafeBrowsing, `{"safebrowsing": 1}`, "safebrowsing is a JSON number, not an object"},
		{"no profile", DataDeleteAutomatically, `{}`, "no profile key"},
		{"settings a list", InstalledExtensionNames, `{"extensions": {"settings": []}}`, "extensions.settings is a JSON array, not an object"},
		{"no path", UnpackedExtensionPaths, `{"extensions": {"settings": {"a": {}}}}`, `extension "a" has no path`},
		{"no name", InstalledExtensionNames, `{"extensions": {"settings": {"a": {"manifest": {}}}}}`, `extension "a" has no manifest.name`},
	}
	for _, tt := range tests {
		if _, got := tt.fn([]byte(tt.data)); got != tt.want {
			t.Errorf("%s: why %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestBookmarks(t *testing.T) {
	got, err := Bookmarks([]byte(`{"checksum": "x", "roots": {"bookmark_bar": {"children": [], "type": "folder"}}, "version": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"bookmark_bar": map[string]any{"children": []any{}, "type": "folder"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Bookmarks = %#v, want %#v", got, want)
	}
	if got, err := Bookmarks(nil); err != nil || !reflect.DeepEqual(got, []any{}) {
		t.Errorf("Bookmarks(missing) = %#v, %v; want []", got, err)
	}
	for _, corrupt := range []string{"{", "null", "[]"} {
		if _, err := Bookmarks([]byte(corrupt)); err == nil {
			t.Errorf("Bookmarks(%s) = nil error", corrupt)
		}
	}
}

func TestColorScheme(t *testing.T) {
	tests := []struct {
		prefs string
		want  string
		ok    bool
	}{
		{`{"browser": {"theme": {"color_scheme2": 2}}}`, "dark", true},
		{`{"browser": {"theme": {"color_scheme": 1}}}`, "light", true},
		{`{"browser": {"theme": {"color_scheme2": 0, "color_scheme": 2}}}`, "system", true},
		{`{"browser": {"theme": {"color_scheme2": "Dark "}}}`, "dark", true},
		{`{"browser": {"theme": {"color_scheme2": 2}}, "extensions": {"theme": {"system_theme": 0}}}`, "light", true},
		{`{"extensions": {"theme": {"system_theme": 1}}}`, "system", true},
		{`{}`, "system", true},
		{`{"browser": {"theme": {"color_scheme2": true}}}`, "light", true},
		{`{"browser": {"theme": {"color_scheme2": 2.7}}}`, "dark", true},
		{`{"browser": {"theme": {"color_scheme2": 3}}}`, "system", true},
		{`{"browser": {"theme": {"color_scheme2": null, "color_scheme": 2}}}`, "system", true},
		{`{"browser": {"theme": {"color_scheme": 2}}, "extensions": {"theme": {"system_theme": false}}}`, "light", true},
		{`{"browser": {"theme": {"color_scheme": 2}}, "extensions": null}`, "", false},
		{`{"browser": []}`, "", false},
		{`{"browser": {"theme": 7}}`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		got, why := ColorScheme([]byte(tt.prefs))
		if got != tt.want || (why == "") != tt.ok {
			t.Errorf("ColorScheme(%s) = %q, %q; want %q, ok %v", tt.prefs, got, why, tt.want, tt.ok)
		}
	}
	// What the reading raises on, named as the other readers name it.
	for prefs, want := range map[string]string{
		`{"browser": {"theme": {"color_scheme": 2}}, "extensions": null}`: "extensions is a JSON null, not an object",
		`{"browser": {"theme": 7}}`:                                       "browser.theme is a JSON number, not an object",
		`[1]`:                                                             "a JSON array, not an object",
	} {
		if _, why := ColorScheme([]byte(prefs)); why != want {
			t.Errorf("ColorScheme(%s): why %q, want %q", prefs, why, want)
		}
	}
}

// chromeHistorySchema is the urls and visits tables of Chrome's History
// database (as Chrome 120+ creates them), for tests that run without a
// browser.
const chromeHistorySchema = `
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT,url LONGVARCHAR,title LONGVARCHAR,visit_count INTEGER DEFAULT 0 NOT NULL,typed_count INTEGER DEFAULT 0 NOT NULL,last_visit_time INTEGER NOT NULL,hidden INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT,url INTEGER NOT NULL,visit_time INTEGER NOT NULL,from_visit INTEGER,external_referrer_url TEXT,transition INTEGER DEFAULT 0 NOT NULL,segment_id INTEGER,visit_duration INTEGER DEFAULT 0 NOT NULL,incremented_omnibox_typed_score BOOLEAN DEFAULT FALSE NOT NULL,opener_visit INTEGER,originator_cache_guid TEXT,originator_visit_id INTEGER,originator_from_visit INTEGER,originator_opener_visit INTEGER,is_known_to_sync BOOLEAN DEFAULT FALSE NOT NULL,consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,visited_link_id INTEGER DEFAULT 0 NOT NULL,app_id TEXT);
INSERT INTO meta VALUES ('version', '67');
`

// chromeCookiesSchema is the cookies table of Chrome's Cookies database.
const chromeCookiesSchema = `
CREATE TABLE cookies(creation_utc INTEGER NOT NULL,host_key TEXT NOT NULL,top_frame_site_key TEXT NOT NULL,name TEXT NOT NULL,value TEXT NOT NULL,encrypted_value BLOB NOT NULL,path TEXT NOT NULL,expires_utc INTEGER NOT NULL,is_secure INTEGER NOT NULL,is_httponly INTEGER NOT NULL,last_access_utc INTEGER NOT NULL,has_expires INTEGER NOT NULL,is_persistent INTEGER NOT NULL,priority INTEGER NOT NULL,samesite INTEGER NOT NULL,source_scheme INTEGER NOT NULL,source_port INTEGER NOT NULL,last_update_utc INTEGER NOT NULL,source_type INTEGER NOT NULL,has_cross_site_ancestor INTEGER NOT NULL);
INSERT INTO cookies VALUES (13350000000000000,'.amazon.com','','session-id','',X'78','/',13390000000000000,1,0,13350000000000000,1,1,1,-1,2,443,13350000000000000,0,1);
`

func makeDB(t *testing.T, schema string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "db")
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileDatabasesWithoutBrowser(t *testing.T) {
	ctx := context.Background()
	cookies, err := QueryRows(ctx, makeDB(t, chromeCookiesSchema), CookiesQuery)
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies) != 1 || cookies[0].([]any)[1] != ".amazon.com" || !bytes.Equal(cookies[0].([]any)[5].([]byte), []byte("x")) {
		t.Errorf("cookies = %#v", cookies)
	}

	hist := makeDB(t, chromeHistorySchema)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	data, err := AddHistory(ctx, hist, []HistoryItem{{URL: "https://www.youtube.com/", Title: "YouTube", Ago: 90 * time.Second}}, now)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "History")
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := QueryRows(ctx, out, HistoryQuery)
	if err != nil {
		t.Fatal(err)
	}
	// Python's naive datetime.now() is local wall-clock time: 03:02:35 in
	// CET counts as 03:02:35 after 1601-01-01 00:00; CPython computes
	// int((datetime(2026,1,2,3,2,35) - datetime(1601,1,1)).total_seconds() * 1000000)
	// = 13411796555000000.
	want := []any{[]any{"https://www.youtube.com/", "YouTube", int64(13411796555000000)}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("History rows = %#v, want %#v", rows, want)
	}
	if _, err := AddHistory(ctx, makeDB(t, "CREATE TABLE other(x);"), []HistoryItem{{URL: "u"}}, now); err == nil {
		t.Error("AddHistory into a database without urls = nil error")
	}
}
