package chrome

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// profileGettersDriver runs OSWorld's getters/chrome.py (in the getters
// directory argv[1]) on each file named in the JSON list argv[2] (null: no
// file, as get_file answers a 404) through an env whose get_file gives
// that file's bytes, and prints one JSON object per file: each getter's
// answer as {"value": v} or {"raise": name}. Floats JSON cannot write are
// {"float": repr}. The imports the profile getters never call are stubbed,
// and so is time.sleep, which get_chrome_color_scheme polls with.
const profileGettersDriver = osworldpy.ChromeGetters + `
import json, math
g.time = types.SimpleNamespace(sleep=lambda s: None)

class Controller:
    def __init__(self, content):
        self.content = content
    def execute_python_command(self, command):
        # get_chrome_color_scheme's probe of profile folders finds none, so
        # it falls back to the Default profile, as the other getters read.
        return {"output": "" if "glob" in command else "/home/user/.config/google-chrome/Default/Preferences\n"}
    def get_file(self, path):
        return self.content

class Env:
    vm_platform = "Linux"
    vm_machine = "x86_64"
    def __init__(self, content):
        self.controller = Controller(content)

def plain(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v

GETTERS = ["default_search_engine", "profile_name", "chrome_font_size", "enable_do_not_track",
           "enable_safe_browsing", "new_startup_page", "data_delete_automacally",
           "find_unpacked_extension_path", "find_installed_extension_name", "bookmarks", "chrome_color_scheme"]
out = []
for path in json.load(open(sys.argv[2])):
    content = None if path is None else open(path, "rb").read()
    row = {}
    for name in GETTERS:
        try:
            row[name] = {"value": plain(getattr(g, "get_" + name)(Env(content), {}))}
        except Exception as e:
            row[name] = {"raise": type(e).__name__}
    out.append(row)
print(json.dumps(out))
`

// profileGetters are the readers compared, by OSWorld's getter name; an
// error is a raise there.
var profileGetters = map[string]func([]byte) (any, error){
	"default_search_engine":         noErr(DefaultSearchEngine),
	"profile_name":                  noErr(ProfileName),
	"chrome_font_size":              noErr(FontSize),
	"enable_do_not_track":           noErr(DoNotTrack),
	"enable_safe_browsing":          noErr(SafeBrowsing),
	"new_startup_page":              noErr(NewStartupPage),
	"data_delete_automacally":       noErr(DataDeleteAutomatically),
	"find_unpacked_extension_path":  noErr(UnpackedExtensionPaths),
	"find_installed_extension_name": noErr(InstalledExtensionNames),
	"bookmarks":                     Bookmarks,
	// get_chrome_color_scheme polls the file; on one that does not
	// change, that is its mode, or "system" when it does not read.
	"chrome_color_scheme": func(b []byte) (any, error) {
		if mode, why := ColorScheme(b); why == "" {
			return mode, nil
		}
		return "system", nil
	},
}

func noErr(f func([]byte) (any, string)) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		v, _ := f(b)
		return v, nil
	}
}

// TestProfileGettersMatchChromePy reads random Preferences and Bookmarks
// files with the profile readers here and with OSWorld's own getters
// (getters/chrome.py, its env's get_file giving the file) and wants the
// same answer from each getter: the same value, list order included, or a
// raise where it raises. The files hold the keys those getters read, each
// at random an object, another JSON type or null, with keys missing,
// repeated or in another order, and now and then a file that is not a
// JSON object. OSWorld's code is not ours to commit, so the test runs only
// when OSWORLD_REF names a checkout (python3 or OSWORLD_PYTHON with lxml).
func TestProfileGettersMatchChromePy(t *testing.T) {
	getters := osworldpy.GettersDir(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(23, 29))
	var paths []any
	files := map[int][]byte{}
	for i := range 3000 {
		if i%100 == 0 {
			paths = append(paths, nil)
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("p%04d.json", i))
		data := randomPreferences(rng)
		if data == nil {
			data = []byte{} // an empty file, not a missing one
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[i] = data
		paths = append(paths, p)
	}
	list := filepath.Join(dir, "files.json")
	b, _ := json.Marshal(paths)
	if err := os.WriteFile(list, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var want []map[string]map[string]any
	if err := json.Unmarshal(osworldpy.Run(t, profileGettersDriver, nil, getters, list), &want); err != nil || len(want) != len(paths) {
		t.Fatalf("chrome.py answered %d files of %d: %v", len(want), len(paths), err)
	}
	bad, kinds := 0, map[string]map[string]bool{}
	for i, row := range want {
		for name, w := range row {
			got, err := profileGetters[name](files[i])
			var g map[string]any
			if err != nil {
				g = map[string]any{"raise": err.Error()}
			} else {
				g = map[string]any{"value": roundTrip(t, got)}
			}
			if kinds[name] == nil {
				kinds[name] = map[string]bool{}
			}
			kinds[name][fmt.Sprint(w["value"])] = true
			_, wRaise := w["raise"]
			_, gRaise := g["raise"]
			if wRaise && gRaise || !wRaise && !gRaise && reflect.DeepEqual(w["value"], g["value"]) {
				continue
			}
			if bad++; bad <= 10 {
				t.Errorf("%s on %.400q: ours %v, OSWorld's %v", name, files[i], g, w)
			}
		}
	}
	// Each getter must give more than one answer, or the files prove
	// little.
	for name, seen := range kinds {
		if len(seen) < 2 {
			t.Errorf("%s answered only %v", name, seen)
		}
	}
	if bad > 0 {
		t.Errorf("%d answers differ from OSWorld's", bad)
	}
}

// roundTrip is v as JSON decodes it, so that it compares with Python's
// answer.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// randomPreferences is a random Preferences-like file: the keys OSWorld's
// profile getters read, and Bookmarks' roots, with values of every JSON
// type.
func randomPreferences(rng *rand.Rand) []byte {
	pick := func(l ...string) string { return l[rng.IntN(len(l))] }
	scalar := func() string {
		return pick("null", "true", "false", "0", "1", "2", "5", "5.0", "4", "-0.0", "2.7", `""`, `"x"`, `"Bing"`, `"Thomas"`,
			`"5"`, `"0"`, `"dark"`, `" Light "`, `"2"`, `"system"`, "[]", "[1]", "{}", `{"a": 1}`)
	}
	// object writes the members of fields chosen at random (a field's
	// value made when it is written), sometimes one twice, in random
	// order; else, at random, another JSON value.
	var object func(fields map[string]func() string) string
	object = func(fields map[string]func() string) string {
		if rng.IntN(8) == 0 {
			return scalar()
		}
		var members []string
		for k, v := range fields {
			for range rng.IntN(3) {
				members = append(members, fmt.Sprintf("%q: %s", k, v()))
			}
		}
		if rng.IntN(4) == 0 {
			members = append(members, `"other": 1`)
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + strings.Join(members, ", ") + "}"
	}
	extension := func() string {
		return object(map[string]func() string{
			"path": func() string { return pick(`"/home/user/Desktop/helloExtension"`, `"abc/1.0"`, scalar()) },
			"manifest": func() string {
				return object(map[string]func() string{"name": func() string { return pick(`"Zoom"`, `"Momentum"`, scalar()) }})
			},
		})
	}
	settings := func() string {
		if rng.IntN(6) == 0 {
			return scalar()
		}
		var members []string
		for range rng.IntN(5) {
			members = append(members, fmt.Sprintf("%q: %s", pick("aaa", "bbb", "ccc", "ddd", "zzz", "mmm"), extension()))
		}
		return "{" + strings.Join(members, ", ") + "}"
	}
	top := object(map[string]func() string{
		"default_search_provider_data": func() string {
			return object(map[string]func() string{"template_url_data": func() string {
				return object(map[string]func() string{"short_name": scalar})
			}})
		},
		"profile": func() string {
			return object(map[string]func() string{"name": scalar, "default_content_setting_values": scalar})
		},
		"webkit":              func() string { return object(map[string]func() string{"webprefs": scalar}) },
		"enable_do_not_track": scalar,
		"safebrowsing":        func() string { return object(map[string]func() string{"enhanced": scalar, "enabled": scalar}) },
		"session":             func() string { return object(map[string]func() string{"restore_on_startup": scalar}) },
		"extensions": func() string {
			return object(map[string]func() string{"settings": settings, "theme": func() string {
				return object(map[string]func() string{"system_theme": scalar})
			}})
		},
		"browser": func() string {
			return object(map[string]func() string{"theme": func() string {
				return object(map[string]func() string{"color_scheme2": scalar, "color_scheme": scalar})
			}})
		},
		"roots": scalar,
	})
	switch rng.IntN(40) {
	case 0:
		return nil
	case 1:
		return []byte(top[:len(top)/2])
	case 2:
		return []byte(" \n" + top + "\n")
	}
	return []byte(top)
}
