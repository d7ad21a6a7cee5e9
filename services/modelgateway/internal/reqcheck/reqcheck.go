// Package reqcheck holds the bounds both gateway fronts put on what a caller
// sets in a chat request (token counts, choices, sampling ranges, image data
// URLs), so that the gRPC and the HTTP front refuse the same requests with
// the same words, and a request a backend would refuse, or take minutes or
// gigabytes to answer, never reaches it.
package reqcheck

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/segmentio/asm/base64"
	"github.com/valyala/fastjson"
)

// Bounds on the members of a chat request.
const (
	// MaxTokens bounds max_tokens, max_completion_tokens and min_tokens:
	// no served context is longer.
	MaxTokens = 1 << 20
	// MaxN bounds n and best_of: each choice is a generation of its own.
	MaxN = 16
	// MaxTopLogprobs bounds top_logprobs and prompt_logprobs (OpenAI's
	// and vLLM's default limit).
	MaxTopLogprobs = 20
	// MaxTopK bounds top_k; no vocabulary is larger.
	MaxTopK = 1 << 20
	// MaxStop bounds the stop sequences, MaxStopBytes each one.
	MaxStop      = 8
	MaxStopBytes = 1024
	// MaxRoutingKey bounds a routing key: the sticky table keeps each.
	MaxRoutingKey = 256
	// MaxQuoted is how much of a caller's value an error quotes.
	MaxQuoted = 64
)

// FieldError names the member a request got wrong.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Quote quotes at most MaxQuoted bytes of s, so that an error about a
// value stays short however long the value is.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:MaxQuoted]) + "..."
}

// Clip cuts s to at most n bytes (plus "..." when it cut).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// InRange reports lo <= v <= hi; NaN is in no range.
func InRange(v, lo, hi float64) bool { return v >= lo && v <= hi }

// intMember bounds an integer member; null counts as absent.
type intMember struct {
	name   string
	lo, hi int64
}

// floatMember bounds a number member; loOpen excludes lo itself.
type floatMember struct {
	name   string
	lo, hi float64
	loOpen bool
}

var (
	intMembers = []intMember{
		{"max_tokens", 1, MaxTokens},
		{"max_completion_tokens", 1, MaxTokens},
		{"min_tokens", 0, MaxTokens},
		{"n", 1, MaxN},
		{"best_of", 1, MaxN},
		{"top_logprobs", 0, MaxTopLogprobs},
		{"prompt_logprobs", 0, MaxTopLogprobs},
		{"top_k", -1, MaxTopK},
	}
	floatMembers = []floatMember{
		{name: "temperature", lo: 0, hi: 2},
		{name: "top_p", lo: 0, hi: 1, loOpen: true},
		{name: "presence_penalty", lo: -2, hi: 2},
		{name: "frequency_penalty", lo: -2, hi: 2},
	}
)

// member is how Params checks one member of a chat body.
type member struct {
	kind  memberKind
	int   intMember
	float floatMember
}

type memberKind int

const (
	intKind memberKind = iota
	floatKind
	boolKind
	stopKind
)

// members maps each member name Params checks to its check, so that a body
// is checked in one pass over its members rather than a lookup (a scan of
// the members) per name.
var members = func() map[string]member {
	m := map[string]member{
		"logprobs": {kind: boolKind},
		"stream":   {kind: boolKind},
		"stop":     {kind: stopKind},
	}
	for _, im := range intMembers {
		m[im.name] = member{kind: intKind, int: im}
	}
	for _, fm := range floatMembers {
		m[fm.name] = member{kind: floatKind, float: fm}
	}
	return m
}()

// Params checks the sampling members of a chat body object (the HTTP
// body, or the gRPC front's extra_body_json): integers in their ranges,
// numbers in theirs, at most MaxStop stop sequences. prefix goes before
// each field name in the error. The caller refuses a body that names a
// member twice first (Duplicate): Params checks every copy, a backend
// would use the last.
func Params(obj *fastjson.Value, prefix string) *FieldError {
	o, err := obj.Object()
	if err != nil {
		return nil
	}
	var fe *FieldError
	o.Visit(func(key []byte, v *fastjson.Value) {
		if fe != nil {
			return
		}
		if m, ok := members[string(key)]; ok {
			fe = m.check(v, prefix, string(key))
		}
	})
	return fe
}

// check checks one member's value; null counts as absent.
func (m member) check(v *fastjson.Value, prefix, name string) *FieldError {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	switch m.kind {
	case intKind:
		f, err := v.Float64()
		if v.Type() != fastjson.TypeNumber || err != nil || f != math.Trunc(f) || f < float64(m.int.lo) || f > float64(m.int.hi) {
			return invalid(prefix+name, "must be an integer in [%d, %d]", m.int.lo, m.int.hi)
		}
	case floatKind:
		f, err := v.Float64()
		if v.Type() != fastjson.TypeNumber || err != nil || !InRange(f, m.float.lo, m.float.hi) || (m.float.loOpen && f == m.float.lo) {
			open := "["
			if m.float.loOpen {
				open = "("
			}
			return invalid(prefix+name, "must be a number in %s%g, %g]", open, m.float.lo, m.float.hi)
		}
	case boolKind:
		if v.Type() != fastjson.TypeTrue && v.Type() != fastjson.TypeFalse {
			return invalid(prefix+name, "must be true or false")
		}
	case stopKind:
		switch v.Type() {
		case fastjson.TypeString:
			if len(v.GetStringBytes()) > MaxStopBytes {
				return invalid(prefix+name, "longer than %d bytes", MaxStopBytes)
			}
		case fastjson.TypeArray:
			stops, _ := v.Array()
			if len(stops) > MaxStop {
				return invalid(prefix+name, "at most %d stop sequences", MaxStop)
			}
			for i, s := range stops {
				if s.Type() != fastjson.TypeString || len(s.GetStringBytes()) > MaxStopBytes {
					return invalid(fmt.Sprintf("%s%s[%d]", prefix, name, i), "must be a string of at most %d bytes", MaxStopBytes)
				}
			}
		default:
			return invalid(prefix+name, "must be a string or an array of strings")
		}
	}
	return nil
}

// Duplicate finds a member named twice in one object anywhere in v and
// returns its path ("messages[0].content[1].image_url.url"), or "" when
// every object's names are distinct. Such a body means what its reader
// makes of it: the backends (Python's json, Go's encoding/json) keep the
// last of two equal names, fastjson's lookups the first, so without this
// check a body could pass the gateway's checks with one value and reach
// the backend with another (an unbounded max_tokens, an image_embeds part
// in a second "messages").
func Duplicate(v *fastjson.Value) string {
	var path []string // filled in reverse on the way out, only when found
	if !duplicate(v, &path) {
		return ""
	}
	var b strings.Builder
	for i := len(path) - 1; i >= 0; i-- {
		if i < len(path)-1 && !strings.HasPrefix(path[i], "[") {
			b.WriteByte('.')
		}
		b.WriteString(path[i])
	}
	return b.String()
}

// DuplicateProblem is the error's words for the member Duplicate found.
const DuplicateProblem = "named twice in one object (backends would take the last, unchecked)"

// smallObject is how many names an object may have for a pairwise check;
// larger ones are checked with a map.
const smallObject = 16

func duplicate(v *fastjson.Value, path *[]string) bool {
	switch v.Type() {
	case fastjson.TypeArray:
		items, _ := v.Array()
		for i, item := range items {
			if duplicate(item, path) {
				*path = append(*path, fmt.Sprintf("[%d]", i))
				return true
			}
		}
	case fastjson.TypeObject:
		o, _ := v.Object()
		var (
			small [smallObject][]byte
			n     int
			seen  map[string]struct{}
			found bool
		)
		o.Visit(func(key []byte, child *fastjson.Value) {
			if found {
				return
			}
			switch {
			case n < smallObject:
				for _, k := range small[:n] {
					if bytes.Equal(k, key) {
						found = true
					}
				}
				small[n] = key
			case n == smallObject:
				seen = make(map[string]struct{}, 2*smallObject)
				for _, k := range small {
					seen[string(k)] = struct{}{}
				}
				fallthrough
			default:
				if _, ok := seen[string(key)]; ok {
					found = true
				}
				seen[string(key)] = struct{}{}
			}
			n++
			if found {
				*path = append(*path, string(key))
				return
			}
			if duplicate(child, path) {
				*path = append(*path, string(key))
				found = true
			}
		})
		return found
	}
	return false
}

// ValidBase64 reports whether p is standard, padded base64 (RFC 4648 §4),
// as vLLM decodes image data (Python's b64decode with validate=True). A
// screenshot is megabytes of it, checked on both fronts: it is decoded,
// without keeping the bytes, by segmentio/asm's decoder, which uses AVX2
// where the CPU has it (3-4 GB/s on this project's machine, against
// 0.6 GB/s for a table lookup per byte, both measured under load).
func ValidBase64(p []byte) bool {
	if len(p) == 0 || len(p)%4 != 0 {
		return false
	}
	// The decoder skips line breaks, which Python refuses; and it is
	// given the input in pieces, so that padding at the end of one would
	// pass: padding is only valid in the last two bytes.
	if bytes.IndexByte(p, '\n') >= 0 || bytes.IndexByte(p, '\r') >= 0 || bytes.IndexByte(p[:len(p)-2], '=') >= 0 {
		return false
	}
	var scratch [3 << 10]byte
	for len(p) > 0 {
		n := min(len(p), 4<<10) // a multiple of 4, which decodes into scratch
		if _, err := base64.StdEncoding.Decode(scratch[:], p[:n]); err != nil {
			return false
		}
		p = p[n:]
	}
	return true
}

// DataURL checks an image data URL, "data:image/TYPE;base64,PAYLOAD": an
// image media type, base64 the backend can decode, at most maxBytes once
// decoded. It returns the problem, or "" when the URL is fine.
func DataURL(url []byte, maxBytes int) string {
	rest, ok := bytes.CutPrefix(url, []byte("data:"))
	if !ok {
		return "not a data: URL"
	}
	header, payload, ok := bytes.Cut(rest, []byte(","))
	if !ok {
		return "malformed data URL: no comma"
	}
	if !bytes.HasPrefix(header, []byte("image/")) {
		return "data URL media type must be image/*"
	}
	if !bytes.HasSuffix(header, []byte(";base64")) {
		return "data URL must be base64 (data:image/TYPE;base64,...)"
	}
	if n := len(payload) / 4 * 3; n > maxBytes {
		return fmt.Sprintf("image of about %d bytes exceeds the %d-byte limit", n, maxBytes)
	}
	if !ValidBase64(payload) {
		return "image data is not valid base64"
	}
	return ""
}
