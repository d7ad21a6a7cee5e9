// Package validate holds the input checks shared by the storage RPCs: the
// field error that names what is wrong, and the shape of ids and digests.
// Ids become directory names in exports, so their alphabet is closed.
package validate

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// MaxIDBytes bounds every id, as the API documents for task ids.
const MaxIDBytes = 256

// MaxModelVersion bounds model versions, as the model gateway bounds the
// versions it hands out (2^53-1, exact in a JSON number: exports write
// versions into JSON that Python and JavaScript read).
const MaxModelVersion = 1<<53 - 1

// Range checks that an integer a caller set lies in [lo, hi].
func Range(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return Field(field, "must be in [%d, %d], got %d", lo, hi, v)
	}
	return nil
}

// FieldError names the invalid field of a request.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Field returns a FieldError.
func Field(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// AsFieldError extracts a FieldError from err.
func AsFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}

// ID checks an id: 1-256 bytes of [A-Za-z0-9._:-], not "." or "..".
func ID(field, v string) error {
	if v == "" {
		return Field(field, "required")
	}
	return OptionalID(field, v)
}

// OptionalID is ID that accepts the empty string.
func OptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > MaxIDBytes {
		return Field(field, "longer than %d bytes", MaxIDBytes)
	}
	if v == "." || v == ".." {
		return Field(field, "must not be %q", v)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return Field(field, "byte %d (%q) is outside [A-Za-z0-9._:-]", i, c)
		}
	}
	return nil
}

// SHA256 checks a lowercase hex SHA-256 digest.
func SHA256(field, v string) error {
	if len(v) != 64 {
		return Field(field, "must be 64 lowercase hex digits")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Field(field, "must be 64 lowercase hex digits")
		}
	}
	return nil
}

// Text checks free text that goes into an indexed column: at most maxBytes
// bytes (PostgreSQL refuses an index row past about 2.7 KB) and no NUL
// byte (PostgreSQL text cannot hold one).
func Text(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return Field(field, "longer than %d bytes", maxBytes)
	}
	if i := strings.IndexByte(v, 0); i >= 0 {
		return Field(field, "byte %d is NUL", i)
	}
	return nil
}

// MediaType checks a media type a caller names: at most maxBytes of
// printable ASCII ("image/png", "text/plain; charset=utf-8"), so it can
// be stored in any index and sent as a header.
func MediaType(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return Field(field, "longer than %d bytes", maxBytes)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return Field(field, "byte %d (%q) is not printable ASCII", i, v[i])
		}
	}
	return nil
}

// Finite checks that a float is neither NaN nor infinite.
func Finite(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Field(field, "must be a finite number")
	}
	return nil
}
