package metric

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loadPyYAML is PyYAML's yaml.safe_load on text, in the JSON shapes the
// metrics read (map[string]any, []any, string, float64, bool, nil). The
// YAML parser is yaml.v3's, but values are made as PyYAML's SafeLoader
// makes them, since check_json's score follows them:
//
//   - plain scalars resolve by YAML 1.1: yes/no/on/off are booleans, 010 is
//     octal, 1:20 is 80, "1e3" (no dot) is a string, 2024-01-02 a date;
//   - a key given twice keeps its last value (yaml.v3 refuses the file);
//   - a second document is an error (safe_load wants one; yaml.v3 reads
//     the first);
//   - "<<" merges mappings, the mapping's own keys first;
//   - a key that is not a string is kept apart from string keys (PyYAML
//     keeps 1 and "1" apart), under "\x00" and its number (yamlKey).
//
// An empty stream is nil, as safe_load's None. An anchor given twice is an
// error, as in PyYAML's composer, and so is a tab PyYAML's scanner refuses
// (anywhere but in quotes, comments and block scalars: "a:\tb"), though
// yaml.v3 reads on (tabbedYAML). A document using a type safe_load makes
// and this loader does not is ErrYAMLUnsupported.
func loadPyYAML(text string) (any, error) {
	doc, err := decodeOneYAML(text)
	if strings.Contains(text, "\t") {
		// PyYAML's scanner raises on a tab out of place before anything is
		// made, and takes some that yaml.v3 refuses.
		doc, err = tabbedYAML(text, doc, err)
	}
	if err != nil || doc == nil {
		return nil, err
	}
	if err := uniqueAnchors(doc); err != nil {
		return nil, err
	}
	c := yamlConstructor{done: map[*yaml.Node]any{}}
	return c.value(doc, 0)
}

// decodeOneYAML parses text's one document with yaml.v3: nil for an empty
// stream, an error for a second document (safe_load wants one; yaml.v3
// reads the first).
func decodeOneYAML(text string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("expected a single document in the stream: %w", cmp.Or(err, errPyYAML))
	}
	return &doc, nil
}

// uniqueAnchors refuses an anchor given twice in the document, as
// PyYAML's composer does ("found duplicate anchor"); yaml.v3 lets the
// second replace the first.
func uniqueAnchors(doc *yaml.Node) error {
	seen := map[string]bool{}
	stack := []*yaml.Node{doc}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Kind != yaml.AliasNode && n.Anchor != "" {
			if seen[n.Anchor] {
				return fmt.Errorf("found duplicate anchor %q: %w", n.Anchor, errPyYAML)
			}
			seen[n.Anchor] = true
		}
		stack = append(stack, n.Content...)
	}
	return nil
}

// errPyYAML marks a document PyYAML's safe_load raises on.
var errPyYAML = errors.New("PyYAML raises on this document")

// ErrYAMLUnsupported marks a document safe_load reads but this loader does
// not make (the types !!binary, !!set, !!omap and !!pairs): no score here
// would be OSWorld's, so the metric fails the evaluation instead.
var ErrYAMLUnsupported = errors.New("a YAML type this loader does not make")

// maxYAMLDepth bounds nesting (and alias chains): PyYAML recurses too, and
// Python's recursion limit ends it.
const maxYAMLDepth = 1000

type yamlConstructor struct {
	// done holds each node's value once made, so that an anchored node's
	// aliases share it as PyYAML's do (a chain of aliases is no bomb).
	done map[*yaml.Node]any
}

func (c *yamlConstructor) value(n *yaml.Node, depth int) (any, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("YAML nested over %d levels: %w", maxYAMLDepth, errPyYAML)
	}
	if v, ok := c.done[n]; ok {
		return v, nil
	}
	var v any
	var err error
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0], depth+1)
	case yaml.AliasNode:
		return c.value(n.Alias, depth+1)
	case yaml.ScalarNode:
		v, err = scalarValue(n)
	case yaml.SequenceNode:
		if err := checkTag(n, "!!seq"); err != nil {
			return nil, err
		}
		// Not shared before it is whole: a list holding itself through an
		// alias ends at maxYAMLDepth.
		l := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			x, err := c.value(e, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, x)
		}
		v = l
	case yaml.MappingNode:
		v, err = c.mapping(n, depth)
	default:
		return nil, fmt.Errorf("YAML node kind %v: %w", n.Kind, errPyYAML)
	}
	if err != nil {
		return nil, err
	}
	c.done[n] = v
	return v, nil
}

// mapping makes a dict as SafeConstructor does: the "<<" merges first
// (of a list of mappings, the first one winning), then the mapping's own
// pairs in order, a later key replacing an earlier one.
func (c *yamlConstructor) mapping(n *yaml.Node, depth int) (any, error) {
	if err := checkTag(n, "!!map"); err != nil {
		return nil, err
	}
	m := map[string]any{}
	c.done[n] = m
	var merged, own [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			pairs, err := mergePairs(v, depth)
			if err != nil {
				return nil, err
			}
			merged = append(merged, pairs...)
			continue
		}
		own = append(own, [2]*yaml.Node{k, v})
	}
	for _, p := range append(merged, own...) {
		key, err := c.value(p[0], depth+1)
		if err != nil {
			return nil, err
		}
		name, ok := key.(string)
		switch {
		case ok:
		case isYAMLCollection(key):
			return nil, fmt.Errorf("unhashable YAML key: %w", errPyYAML)
		default:
			name = "\x00" + yamlKey(key)
		}
		val, err := c.value(p[1], depth+1)
		if err != nil {
			return nil, err
		}
		m[name] = val
	}
	return m, nil
}

// yamlKey names a key that is not a string as Python hashes it: 1, 1.0
// and True are one key.
func yamlKey(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "1"
		}
		return "0"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e18 {
			return strconv.FormatInt(int64(x), 10)
		}
		return PyFloatRepr(x)
	case YAMLTimestamp:
		return "timestamp " + string(x)
	}
	return pyRepr(v)
}

func isYAMLCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// mergePairs is what "<<: v" merges: v's pairs, or those of each mapping
// of a list, the first mapping's last so that it wins.
func mergePairs(v *yaml.Node, depth int) ([][2]*yaml.Node, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("YAML merges nested over %d levels: %w", maxYAMLDepth, errPyYAML)
	}
	for v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	pairsOf := func(m *yaml.Node) ([][2]*yaml.Node, error) {
		var out [][2]*yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				inner, err := mergePairs(m.Content[i+1], depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, inner...)
				continue
			}
			out = append(out, [2]*yaml.Node{k, m.Content[i+1]})
		}
		return out, nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		return pairsOf(v)
	case yaml.SequenceNode:
		var out [][2]*yaml.Node
		for i := len(v.Content) - 1; i >= 0; i-- {
			m := v.Content[i]
			for m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("a merge of a list holding no mapping: %w", errPyYAML)
			}
			pairs, err := pairsOf(m)
			if err != nil {
				return nil, err
			}
			out = append(out, pairs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a merge of no mapping: %w", errPyYAML)
}

// checkTag refuses an explicit tag on a collection other than want: one
// SafeLoader makes and this loader does not, or one it raises on.
func checkTag(n *yaml.Node, want string) error {
	switch {
	case n.Style&yaml.TaggedStyle == 0 || n.Tag == want:
		return nil
	case n.Tag == "!!set" || n.Tag == "!!omap" || n.Tag == "!!pairs":
		return fmt.Errorf("YAML tag %s: %w", n.Tag, ErrYAMLUnsupported)
	}
	return fmt.Errorf("YAML tag %s: %w", n.Tag, errPyYAML)
}

// PyYAML's implicit resolvers (yaml/resolver.py), YAML 1.1.
var (
	yamlBool  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	yamlFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	yamlInt   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yamlNull  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
	yamlTime  = regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$`)
)

// YAMLTimestamp is a YAML date or time, which PyYAML makes a datetime:
// equal only to the same timestamp, never to a string.
type YAMLTimestamp string

// PyEqual is datetime's ==, on the text.
func (t YAMLTimestamp) PyEqual(other any) bool {
	o, ok := other.(YAMLTimestamp)
	return ok && o == t
}

// scalarValue resolves and makes a scalar as SafeLoader does.
func scalarValue(n *yaml.Node) (any, error) {
	s := n.Value
	tag := ""
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		tag = n.Tag
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return s, nil
	case yamlBool.MatchString(s):
		tag = "!!bool"
	case yamlFloat.MatchString(s):
		tag = "!!float"
	case yamlInt.MatchString(s):
		tag = "!!int"
	case s == "<<":
		tag = "!!merge"
	case yamlNull.MatchString(s):
		tag = "!!null"
	case yamlTime.MatchString(s):
		tag = "!!timestamp"
	case s == "=":
		// tag:yaml.org,2002:value, which SafeLoader cannot construct.
		return nil, fmt.Errorf("YAML value %q: %w", s, errPyYAML)
	default:
		return s, nil
	}
	switch tag {
	case "!!str":
		return s, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(s) {
		case "yes", "true", "on":
			return true, nil
		case "no", "false", "off":
			return false, nil
		}
	case "!!int":
		if f, ok := yamlIntValue(s); ok {
			return f, nil
		}
	case "!!float":
		if f, ok := yamlFloatValue(s); ok {
			return f, nil
		}
	case "!!timestamp":
		return YAMLTimestamp(s), nil
	case "!!binary":
		return nil, fmt.Errorf("YAML tag %s: %w", tag, ErrYAMLUnsupported)
	}
	return nil, fmt.Errorf("YAML %s %q: %w", tag, s, errPyYAML)
}

// yamlIntValue is SafeConstructor.construct_yaml_int, as a float64 (the
// metrics' number; Python's int equals it, at any size).
func yamlIntValue(s string) (float64, bool) {
	s = strings.ReplaceAll(s, "_", "")
	sign := 1.0
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	parse := func(digits string, base int) (float64, bool) {
		n, ok := new(big.Int).SetString(digits, base)
		if !ok {
			return 0, false
		}
		f, _ := new(big.Float).SetInt(n).Float64()
		return sign * f, true
	}
	switch {
	case s == "0":
		return 0, true
	case strings.HasPrefix(s, "0b"):
		return parse(s[2:], 2)
	case strings.HasPrefix(s, "0x"):
		return parse(s[2:], 16)
	case strings.HasPrefix(s, "0"):
		return parse(s[1:], 8)
	case strings.Contains(s, ":"):
		return sexagesimal(s, sign)
	}
	return parse(s, 10)
}

// yamlFloatValue is SafeConstructor.construct_yaml_float.
func yamlFloatValue(s string) (float64, bool) {
	s = strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	switch {
	case s == ".inf":
		return sign * math.Inf(1), true
	case s == ".nan":
		return math.NaN(), true
	case strings.Contains(s, ":"):
		return sexagesimal(s, sign)
	}
	f, err := strconv.ParseFloat(s, 64)
	return sign * f, err == nil
}

// sexagesimal is a base-60 number, 1:20 for 80.
func sexagesimal(s string, sign float64) (float64, bool) {
	v := 0.0
	for _, d := range strings.Split(s, ":") {
		f, err := strconv.ParseFloat(d, 64)
		if err != nil {
			return 0, false
		}
		v = v*60 + f
	}
	return sign * v, true
}
