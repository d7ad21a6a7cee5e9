// Package jsonread reads typed values out of a fastjson parse tree, for the
// OpenAI JSON the gateway reads (backend answers) and fakellm reads
// (requests). A Reader keeps the first value of the wrong type as an error
// naming its path, e.g. "choices[].logprobs.content[].logprob: want a
// number, got string", so callers read a whole document and check once.
//
// Every reader takes nil, which fastjson's Get returns for a missing
// member, and null as absent: the zero value, no error, as OpenAI servers
// read them.
package jsonread

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Reader keeps the first type error; after one, reads still return zero
// values and Visit stops calling back.
type Reader struct {
	Err error
	// num holds a number's text for Num: fastjson gives it only by
	// appending it to a buffer, and a buffer of Num's own would be
	// allocated for each of the hundreds of numbers of a logprobs answer.
	num []byte
}

// Fail records that the value at path is not what was wanted, unless an
// error is already recorded.
func (r *Reader) Fail(path, want string, v *fastjson.Value) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%s: want %s, got %s", path, want, v.Type())
	}
}

// Visit calls fn for each member of the object v until an error; v must
// be an object.
func (r *Reader) Visit(v *fastjson.Value, fn func(k []byte, v *fastjson.Value)) {
	o, _ := v.Object()
	o.Visit(func(k []byte, v *fastjson.Value) {
		if r.Err == nil {
			fn(k, v)
		}
	})
}

// absent reports a missing or null value.
func absent(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

// Object reports whether v is an object.
func (r *Reader) Object(v *fastjson.Value, path string) bool {
	if absent(v) {
		return false
	}
	if v.Type() != fastjson.TypeObject {
		r.Fail(path, "an object", v)
		return false
	}
	return true
}

// Array returns the elements of v.
func (r *Reader) Array(v *fastjson.Value, path string) []*fastjson.Value {
	if absent(v) {
		return nil
	}
	a, err := v.Array()
	if err != nil {
		r.Fail(path, "an array", v)
		return nil
	}
	return a
}

// Str returns the string v, with each byte that is not valid UTF-8
// replaced by U+FFFD, as encoding/json does (a protobuf string must be
// UTF-8, or its message fails to marshal).
func (r *Reader) Str(v *fastjson.Value, path string) string {
	if absent(v) {
		return ""
	}
	b, err := v.StringBytes()
	if err != nil {
		r.Fail(path, "a string", v)
		return ""
	}
	if !utf8.Valid(b) {
		return ValidUTF8(string(b))
	}
	return string(b)
}

// Bool returns the boolean v.
func (r *Reader) Bool(v *fastjson.Value, path string) bool {
	if absent(v) {
		return false
	}
	b, err := v.Bool()
	if err != nil {
		r.Fail(path, "true or false", v)
	}
	return b
}

// Int returns the integer v; a number written with a fraction or an
// exponent (2.0, 1e3) is an error, as encoding/json makes it for an int.
func (r *Reader) Int(v *fastjson.Value, path string) int {
	if absent(v) {
		return 0
	}
	n, err := v.Int()
	if err != nil {
		r.Fail(path, "an integer", v)
	}
	return n
}

// Num returns the number v.
func (r *Reader) Num(v *fastjson.Value, path string) float64 {
	if absent(v) {
		return 0
	}
	if v.Type() != fastjson.TypeNumber {
		r.Fail(path, "a number", v)
		return 0
	}
	r.num = v.MarshalTo(r.num[:0])
	f, err := strconv.ParseFloat(string(r.num), 64)
	if err != nil {
		r.Fail(path, "a finite number", v)
	}
	return f
}

// ParseNumber reads a number with strconv, which rounds correctly:
// fastjson's own parser is off by one unit in the last place for some
// 16- and 17-digit numbers, which logprobs often have.
func ParseNumber(v *fastjson.Value) (float64, error) {
	if v.Type() != fastjson.TypeNumber {
		return 0, fmt.Errorf("not a number but %s", v.Type())
	}
	var buf [40]byte
	return strconv.ParseFloat(string(v.MarshalTo(buf[:0])), 64)
}

// ValidUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD.
func ValidUTF8(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		sb.WriteRune(r) // utf8.RuneError for an invalid byte
		i += size
	}
	return sb.String()
}
