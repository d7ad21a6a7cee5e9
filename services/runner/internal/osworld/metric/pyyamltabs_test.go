package metric

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// yamlTabDocs makes n YAML documents of the shapes config files take
// (nested block mappings and sequences, flow collections, quoted scalars
// over several lines, block scalars with and without indicators, comments,
// anchors and tags), each with one to three tabs put in at random: in
// place of a space, or before or after one.
func yamlTabDocs(rng *rand.Rand, n int) []string {
	scalars := []string{"x", "Test Account", "a b", "1", "yes", "'q'", "'it''s\n  a'", `"d\"q"`, "\"two\n  lines\"",
		"\"esc\\\n  aped\"", "''", `""`, "a#b", "c # note", "!!str 5", "&a v", "*a", "~", "[1, 2]", "{k: v}",
		"[a, [b, c]]", "{k: [1, 2], 'q': \"r\"}", "[a,#c\n  b]", "2024-01-02", "\"a\\\\\" #c", "'x'#c", "[\"a\"#c\n  ]",
		"{? k : v}", "!!str \"s\"", "&b 'q'", "[&c x, *c]", "a\\b", "'multi\n\n  para'"}
	blocks := []string{"|\n", "|-\n", ">\n", "|2\n", ">+\n", "| # head\n", "|\n\n", "|1-\n", "!!str |\n", "&t >\n"}
	var doc func(b *strings.Builder, indent string, depth int)
	doc = func(b *strings.Builder, indent string, depth int) {
		for k := range 1 + rng.IntN(3) {
			switch r := rng.IntN(10); {
			case r < 1:
				b.WriteString(indent + "# comment " + string(rune('a'+k)) + "\n")
				if rng.IntN(3) == 0 {
					b.WriteString(indent + "? complex" + string(rune('a'+k)) + "\n" + indent + ": " + scalars[rng.IntN(len(scalars))] + "\n")
				}
			case r < 2 && depth < 3:
				b.WriteString(indent + "list" + string(rune('a'+k)) + ":\n")
				in := indent + []string{"", "  "}[rng.IntN(2)]
				for range 1 + rng.IntN(3) {
					if rng.IntN(3) == 0 && depth < 2 {
						b.WriteString(in + "- m: " + scalars[rng.IntN(len(scalars))] + "\n")
						b.WriteString(in + "  n: " + scalars[rng.IntN(len(scalars))] + "\n")
						continue
					}
					b.WriteString(in + "- " + scalars[rng.IntN(len(scalars))] + "\n")
				}
			case r < 4 && depth < 3:
				b.WriteString(indent + "map" + string(rune('a'+k)) + ":\n")
				doc(b, indent+"  ", depth+1)
			case r < 5:
				b.WriteString(indent + "text" + string(rune('a'+k)) + ": " + blocks[rng.IntN(len(blocks))])
				for l := range 1 + rng.IntN(3) {
					b.WriteString(indent + strings.Repeat(" ", 2+rng.IntN(2)*l) + "line " + string(rune('0'+l)) + "\n")
				}
			default:
				b.WriteString(indent + "key" + string(rune('a'+k)) + ": " + scalars[rng.IntN(len(scalars))])
				if rng.IntN(4) == 0 {
					b.WriteString("  # trailing")
				}
				b.WriteString("\n")
			}
		}
	}
	docs := make([]string, n)
	for i := range docs {
		var b strings.Builder
		if rng.IntN(8) == 0 {
			b.WriteString("# head comment\n")
		}
		doc(&b, "", 0)
		text := b.String()
		for range 1 + rng.IntN(3) {
			p := rng.IntN(len(text) + 1)
			switch rng.IntN(3) {
			case 0:
				if j := strings.IndexByte(text[p:], ' '); j >= 0 {
					text = text[:p+j] + "\t" + text[p+j+1:]
					continue
				}
				fallthrough
			default:
				text = text[:p] + "\t" + text[p:]
			}
		}
		if rng.IntN(6) == 0 {
			text = strings.ReplaceAll(text, "\n", "\r\n")
		}
		docs[i] = text
	}
	return docs
}

// yamlPython is /usr/bin/python3 with Debian's python3-yaml (PyYAML 6),
// the loader OSWorld's check_json uses. Without it the test skips, or
// fails under CI.
func yamlPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import yaml").Run(); err != nil {
		const msg = "no /usr/bin/python3 with PyYAML (python3-yaml)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return python
}

// TestTabsAsPyYAML loads 4,000 documents with tabs put in at random here
// and with PyYAML's safe_load, and wants each to load in both or raise in
// both, and the same value where both load.
func TestTabsAsPyYAML(t *testing.T) {
	python := yamlPython(t)
	docs := yamlTabDocs(rand.New(rand.NewPCG(7, 40)), 4000)
	const script = `
import json, sys, yaml
out = []
for text in json.load(sys.stdin):
    try:
        out.append({"value": json.dumps(yaml.safe_load(text), sort_keys=True, default=str)})
    except yaml.YAMLError as e:
        out.append({"raise": str(e).split("\n")[0]})
print(json.dumps(out))
`
	var answers []struct {
		Value *string `json:"value"`
		Raise string  `json:"raise"`
	}
	askPythonWith(t, python, script, docs, &answers)
	if len(answers) != len(docs) {
		t.Fatalf("python3 answered %d documents of %d", len(answers), len(docs))
	}
	var loaded, raised, differ int
	for i, text := range docs {
		a := answers[i]
		got, err := loadPyYAML(text)
		switch {
		case a.Value == nil && err != nil:
			raised++
			continue
		case a.Value == nil:
			t.Errorf("loadPyYAML(%q) = %v; PyYAML raises %q", text, got, a.Raise)
		case err != nil:
			t.Errorf("loadPyYAML(%q): %v; PyYAML loads %s", text, err, *a.Value)
		default:
			loaded++
			var want any
			if err := json.Unmarshal([]byte(*a.Value), &want); err != nil {
				t.Fatal(err)
			}
			if g, w := canonicalJSON(t, got), canonicalJSON(t, want); g != w {
				t.Errorf("loadPyYAML(%q) = %s; PyYAML loads %s", text, g, w)
			}
			continue
		}
		if differ++; differ > 20 {
			t.Fatal("more than 20 differ")
		}
	}
	t.Logf("%d documents loaded in both, %d raised in both", loaded, raised)
	if loaded < 100 || raised < 100 {
		t.Errorf("too few of one kind: %d loaded, %d raised", loaded, raised)
	}
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
