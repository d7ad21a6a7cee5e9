package metric

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLoadPyYAML: values as PyYAML 6's safe_load gives them, and where it
// raises (each checked with Debian's python3-yaml).
func TestLoadPyYAML(t *testing.T) {
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name, text string
		want       any
		raises     bool
	}{
		{"a key given twice keeps its last value", "a: 1\na: 2\n", m("a", 2.0), false},
		{"a second document raises", "a: 1\n---\nb: 2\n", nil, true},
		{"YAML 1.1 booleans, not when quoted", "a: yes\nb: On\nc: \"yes\"\n", m("a", true, "b", true, "c", "yes"), false},
		{"YAML 1.1 numbers", "t: 1:20\no: 010\ne: 1e3\nf: 1.5e+3\ng: 0x1F\nh: 1_000\n",
			m("t", 80.0, "o", 8.0, "e", "1e3", "f", 1500.0, "g", 31.0, "h", 1000.0), false},
		{"a date", "d: 2024-01-02\n", m("d", YAMLTimestamp("2024-01-02")), false},
		{"a merge, own keys first", "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n",
			m("base", m("x", 1.0, "y", 2.0), "m", m("x", 1.0, "y", 3.0)), false},
		{"a merge of a list, the first mapping first", "m:\n  <<: [{x: 1}, {x: 2, z: 3}]\n", m("m", m("x", 1.0, "z", 3.0)), false},
		{"an int key is not the string key", "1: a\n\"1\": b\n", m("\x001", "a", "1", "b"), false},
		{"an empty stream", "", nil, false},
		{"a null document", "~\n", nil, false},
		{"nulls and infinities", "a: .inf\nb: -.Inf\nc: null\nd: ~\ne:\n",
			m("a", math.Inf(1), "b", math.Inf(-1), "c", nil, "d", nil, "e", nil), false},
		{"the value tag raises", "a: =\n", nil, true},
		{"an explicit str", "a: !!str 1\n", m("a", "1"), false},
		{"an unknown tag raises", "a: !foo x\n", nil, true},
		{"nested flow", "a: [1, {b: 2}]\n", m("a", []any{1.0, m("b", 2.0)}), false},
		{"a tab between key and value raises", "a:\tb\n", nil, true},
		{"a tab after a value raises", "a: b\t\n", nil, true},
		{"a tab before a comment raises", "\t# c\na: b\n", nil, true},
		{"a tab that indents a block scalar raises", "a: |\n\tx\n", nil, true},
		{"an anchor given twice raises", "a: &x 1\nb: &x 2\n", nil, true},
		{"a tab in a comment", "a: b # c\td\n", m("a", "b"), false},
		{"a tab in a quoted scalar", "a: 'x\ty'\n", m("a", "x\ty"), false},
		{"a tab escaped in a double-quoted scalar", "a: \"x\\\ty\"\n", m("a", "x\ty"), false},
		{"a tab before a quoted scalar's line break is folded away", "a: 'p\t\n  q'\n", m("a", "p q"), false},
		{"a tab that starts a block scalar's text (yaml.v3 refuses it)", "a: |\n  \tx\n  y\n", m("a", "\tx\ny\n"), false},
		{"a folded line that starts with a tab is kept", "a: >\n  x\n  \ty\n  z\n", m("a", "x\n\ty\nz\n"), false},
		{"a comment after a flow indicator", "a: [b,#c\td\n  e]\n", m("a", []any{"b", "e"}), false},
		{"a comment right after a quoted scalar", "a: 'x'#c\td\n", m("a", "x"), false},
		{"an int past 64 bits", "n: 123456789012345678901234\nh: 0x1_0000_0000_0000_0000\n",
			m("n", 123456789012345678901234.0, "h", 18446744073709551616.0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadPyYAML(tt.text)
			if tt.raises {
				if err == nil {
					t.Errorf("loadPyYAML(%q) = %#v; want an error", tt.text, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("loadPyYAML(%q) = %#v, %v; want %#v", tt.text, got, err, tt.want)
			}
		})
	}
}

// TestLoadPyYAMLUnsupported: a type safe_load makes and this loader does
// not is ErrYAMLUnsupported, which check_json returns (the evaluation
// fails) instead of scoring 0; a tag PyYAML refuses is a score of 0.
func TestLoadPyYAMLUnsupported(t *testing.T) {
	for _, text := range []string{"a: !!set {x: null}\n", "a: !!omap [{x: 1}]\n", "a: !!pairs [{x: 1}]\n", "a: !!binary aGk=\n"} {
		if _, err := loadPyYAML(text); !errors.Is(err, ErrYAMLUnsupported) {
			t.Errorf("loadPyYAML(%q) error = %v; want ErrYAMLUnsupported", text, err)
		}
		p := filepath.Join(t.TempDir(), "x.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		rules := map[string]any{"expect": []any{map[string]any{"key": []any{"a"}, "method": "eq", "ref": "x"}}}
		if got, err := General()["check_json"].Fn(context.Background(), p, rules, true, map[string]any{"is_yaml": true}); !errors.Is(err, ErrYAMLUnsupported) {
			t.Errorf("check_json(%q) = %v, %v; want an evaluation failure", text, got, err)
		}
	}
	if _, err := loadPyYAML("a: !!str [1]\n"); !errors.Is(err, errPyYAML) {
		t.Errorf("a !!str sequence: %v; want errPyYAML", err)
	}
}

// TestLoadPyYAMLBounds: aliases are shared, not copied (a billion laughs
// is small), and a list holding itself ends at the depth bound.
func TestLoadPyYAMLBounds(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	if _, err := loadPyYAML(laughs); err != nil {
		t.Errorf("a billion laughs: %v", err)
	}
	if _, err := loadPyYAML("a: &a [*a]\n"); !errors.Is(err, errPyYAML) {
		t.Errorf("a list holding itself: %v; want errPyYAML", err)
	}
	// Tabs in 100,000 quoted scalars on one line, after characters of two
	// bytes: placing the scalars stays linear in the line's length.
	wide := "a: [" + strings.Repeat("'é\tx', ", 100_000) + "]\n"
	start := time.Now()
	got, err := loadPyYAML(wide)
	if l, _ := got.(map[string]any)["a"].([]any); err != nil || len(l) != 100_000 || l[0] != "é\tx" {
		t.Errorf("100,000 quoted scalars with tabs: %v, %d items", err, len(l))
	}
	t.Logf("100,000 quoted scalars with tabs on one line loaded in %v", time.Since(start))
}

// TestCheckJSONReadsYAMLAsPyYAML: the published is_yaml task reads a
// Jekyll _config.yml; an agent that appends its new name instead of
// editing the old one scores 1 in OSWorld (PyYAML keeps the last value),
// and did not here (yaml.v3 refused the file).
func TestCheckJSONReadsYAMLAsPyYAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "_config.yml")
	config := "name: Old Name\nauthor:\n  name: Old Name\n  email: old@example.com\n  avatar: profile.png\n" +
		"name: Test Account\nauthor:\n  name: Test Account\n  email: Test@gmail.com\n"
	if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := map[string]any{"expect": []any{
		map[string]any{"key": []any{"name"}, "method": "eq", "ref": "Test Account"},
		map[string]any{"key": []any{"author", "name"}, "method": "eq", "ref": "Test Account"},
		map[string]any{"key": []any{"author", "email"}, "method": "eq", "ref": "Test@gmail.com"},
	}}
	got, err := General()["check_json"].Fn(context.Background(), p, rules, true, map[string]any{"is_yaml": true})
	if err != nil || got != 1 {
		t.Errorf("check_json(is_yaml) = %v, %v; want 1", got, err)
	}
}
