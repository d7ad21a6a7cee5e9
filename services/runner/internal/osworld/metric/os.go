package metric

import (
	"context"
	"fmt"
	"strings"
)

// The metrics of OSWorld's metrics/basic_os.py: desktop settings read
// through commands in the guest.

// metricIsUTC0 checks `timedatectl status` output: its fourth line (the
// time zone) ends with "+0000)". The line is not trimmed, as in OSWorld.
func metricIsUTC0(_ context.Context, result, _ any, _ bool, _ map[string]any) (float64, error) {
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) < 4 {
		return 0, nil
	}
	return Bool(strings.HasSuffix(lines[3], "+0000)")), nil
}

// metricGnomeFavoriteApps reads `gsettings get org.gnome.shell
// favorite-apps` output (a Python-style list of strings, which OSWorld
// evals) and needs the same apps as rules["expected"], in any order.
func metricGnomeFavoriteApps(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	s, ok := result.(string)
	if !ok {
		return 0, nil
	}
	apps, err := parseStringList(s)
	if err != nil {
		return 0, Because(ctx, err)
	}
	want, _ := pyList(r["expected"])
	return Bool(sameSet(apps, want)), nil
}

// sameSet is OSWorld's len(a) == len(b) and set(a) == set(b).
func sameSet(got []string, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	g := map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	w := map[string]bool{}
	for _, e := range want {
		s, ok := e.(string)
		if !ok {
			return false
		}
		w[s] = true
	}
	if len(g) != len(w) {
		return false
	}
	for s := range g {
		if !w[s] {
			return false
		}
	}
	return true
}

// parseStringList parses a Python list literal of string literals, as
// gsettings prints one: ['a.desktop', "b's.desktop"]. Anything else
// (GVariant's "@as []" included) is an error, as Python's eval raises.
func parseStringList(s string) ([]string, error) {
	s = PyStrip(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("not a list literal")
	}
	body := s[1 : len(s)-1]
	var out []string
	i := 0
	skip := func() {
		for i < len(body) && PyIsSpace(rune(body[i])) {
			i++
		}
	}
	for {
		skip()
		if i >= len(body) {
			return out, nil
		}
		q := body[i]
		if q != '\'' && q != '"' {
			return nil, fmt.Errorf("list element is not a string literal")
		}
		i++
		var b strings.Builder
		closed := false
		for i < len(body) {
			c := body[i]
			if c == '\\' && i+1 < len(body) {
				switch n := body[i+1]; n {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\', '\'', '"':
					b.WriteByte(n)
				default:
					b.WriteByte('\\')
					b.WriteByte(n)
				}
				i += 2
				continue
			}
			i++
			if c == q {
				closed = true
				break
			}
			b.WriteByte(c)
		}
		if !closed {
			return nil, fmt.Errorf("unterminated string literal")
		}
		out = append(out, b.String())
		skip()
		if i >= len(body) {
			return out, nil
		}
		if body[i] != ',' {
			return nil, fmt.Errorf("list elements not separated by commas")
		}
		i++
	}
}

// metricMovedJPGs needs the names of a directory's entries (the
// list_directory getter's tree: {"children": [{"name": ...}]}) to be
// rules["expected"], in any order.
func metricMovedJPGs(_ context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	tree, ok := pyDict(result)
	if !ok {
		return 0, nil
	}
	children, ok := pyList(tree["children"])
	if !ok {
		return 0, nil
	}
	var names []string
	for _, c := range children {
		node, ok := pyDict(c)
		if !ok {
			return 0, nil
		}
		name, ok := node["name"].(string)
		if !ok {
			return 0, nil
		}
		names = append(names, name)
	}
	want, _ := pyList(r["expected"])
	return Bool(sameSet(names, want)), nil
}

// metricInClipboard is is_in_vm_clickboard, whose arguments OSWorld's
// task swaps: the rules come as the result and the clipboard (the output
// of xsel) as the expected value. Every expected string must be in it.
func metricInClipboard(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(result)
	if err != nil {
		return 0, err
	}
	out, ok := expected.(string)
	if !ok {
		return 0, nil
	}
	want := []any{r["expected"]}
	if l, ok := pyList(r["expected"]); ok {
		want = l
	}
	for _, w := range want {
		if in, err := PyIn(w, out); err != nil || !in {
			return 0, Because(ctx, err)
		}
	}
	return 1, nil
}
