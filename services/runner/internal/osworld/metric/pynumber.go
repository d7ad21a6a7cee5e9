package metric

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// errPyNumber is a text Python's int() or float() raises ValueError on.
var errPyNumber = errors.New("not a number to Python")

// PyInt is Python's int(s, base) for base 10 or 16: whitespace around, a
// sign, any Unicode decimal digits (int("٢٤") is 24), single underscores
// between digits, and for base 16 an optional 0x prefix. A value outside
// int64, which Python would hold, is an error.
func PyInt(s string, base int) (int64, error) {
	t, ok := pyNumberText(s)
	if !ok {
		return 0, fmt.Errorf("int(%q, %d): %w", s, base, errPyNumber)
	}
	sign := ""
	if t != "" && (t[0] == '+' || t[0] == '-') {
		sign, t = t[:1], t[1:]
	}
	if base == 16 && len(t) >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		// int("0x_f", 16) is 15: one underscore may follow the prefix.
		t = strings.TrimPrefix(t[2:], "_")
	}
	digits, ok := pyDigitPart(t, base)
	if !ok || digits != len(t) {
		return 0, fmt.Errorf("int(%q, %d): %w", s, base, errPyNumber)
	}
	n, err := strconv.ParseInt(sign+strings.ReplaceAll(t, "_", ""), base, 64)
	if err != nil {
		return 0, fmt.Errorf("int(%q, %d): %w", s, base, err)
	}
	return n, nil
}

// PyFloat is Python's float(str): whitespace around, a sign, "inf",
// "infinity" and "nan" in any case, Unicode decimal digits, single
// underscores between digits, no hexadecimal. An exponent past float64's
// range gives ±Inf or 0, as in Python.
func PyFloat(s string) (float64, error) {
	t, ok := pyNumberText(s)
	if !ok {
		return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
	}
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		return math.Copysign(math.Inf(1), signOf(t)), nil
	case "nan":
		return math.NaN(), nil
	}
	rest := body
	n, _ := pyDigitPart(rest, 10)
	rest = rest[n:]
	frac := 0
	if strings.HasPrefix(rest, ".") {
		frac, _ = pyDigitPart(rest[1:], 10)
		rest = rest[1+frac:]
	}
	if n == 0 && frac == 0 {
		return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
	}
	if rest != "" && (rest[0] == 'e' || rest[0] == 'E') {
		exp := strings.TrimLeft(rest[1:], "+-")
		if len(rest)-1-len(exp) > 1 {
			return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
		}
		k, _ := pyDigitPart(exp, 10)
		if k == 0 {
			return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
		}
		rest = exp[k:]
	}
	if rest != "" {
		return 0, fmt.Errorf("float(%q): %w", s, errPyNumber)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, fmt.Errorf("float(%q): %w", s, err)
	}
	return f, nil
}

func signOf(t string) float64 {
	if strings.HasPrefix(t, "-") {
		return -1
	}
	return 1
}

// pyDigitPart is the length of the digits at the start of t, with single
// underscores between them, as Python's number grammar reads them; ok is
// false when an underscore is not between two digits.
func pyDigitPart(t string, base int) (n int, ok bool) {
	isDigit := func(c byte) bool {
		switch {
		case c >= '0' && c <= '9':
			return true
		case base == 16:
			return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
		}
		return false
	}
	for n < len(t) {
		switch {
		case isDigit(t[n]):
			n++
		case t[n] == '_' && n > 0 && n+1 < len(t) && isDigit(t[n+1]):
			n++
		case t[n] == '_':
			return n, false
		default:
			return n, true
		}
	}
	return n, true
}

// pyNumberText is what CPython parses a number from: the text with every
// Unicode decimal digit turned into its ASCII digit and the whitespace
// around it stripped. ok is false for any other non-ASCII character.
func pyNumberText(s string) (string, bool) {
	s = PyStrip(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case unicode.IsDigit(r):
			b.WriteByte('0' + byte(decimalValue(r)))
		default:
			return "", false
		}
	}
	return b.String(), true
}

// decimalValue is a Unicode decimal digit's value. Unicode encodes each
// script's digits as one contiguous run from 0 to 9 (some runs follow
// each other), so the value is the rune's place in its run, modulo 10.
func decimalValue(r rune) int {
	k := 0
	for unicode.IsDigit(r - rune(k) - 1) {
		k++
	}
	return k % 10
}
