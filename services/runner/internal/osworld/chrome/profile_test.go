package chrome

import (
	"reflect"
	"testing"
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
		fn   func([]byte) any
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
		{"extension paths", UnpackedExtensionPaths, prefs, []any{"mhjfbmdgcfjbbpaeojofohoefgiehjai/1.0", "/home/user/ext/helloExtension"}},
		{"extension path missing", UnpackedExtensionPaths, []byte(`{"extensions": {"settings": {"a": {}}}}`), "Google"},
		{"extension names", InstalledExtensionNames, prefs, []any{"Chrome PDF Viewer", "Hello"}},
		{"extension names none", InstalledExtensionNames, empty, []any{}},
		{"corrupt file", InstalledExtensionNames, []byte(`{"extensions": `), "Google"},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.data); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
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
	if _, err := Bookmarks([]byte("{")); err == nil {
		t.Error("Bookmarks(corrupt) = nil error")
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
		{`{"browser": []}`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		got, ok := ColorScheme([]byte(tt.prefs))
		if got != tt.want || ok != tt.ok {
			t.Errorf("ColorScheme(%s) = %q, %v; want %q, %v", tt.prefs, got, ok, tt.want, tt.ok)
		}
	}
}
