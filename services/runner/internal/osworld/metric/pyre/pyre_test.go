package pyre

import (
	"testing"
	"time"
)

func TestPythonSemantics(t *testing.T) {
	tests := []struct {
		name, pattern, s string
		op               string
		want             bool
	}{
		{"lookahead", `foo(?=bar)`, "xfoobar", "search", true},
		{"negative lookbehind", `(?<!x)foo`, "xfoo", "search", false},
		{"named group", `(?P<y>\d{4})-(?P=y)`, "2024-2024", "fullmatch", true},
		{"backreference", `(a)\1`, "aa", "fullmatch", true},
		{"match anchors at start", `bar`, "foobar", "match", false},
		{"search finds anywhere", `bar`, "foobar", "search", true},
		{"fullmatch needs all", `foo`, "foobar", "fullmatch", false},
		{"unicode digit", `^\d+$`, "١٢٣", "search", true},
		{"unicode space", `a\sb`, "a\u00a0b", "search", true},
		{`\Z is the absolute end`, `foo\Z`, "foo\n", "search", false},
		{"$ before a final newline", `foo$`, "foo\n", "search", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re, err := Compile(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			var m *Match
			switch tt.op {
			case "search":
				m, err = re.Search(tt.s)
			case "match":
				m, err = re.Match(tt.s)
			case "fullmatch":
				m, err = re.FullMatch(tt.s)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m != nil; got != tt.want {
				t.Errorf("%s(%q, %q) matched = %v, want %v", tt.op, tt.pattern, tt.s, got, tt.want)
			}
		})
	}
}

func TestFindAll(t *testing.T) {
	re, err := Compile(`(\w)=(\d)`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := re.FindAll("a=1 b=2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1][0] != "b" || got[1][1] != "2" {
		t.Errorf("FindAll = %v, want [[a 1] [b 2]]", got)
	}
}

func TestIgnoreCase(t *testing.T) {
	re, err := Compile(`ABC`, IgnoreCase)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := re.Search("xabc"); m == nil {
		t.Error("IgnoreCase search did not match")
	}
}

// TestCatastrophicBacktrackingEnds: a pattern that backtracks
// exponentially ends within MatchTimeout.
func TestCatastrophicBacktrackingEnds(t *testing.T) {
	re, err := Compile(`(a+)+$`)
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for range 40 {
		s += "a"
	}
	start := time.Now()
	_, _ = re.Search(s + "!") // a timeout error or an answer: either ends
	if d := time.Since(start); d > 3*MatchTimeout {
		t.Errorf("pathological pattern ran %v, want under %v", d, 3*MatchTimeout)
	}
}
