package media

import (
	"context"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// The configuration checks of gimp.py (gimprc, sessionrc) and vlc.py
// (vlcrc). OSWorld reads these files line by line with substring tests; a
// missing file, or bytes that are not UTF-8, raise there and score 0 here.

// readUTF8 reads a getter's file as OSWorld's .read().decode('utf-8');
// err is set only for a file over the size cap, and a file that does not
// read or decode is noted.
func readUTF8(ctx context.Context, v any) (string, bool, error) {
	text, ok, err := metric.ReadText(v)
	if err != nil || !ok {
		return "", false, metric.Because(ctx, err)
	}
	if !utf8.ValidString(text) {
		metric.Notef(ctx, "%v is not UTF-8: Python raises decoding it", v)
		return "", false, nil
	}
	return text, true, nil
}

// rulesAndText reads the rules and the config file's text; ok is false
// when the file is missing, unreadable or not UTF-8, which OSWorld scores
// 0, and err is set for a file over the size cap, which is not scored.
func rulesAndText(ctx context.Context, result, expected any) (rule map[string]any, text string, ok bool, err error) {
	rule, err = metric.Rules(expected)
	if err != nil {
		return nil, "", false, err
	}
	text, ok, err = readUTF8(ctx, result)
	return rule, text, ok, err
}

// pyStr is Python's str() of a rule value that JSON gave as a number, the
// way OSWorld turns an int rule into the string it compares.
func pyStr(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return strconv.FormatInt(int64(t), 10), true
		}
		return strconv.FormatFloat(t, 'g', -1, 64), true
	case bool:
		if t {
			return "True", true
		}
		return "False", true
	}
	return "", false
}

// lastValue returns the value after the last '=' of the last line
// containing key, or def: vlc.py's scan, which also reads commented-out
// lines ("#qt-bgcone=1") because it tests for a substring.
func lastValue(text, key, def string) string {
	v := def
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, key) {
			parts := strings.Split(line, "=")
			v = metric.PyStrip(parts[len(parts)-1])
		}
	}
	return v
}

// vlcValueMetric builds check_qt_bgcone and its siblings: the vlcrc value
// of key (default def) equals str(rules[ruleKey]).
func vlcValueMetric(key, ruleKey, def string) metric.Func {
	return func(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
		rule, text, ok, err := rulesAndText(ctx, result, expected)
		if err != nil || !ok {
			return 0, err
		}
		want, ok := pyStr(rule[ruleKey])
		if !ok {
			return 0, nil
		}
		return metric.Bool(lastValue(text, key, def) == want), nil
	}
}

// metricGlobalKeyPlayPause is check_global_key_play_pause: "1" when the
// last global-key-play-pause= line has a value, "0" when it is empty or
// absent, compared with str(rules["expected_global_key_play_pause"]).
func metricGlobalKeyPlayPause(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, text, ok, err := rulesAndText(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	want, ok := pyStr(rule["expected_global_key_play_pause"])
	if !ok {
		return 0, nil
	}
	got := "0"
	if lastValue(text, "global-key-play-pause=", "") != "" {
		got = "1"
	}
	return metric.Bool(got == want), nil
}

// metricVLCRecordingsFolder is is_vlc_recordings_folder: the first
// uncommented line containing input-record-path decides, by its value
// after the last '='.
func metricVLCRecordingsFolder(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, text, ok, err := rulesAndText(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	want, ok := rule["recording_file_path"].(string)
	if !ok {
		return 0, nil
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || metric.PyStrip(line) == "" {
			continue
		}
		if strings.Contains(line, "input-record-path") {
			parts := strings.Split(line, "=")
			return metric.Bool(metric.PyStrip(parts[len(parts)-1]) == want), nil
		}
	}
	return 0, nil
}

// defaultSliderColours is VLC's qt-slider-colours default, which OSWorld
// assumes when the key is absent.
const defaultSliderColours = "153;210;153;20;210;20;255;199;15;245;39;29"

// metricQtSliderColours is check_qt_slider_colours: type "match" compares
// the value with rules["expected_qt_slider_colours"]; type "blackish"
// needs every complete RGB triple below 100 in each component.
func metricQtSliderColours(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, text, ok, err := rulesAndText(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	v := lastValue(text, "qt-slider-colours", defaultSliderColours)
	switch rule["type"] {
	case "match":
		want, _ := rule["expected_qt_slider_colours"].(string)
		return metric.Bool(v == want), nil
	case "blackish":
		var vals []int64
		for _, f := range strings.Split(v, ";") {
			n, err := metric.PyInt(f, 10)
			if err != nil {
				return 0, metric.Because(ctx, err)
			}
			vals = append(vals, n)
		}
		for i := 0; i+2 < len(vals); i += 3 {
			if vals[i] >= 100 || vals[i+1] >= 100 || vals[i+2] >= 100 {
				return 0, nil
			}
		}
		return 1, nil
	}
	// OSWorld returns None for another type.
	return 0, nil
}

// metricVLCFullscreen is is_vlc_fullscreen: the window size equals the
// screen size.
func metricVLCFullscreen(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	a, ok1 := result.(map[string]any)
	b, ok2 := expected.(map[string]any)
	if !ok1 || !ok2 {
		return 0, nil
	}
	for _, k := range []string{"width", "height"} {
		va, okA := a[k]
		vb, okB := b[k]
		if !okA || !okB || !metric.PyEqual(va, vb) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricGIMPConfigStatus is check_config_status: some uncommented line of
// gimprc/sessionrc, stripped of its outer parentheses and split on
// whitespace, starts with rules["key"] (one word, or two) and ends with
// rules["value"]. A blank line of spaces before a match raises in OSWorld
// (it indexes an empty list) and scores 0.
func metricGIMPConfigStatus(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, text, ok, err := rulesAndText(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	value, _ := rule["value"].(string)
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") || line == "\n" {
			continue
		}
		s := strings.TrimRight(strings.TrimLeft(metric.PyStrip(line), "("), ")\n")
		items := strings.FieldsFunc(s, metric.PyIsSpace)
		if len(items) == 0 {
			return 0, nil
		}
		switch k := rule["key"].(type) {
		case string:
			if items[0] == k && items[len(items)-1] == value {
				return 1, nil
			}
		case []any:
			if len(k) == 2 && items[0] == k[0] {
				if len(items) < 2 {
					// items[1] raises in OSWorld.
					return 0, nil
				}
				if items[1] == k[1] && items[len(items)-1] == value {
					return 1, nil
				}
			}
		}
	}
	return 0, nil
}

// pyURL is the part of urllib.parse.urlparse is_vlc_playing uses.
type pyURL struct{ netloc, path string }

func parsePyURL(s string) pyURL {
	if i := strings.Index(s, ":"); i > 0 && validScheme(s[:i]) {
		s = s[i+1:]
	}
	var u pyURL
	if strings.HasPrefix(s, "//") {
		rest := s[2:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		u.netloc, s = rest[:end], rest[end:]
	}
	if end := strings.IndexAny(s, "?#"); end >= 0 {
		s = s[:end]
	}
	// urlparse also splits ";params" off the last path segment.
	if i := strings.LastIndex(s, "/"); strings.Contains(s[i+1:], ";") {
		s = s[:i+1+strings.Index(s[i+1:], ";")]
	}
	u.path = s
	return u
}

func validScheme(s string) bool {
	for i, r := range s {
		isAlpha := r < 128 && unicode.IsLetter(r)
		if i == 0 && !isAlpha {
			return false
		}
		if !isAlpha && !(r >= '0' && r <= '9') && r != '+' && r != '-' && r != '.' {
			return false
		}
	}
	return true
}

// metricVLCPlaying is is_vlc_playing over VLC's HTTP status.xml: state is
// "playing" and the first non-empty meta entry names the expected file
// (rules type file_name) or URL (type url).
func metricVLCPlaying(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, text, ok, err := rulesAndText(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	root, err := parseXML(text)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	state := root.find("state")
	if state == nil || state.text == nil || *state.text != "playing" {
		return 0, nil
	}
	first := func(paths []string) (string, bool) {
		for _, p := range paths {
			if e := root.find(p); e != nil && e.text != nil && *e.text != "" {
				return *e.text, true
			}
		}
		return "", false
	}
	meta := func(name string) string {
		return `information/category[@name="meta"]/info[@name="` + name + `"]`
	}
	switch rule["type"] {
	case "file_name":
		info, ok := first([]string{meta("filename"), meta("title"), meta("uri"), meta("location"), meta("name")})
		if !ok {
			return 0, nil
		}
		want, _ := rule["file_name"].(string)
		if metric.PyBasename(info) == want || strings.HasSuffix(info, want) {
			return 1, nil
		}
		if strings.Contains(info, want) && (strings.HasSuffix(info, "/"+want) || strings.HasSuffix(info, `\`+want)) {
			return 1, nil
		}
		return 0, nil
	case "url":
		info, ok := first([]string{meta("url"), meta("URI"), meta("location"), meta("title"), meta("filename"),
			`information/category[@name="Stream 0"]/info[@name="Codec"]`,
			`information/category[@name="Stream 0"]/info[@name="Type"]`,
			`information/category[@name="Stream 0"]/info[@name="Language"]`})
		if !ok {
			return 0, nil
		}
		want, _ := rule["url"].(string)
		if strings.Contains(info, want) {
			return 1, nil
		}
		exp := parsePyURL(want)
		if info == metric.PyBasename(exp.path) {
			return 1, nil
		}
		if strings.Contains(info, "://") {
			act := parsePyURL(info)
			if exp.netloc == act.netloc && strings.Contains(act.path, exp.path) {
				return 1, nil
			}
		}
		return 0, nil
	}
	return 0, nil
}
