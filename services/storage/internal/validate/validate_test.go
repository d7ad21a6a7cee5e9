package validate

import (
	"math"
	"strings"
	"testing"
)

func TestID(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{"b6781586-6346-41cd-935a-0b1f4a1d3c5a", false},
		{"os:task_1.v2", false},
		{strings.Repeat("a", MaxIDBytes), false},
		{strings.Repeat("a", MaxIDBytes+1), true},
		{"", true},
		{".", true},
		{"..", true},
		{"../etc", true},
		{"a/b", true},
		{`a\b`, true},
		{"a b", true},
		{"a\x00", true},
		{"é", true},
	} {
		err := ID("f", tc.in)
		if got := err != nil; got != tc.wantErr {
			t.Errorf("ID(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
		}
		if err != nil {
			if fe, ok := AsFieldError(err); !ok || fe.Field != "f" {
				t.Errorf("ID(%q) error %v does not name field f", tc.in, err)
			}
		}
	}
}

func TestSHA256(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{strings.Repeat("0123456789abcdef", 4), false},
		{strings.Repeat("0123456789ABCDEF", 4), true},
		{strings.Repeat("a", 63), true},
		{"../../" + strings.Repeat("a", 58), true},
	} {
		if got := SHA256("f", tc.in) != nil; got != tc.wantErr {
			t.Errorf("SHA256(%q) error %v, want %v", tc.in, got, tc.wantErr)
		}
	}
}

func TestFinite(t *testing.T) {
	for _, tc := range []struct {
		in      float64
		wantErr bool
	}{
		{0.5, false}, {math.NaN(), true}, {math.Inf(1), true}, {math.Inf(-1), true},
	} {
		if got := Finite("f", tc.in) != nil; got != tc.wantErr {
			t.Errorf("Finite(%v) error %v, want %v", tc.in, got, tc.wantErr)
		}
	}
}

func TestRange(t *testing.T) {
	for _, tc := range []struct {
		v, lo, hi int64
		wantErr   bool
	}{
		{0, 0, 10, false}, {10, 0, 10, false}, {-1, 0, 10, true}, {11, 0, 10, true},
		{math.MaxInt64, 0, MaxModelVersion, true}, {math.MinInt64, 0, MaxModelVersion, true},
	} {
		err := Range("f", tc.v, tc.lo, tc.hi)
		if got := err != nil; got != tc.wantErr {
			t.Errorf("Range(%d, %d, %d) error %v, want error %v", tc.v, tc.lo, tc.hi, err, tc.wantErr)
		}
		if fe, ok := AsFieldError(err); err != nil && (!ok || fe.Field != "f") {
			t.Errorf("Range(%d) = %v, want a FieldError naming f", tc.v, err)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{"env_error", false}, {"", false}, {"é", false},
		{strings.Repeat("a", 16), false}, {strings.Repeat("a", 17), true}, {"env\x00error", true},
	} {
		err := Text("f", tc.in, 16)
		if got := err != nil; got != tc.wantErr {
			t.Errorf("Text(%q) error %v, want error %v", tc.in, err, tc.wantErr)
		}
		if fe, ok := AsFieldError(err); err != nil && (!ok || fe.Field != "f") {
			t.Errorf("Text(%q) = %v, want a FieldError naming f", tc.in, err)
		}
	}
}

func TestMediaType(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{"image/png", false}, {"text/plain; charset=utf-8", false}, {"", false},
		{strings.Repeat("a", 32), false}, {strings.Repeat("a", 33), true},
		{"image/png\x00", true}, {"image/png\r\nX: 1", true}, {"image/pngé", true},
	} {
		err := MediaType("f", tc.in, 32)
		if got := err != nil; got != tc.wantErr {
			t.Errorf("MediaType(%q) error %v, want error %v", tc.in, err, tc.wantErr)
		}
	}
}
