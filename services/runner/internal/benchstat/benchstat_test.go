package benchstat

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of unsorted", ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{"p99 of 5 is the slowest", ms(5, 1, 3, 2, 4), 99, 5 * time.Millisecond},
		{"median of two is the lower", ms(2, 1), 50, time.Millisecond},
		{"p99 of 20 is the slowest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 99, 20 * time.Millisecond},
		{"p50 of 20 is the 10th", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 50, 10 * time.Millisecond},
		{"max", ms(3, 9, 1), 100, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(%v, %v) = %v, want %v", tt.name, tt.in, tt.p, got, tt.want)
		}
	}
}
