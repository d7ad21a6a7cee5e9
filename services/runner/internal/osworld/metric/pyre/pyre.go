// Package pyre matches regular expressions as Python's re module does, for
// the metrics whose task files carry Python patterns: lookarounds,
// backreferences, (?P<name>...) groups, Unicode-aware \d \s \w, and
// re.search / re.match / re.fullmatch anchoring. Go's regexp (RE2) has none
// of the first three, so a pattern valid in OSWorld would fail to compile or
// match differently there.
package pyre

import (
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// MatchTimeout bounds one match: a task's pattern may backtrack
// catastrophically, and a metric must end.
const MatchTimeout = 2 * time.Second

// Flag is a Python re flag.
type Flag int

// Python's re flags that task files use.
const (
	IgnoreCase Flag = 1 << iota // re.I
	Multiline                   // re.M
	DotAll                      // re.S
	Verbose                     // re.X
)

// Regexp is a compiled Python pattern.
type Regexp struct {
	pattern             string
	search, match, full *regexp2.Regexp
}

// Compile compiles a Python pattern.
func Compile(pattern string, flags ...Flag) (*Regexp, error) {
	var opts regexp2.RegexOptions
	for _, f := range flags {
		if f&IgnoreCase != 0 {
			opts |= regexp2.IgnoreCase
		}
		if f&Multiline != 0 {
			opts |= regexp2.Multiline
		}
		if f&DotAll != 0 {
			opts |= regexp2.Singleline
		}
		if f&Verbose != 0 {
			opts |= regexp2.IgnorePatternWhitespace
		}
	}
	p := translate(pattern)
	r := &Regexp{pattern: pattern}
	var err error
	for _, c := range []struct {
		dst  **regexp2.Regexp
		expr string
	}{
		{&r.search, p},
		{&r.match, `\A(?:` + p + `)`},
		{&r.full, `\A(?:` + p + `)\z`},
	} {
		if *c.dst, err = regexp2.Compile(c.expr, opts); err != nil {
			return nil, fmt.Errorf("pattern %q: %v", pattern, err)
		}
		(*c.dst).MatchTimeout = MatchTimeout
	}
	return r, nil
}

// translate rewrites the escapes whose meaning differs between Python and
// the .NET syntax regexp2 speaks: Python's \Z is the absolute end of the
// string, .NET's \z; Python's named backreference (?P=name) is .NET's
// \k<name>, and its named group (?P<name>...) is .NET's (?<name>...).
func translate(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.HasPrefix(p[i:], "(?P<") {
			b.WriteString("(?<")
			i += 3
			continue
		}
		if strings.HasPrefix(p[i:], "(?P=") {
			if end := strings.IndexByte(p[i:], ')'); end > 0 {
				b.WriteString(`\k<` + p[i+4:i+end] + `>`)
				i += end
				continue
			}
		}
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// String returns the pattern as given.
func (r *Regexp) String() string { return r.pattern }

// Search is re.search: a match anywhere; the match is nil when there is none.
func (r *Regexp) Search(s string) (*Match, error) { return find(r.search, s) }

// Match is re.match: a match at the start of s.
func (r *Regexp) Match(s string) (*Match, error) { return find(r.match, s) }

// FullMatch is re.fullmatch: s matches as a whole.
func (r *Regexp) FullMatch(s string) (*Match, error) { return find(r.full, s) }

// FindAll is re.findall: each non-overlapping match's text when the pattern
// has no group, its first group's text when it has one, and every group's
// text (a tuple in Python) when it has several.
func (r *Regexp) FindAll(s string) ([][]string, error) {
	var out [][]string
	m, err := r.search.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = r.search.FindNextMatch(m) {
		groups := m.Groups()
		if len(groups) == 1 {
			out = append(out, []string{m.String()})
			continue
		}
		row := make([]string, 0, len(groups)-1)
		for _, g := range groups[1:] {
			row = append(row, g.String())
		}
		out = append(out, row)
	}
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", r.pattern, err)
	}
	return out, nil
}

// Sub is re.sub with a literal replacement (no group references).
func (r *Regexp) Sub(repl, s string) (string, error) {
	out, err := r.search.ReplaceFunc(s, func(regexp2.Match) string { return repl }, -1, -1)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %v", r.pattern, err)
	}
	return out, nil
}

// Match is one match.
type Match struct{ m *regexp2.Match }

func find(re *regexp2.Regexp, s string) (*Match, error) {
	m, err := re.FindStringMatch(s)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", re.String(), err)
	}
	if m == nil {
		return nil, nil
	}
	return &Match{m}, nil
}

// Group is m.group(i); an unmatched group is "", as Python's None would
// print nothing useful either.
func (m *Match) Group(i int) string {
	if g := m.m.GroupByNumber(i); g != nil {
		return g.String()
	}
	return ""
}

// Named is m.group(name).
func (m *Match) Named(name string) string {
	if g := m.m.GroupByName(name); g != nil {
		return g.String()
	}
	return ""
}
