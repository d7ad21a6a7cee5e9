package math

import (
	stdmath "math"
	"testing"
)

func TestEval(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{in: "3 * 12 * 7", want: 252},
		{in: "180 / 2.5", want: 72},
		{in: "2 ^ 3 ^ 2", want: 512},
		{in: "-2 ** 2", want: -4},
		{in: "(1 + 2) * -3", want: -9},
		{in: "7 // 2 + 7 % 3", want: 4},
		{in: "sqrt(16) + log(100) + log(8, 2)", want: 9},
		{in: "max(1, 5, 3) - min(4, 2)", want: 3},
		{in: "1e3 + 1_000", want: 2000},
		{in: "pi", want: stdmath.Pi},
		{in: "1 / 0", wantErr: true},
		{in: "2 +", wantErr: true},
		{in: "import os", wantErr: true},
		{in: "(((1)", wantErr: true},
		{in: "sqrt(-1)", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Eval(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("Eval(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !(stdmath.Abs(got-tt.want) <= 1e-9) {
			t.Errorf("Eval(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[float64]string{252: "252", 0.5: "0.5", -3: "-3", 1.0 / 3: "0.333333333333"} {
		if got := Format(in); got != want {
			t.Errorf("Format(%v) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "((((((1))))))", "sqrt(2)^2", "-------1", "max(", "1e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Eval(s)
		if err == nil && (stdmath.IsNaN(v) || stdmath.IsInf(v, 0)) {
			t.Fatalf("Eval(%q) = %v", s, v)
		}
	})
}
