package metric

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/pyre"
)

// OSWorld's metrics compare getter results with Python's operators, whose
// meaning differs from Go's reflect.DeepEqual: True == 1 == 1.0, `in`
// is a substring test on strings and a membership test on lists, str()
// renders None as "None". The helpers here give those operators to the
// values metrics receive (JSON-decoded rules, getter results).

// errPyType stands for a Python TypeError: the Python metric would have
// raised, and the task cannot be judged by it.
var errPyType = errors.New("operands of unsupported types")

// pyNumber returns v as a float64 when Python treats it as a number
// (bool included, as True == 1).
func pyNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case bool:
		return Bool(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	}
	return 0, false
}

// pyList returns v as a list when it is a Go slice of any element type.
func pyList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// pyDict returns v as a string-keyed map.
func pyDict(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// PyEqual is Python's == over JSON-like values.
func PyEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if x, ok := a.(PyEqualer); ok {
		return x.PyEqual(b)
	}
	if y, ok := b.(PyEqualer); ok {
		return y.PyEqual(a)
	}
	if x, ok := pyNumber(a); ok {
		y, ok := pyNumber(b)
		return ok && x == y
	}
	if x, ok := a.(string); ok {
		y, ok := b.(string)
		return ok && x == y
	}
	if x, ok := pyList(a); ok {
		y, ok := pyList(b)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !PyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if x, ok := pyDict(a); ok {
		y, ok := pyDict(b)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !PyEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// PyIn is Python's `needle in container`: a substring test on strings, a
// membership test on lists, a key test on dicts; any other container is
// a TypeError.
func PyIn(needle, container any) (bool, error) {
	if s, ok := container.(string); ok {
		n, ok := needle.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires a string: %w", errPyType)
		}
		return strings.Contains(s, n), nil
	}
	if l, ok := pyList(container); ok {
		return slices.ContainsFunc(l, func(e any) bool { return PyEqual(needle, e) }), nil
	}
	if m, ok := pyDict(container); ok {
		k, ok := needle.(string)
		if !ok {
			if _, num := pyNumber(needle); num || needle == nil {
				return false, nil
			}
			return false, fmt.Errorf("unhashable key: %w", errPyType)
		}
		_, in := m[k]
		return in, nil
	}
	return false, fmt.Errorf("%T is not a container: %w", container, errPyType)
}

// pyIter is what a Python for loop over v visits: a list's elements, a
// string's characters, a dict's keys; None (a key the rules lack, which
// OSWorld reads with a [] default) visits nothing.
func pyIter(v any) ([]any, error) {
	if v == nil {
		return nil, nil
	}
	if s, ok := v.(string); ok {
		var out []any
		for _, r := range s {
			out = append(out, string(r))
		}
		return out, nil
	}
	if l, ok := pyList(v); ok {
		return l, nil
	}
	if m, ok := pyDict(v); ok {
		out := make([]any, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not iterable: %w", v, errPyType)
}

// PyCompare is Python's ordering of two values: -1, 0 or 1; an error for
// types Python cannot order (a str and an int, a dict).
func PyCompare(a, b any) (int, error) {
	if x, ok := pyNumber(a); ok {
		if y, ok := pyNumber(b); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			// Python orders strings by code point, as Go's byte order of
			// UTF-8 does.
			return strings.Compare(x, y), nil
		}
	}
	x, ok1 := pyList(a)
	y, ok2 := pyList(b)
	if ok1 && ok2 {
		for i := 0; i < len(x) && i < len(y); i++ {
			if PyEqual(x[i], y[i]) {
				continue
			}
			return PyCompare(x[i], y[i])
		}
		return cmpInt(len(x), len(y)), nil
	}
	return 0, fmt.Errorf("ordering %T and %T: %w", a, b, errPyType)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pySorted is Python's sorted(v): a list's elements in order, a string's
// characters, a dict's keys; an error when Python raises.
func pySorted(v any) ([]any, error) {
	var out []any
	switch x := v.(type) {
	case string:
		for _, r := range x {
			out = append(out, string(r))
		}
	default:
		if l, ok := pyList(v); ok {
			out = slices.Clone(l)
		} else if m, ok := pyDict(v); ok {
			for k := range m {
				out = append(out, k)
			}
		} else {
			return nil, fmt.Errorf("sorted(%T): %w", v, errPyType)
		}
	}
	var err error
	slices.SortStableFunc(out, func(a, b any) int {
		c, e := PyCompare(a, b)
		if e != nil && err == nil {
			err = e
		}
		return c
	})
	return out, err
}

// PyStr is Python's str(v) for JSON-like values.
func PyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pyRepr is Python's repr(v) for JSON-like values.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return pyReprString(x)
	case float64:
		return PyFloatRepr(x)
	case float32:
		return PyFloatRepr(float64(x))
	case int, int64, int32, uint64, uint32:
		return fmt.Sprint(x)
	}
	if l, ok := pyList(v); ok {
		parts := make([]string, len(l))
		for i, e := range l {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if m, ok := pyDict(v); ok {
		// Python keeps insertion order, which a decoded Go map lost: sorted
		// keys are the closest stable rendering.
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyReprString(k) + ": " + pyRepr(m[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// PyFloatRepr renders a float as Python's repr does: the shortest digits
// that round-trip, fixed notation for exponents in [-4, 16), a ".0" on
// integral values.
func PyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}

// pyReprString quotes a string as Python's repr does: single quotes
// unless the string holds a single quote and no double quote.
func pyReprString(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0x7f && !unicode.IsPrint(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// PyIsSpace is Python's str.isspace for one character (it counts the
// ASCII separators 0x1c-0x1f, which Go's unicode.IsSpace does not).
func PyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// PyBasename is Python's os.path.basename: what follows the last slash
// (empty for a trailing slash, unlike path.Base).
func PyBasename(p string) string {
	return p[strings.LastIndex(p, "/")+1:]
}

// PyStrip is Python's str.strip() without arguments.
func PyStrip(s string) string { return strings.TrimFunc(s, PyIsSpace) }

// pySplit is Python's str.split() without arguments.
func pySplit(s string) []string { return strings.FieldsFunc(s, PyIsSpace) }

// errUndecodable is a file Python's open() in text mode could not read.
var errUndecodable = errors.New("file is not UTF-8 text")

// ReadPyText reads a getter's local file as Python's open(path).read()
// does: UTF-8, universal newlines ("\r\n" and "\r" read as "\n"). ok is
// false when v is not a path or no file is there (Python's None). A file
// that is not UTF-8 is an error, as Python's UnicodeDecodeError; metrics
// score it 0.
func ReadPyText(v any) (string, bool, error) {
	s, ok, err := ReadText(v)
	if err != nil || !ok {
		return "", ok, err
	}
	if !utf8.ValidString(s) {
		return "", true, fmt.Errorf("%v: %w", v, errUndecodable)
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n"), true, nil
}

// readPyFile is ReadPyText for a metric that scores a missing or
// undecodable file 0 (ok false, the latter noted); any other read failure
// is an error.
func readPyFile(ctx context.Context, v any) (string, bool, error) {
	text, ok, err := ReadPyText(v)
	if errors.Is(err, errUndecodable) {
		Notef(ctx, "%v", err)
		return "", false, nil
	}
	if !ok {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return text, true, nil
}

// pyLines splits text as iterating over a Python file does: each line
// keeps its "\n".
func pyLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// SplitLines is Python's str.splitlines(): it breaks at \n, \r, \r\n,
// and also at \v, \f, the 0x1c-0x1e separators, NEL and the Unicode line
// and paragraph separators, and drops no empty line but the last.
func SplitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, s[start:i])
			i += n
			start = i
		case '\r':
			out = append(out, s[start:i])
			i += n
			if i < len(s) && s[i] == '\n' {
				i++
			}
			start = i
		default:
			i += n
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// ErrPyRaises marks an error of MatchValueToRule that stands for the
// Python function raising (a KeyError, TypeError, NotImplementedError...),
// as opposed to a pattern this package's regex engine cannot run.
// OSWorld's callers differ in what a raise scores, so they tell them apart.
var ErrPyRaises = errors.New("the Python function raises here")

// RuleErr is what a caller that scores a Python raise 0 returns for an
// error of MatchValueToRule: nil for one wrapping ErrPyRaises, err itself
// for a pattern that could not be compiled or run to its end (a task
// file's mistake, a construct regexp2 lacks, a match past
// pyre.MatchTimeout, where Python's re would still be backtracking).
// Those are no score OSWorld would give, so the evaluation fails. A raise
// is noted as the reason for the 0.
func RuleErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrPyRaises) {
		Notef(ctx, "%v", err)
		return nil
	}
	return err
}

// PyEqualer is a value with its own Python ==, as a library's objects
// have (openpyxl's colours and hyperlinks): PyEqual asks it on whichever
// side it stands.
type PyEqualer interface {
	PyEqual(other any) bool
}

// MatchValueToRule is OSWorld's _match_value_to_rule (metrics/utils.py):
// rule {"method", "ref"} where method is "re" with optional flags
// ("re.S", "re.I.M"), one of eq ne le lt ge gt, "approx:THRESHOLD",
// "range.XY" with X, Y in {e, t}, or "str_list_eq"/"str_set_eq". The
// spreadsheet_range method works on openpyxl's cell ranges and is left
// to the table family. An error wrapping ErrPyRaises stands for the Python
// function raising; any other error is a pattern that could not be run.
func MatchValueToRule(value any, rule map[string]any) (bool, error) {
	method, ok := rule["method"].(string)
	if !ok {
		return false, fmt.Errorf("rule without a method: %w", ErrPyRaises)
	}
	ref, hasRef := rule["ref"]
	if !hasRef {
		// Every method reads rule["ref"] (a KeyError), or raises before.
		return false, fmt.Errorf("rule without a ref: %w", ErrPyRaises)
	}
	switch {
	case strings.HasPrefix(method, "re"):
		var flags []pyre.Flag
		for _, f := range strings.Split(method, ".")[1:] {
			fl, ok := reFlags[f]
			if !ok {
				return false, fmt.Errorf("unknown re flag %q: %w", f, ErrPyRaises)
			}
			flags = append(flags, fl)
		}
		p, ok1 := ref.(string)
		s, ok2 := value.(string)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("re.search on %T: %w: %w", value, ErrPyRaises, errPyType)
		}
		re, err := pyre.Compile(p, flags...)
		if err != nil {
			return false, fmt.Errorf("pattern %q: %w", p, err)
		}
		m, err := re.Search(s)
		return m != nil, err
	case method == "eq":
		return PyEqual(value, ref), nil
	case method == "ne":
		return !PyEqual(value, ref), nil
	case method == "le", method == "lt", method == "ge", method == "gt":
		c, err := PyCompare(value, ref)
		if err != nil {
			return false, fmt.Errorf("%s: %w: %w", method, ErrPyRaises, err)
		}
		return map[string]bool{"le": c <= 0, "lt": c < 0, "ge": c >= 0, "gt": c > 0}[method], nil
	case strings.HasPrefix(method, "approx"):
		// float(method.split(":")[1]): the second field, whatever follows.
		fields := strings.Split(method, ":")
		if len(fields) < 2 {
			return false, fmt.Errorf("approx method %q without a threshold: %w", method, ErrPyRaises)
		}
		threshold, err := PyFloat(fields[1])
		if err != nil {
			return false, fmt.Errorf("approx method %q without a threshold: %w", method, ErrPyRaises)
		}
		// float(value) first: a value that is no number is False before
		// the ref is looked at.
		var f float64
		switch x := value.(type) {
		case string:
			if f, err = PyFloat(x); err != nil {
				return false, nil
			}
		default:
			if f, ok = pyNumber(x); !ok {
				return false, nil
			}
		}
		r, ok := pyNumber(ref)
		if !ok {
			return false, fmt.Errorf("approx ref %T: %w: %w", ref, ErrPyRaises, errPyType)
		}
		return math.Abs(f-r) <= threshold, nil
	case strings.HasPrefix(method, "range.") && len(method) >= 8:
		// `l<X>(ref[0], value) and l<Y>(value, ref[1])`: the right side is
		// not looked at once the left one is False.
		side := func(op byte, a, b any) (bool, error) {
			if op != 'e' && op != 't' {
				return false, fmt.Errorf("range method %q: %w", method, ErrPyRaises)
			}
			c, err := PyCompare(a, b)
			if err != nil {
				return false, fmt.Errorf("%s: %w: %w", method, ErrPyRaises, err)
			}
			return c < 0 || (op == 'e' && c == 0), nil
		}
		// ref[0], then ref[1] only when the left side holds: an IndexError
		// or a ref that is no list raises where Python reads it.
		lim := func(i int) (any, error) {
			if lims, ok := pyList(ref); ok && i < len(lims) {
				return lims[i], nil
			}
			return nil, fmt.Errorf("range ref %v has no item %d: %w", PyStr(ref), i, ErrPyRaises)
		}
		if method[6] != 'e' && method[6] != 't' {
			return false, fmt.Errorf("range method %q: %w", method, ErrPyRaises)
		}
		lo, err := lim(0)
		if err != nil {
			return false, err
		}
		if l, err := side(method[6], lo, value); err != nil || !l {
			return false, err
		}
		if method[7] != 'e' && method[7] != 't' {
			return false, fmt.Errorf("range method %q: %w", method, ErrPyRaises)
		}
		hi, err := lim(1)
		if err != nil {
			return false, err
		}
		return side(method[7], value, hi)
	case method == "str_list_eq", method == "str_set_eq":
		s, ok := value.(string)
		if !ok {
			return false, fmt.Errorf("%s on %T: %w: %w", method, value, ErrPyRaises, errPyType)
		}
		got := strings.Split(strings.Trim(s, `"'`), ",")
		var want []string
		switch r := ref.(type) {
		case string:
			// list(str) is the string's characters.
			for _, c := range r {
				want = append(want, string(c))
			}
		default:
			refs, ok := pyList(ref)
			if !ok {
				return false, fmt.Errorf("%s ref %T: %w: %w", method, ref, ErrPyRaises, errPyType)
			}
			for _, e := range refs {
				es, ok := e.(string)
				if !ok {
					// A non-string never equals one of the value's strings.
					return false, nil
				}
				want = append(want, es)
			}
		}
		if method == "str_list_eq" {
			return slices.Equal(got, want), nil
		}
		slices.Sort(got)
		slices.Sort(want)
		return slices.Equal(slices.Compact(got), slices.Compact(want)), nil
	}
	return false, fmt.Errorf("rule method %q is not supported: %w", method, ErrPyRaises)
}

// reFlags are the names `re.<FLAG>` methods use.
var reFlags = map[string]pyre.Flag{
	"I": pyre.IgnoreCase, "IGNORECASE": pyre.IgnoreCase,
	"M": pyre.Multiline, "MULTILINE": pyre.Multiline,
	"S": pyre.DotAll, "DOTALL": pyre.DotAll,
	"X": pyre.Verbose, "VERBOSE": pyre.Verbose,
	// Unicode matching is Python 3's default for str patterns.
	"U": 0, "UNICODE": 0,
}

// MatchRecord is OSWorld's _match_record: every key of pattern is in item
// with an equal value.
func MatchRecord(pattern, item map[string]any) bool {
	for k, v := range pattern {
		iv, ok := item[k]
		if !ok || !PyEqual(iv, v) {
			return false
		}
	}
	return true
}

// fileExists tells whether a getter's path names an existing file.
func fileExists(v any) bool {
	p, ok := v.(string)
	if !ok || p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// PyDecodeUTF8 is Python's bytes.decode("utf-8", "replace"): each maximal
// part of an invalid sequence (a lead byte and the continuation bytes
// that may follow it) becomes one U+FFFD. A surrogate encoded as ED A0 80
// is three. utf8.DecodeRune alone would make two of E2 82, where Python
// makes one.
func PyDecodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	s.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			s.Write(b[:n])
			b = b[n:]
			continue
		}
		// The second byte's range depends on the lead (Unicode's table
		// of well-formed sequences); the rest are 80..BF.
		lo, hi, need := byte(0x80), byte(0xbf), 0
		switch c := b[0]; {
		case c >= 0xc2 && c <= 0xdf:
			need = 1
		case c == 0xe0:
			lo, need = 0xa0, 2
		case c == 0xed:
			hi, need = 0x9f, 2
		case c >= 0xe1 && c <= 0xef:
			need = 2
		case c == 0xf0:
			lo, need = 0x90, 3
		case c == 0xf4:
			hi, need = 0x8f, 3
		case c >= 0xf1 && c <= 0xf3:
			need = 3
		}
		n = 1
		for k := 1; k <= need && n < len(b); k++ {
			if b[n] < lo || b[n] > hi {
				break
			}
			lo, hi = 0x80, 0xbf
			n++
		}
		s.WriteRune(utf8.RuneError)
		b = b[n:]
	}
	return s.String()
}
