package bench

import (
	"testing"
	"time"
)

func TestMedianRound(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		target []time.Duration
		direct []time.Duration
		want99 time.Duration // roundP99(target)
		wantAd time.Duration // addedRoundP99(target, direct)
	}{
		{"none", nil, nil, 0, 0},
		{"odd, one spoilt round", []time.Duration{2 * ms, 40 * ms, 3 * ms}, []time.Duration{1 * ms, 38 * ms, 1 * ms}, 3 * ms, 2 * ms},
		{"even", []time.Duration{4 * ms, 2 * ms, 6 * ms, 8 * ms}, []time.Duration{1 * ms, 1 * ms, 1 * ms, 1 * ms}, 5 * ms, 4 * ms},
		{"paired by round, not by rank", []time.Duration{10 * ms, 2 * ms, 3 * ms}, []time.Duration{9 * ms, 1 * ms, 1 * ms}, 3 * ms, 1 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, d := sample{roundP99: tt.target}, sample{roundP99: tt.direct}
			if got := roundP99(s); got != tt.want99 {
				t.Errorf("roundP99 = %v, want %v", got, tt.want99)
			}
			if got := addedRoundP99(s, d); got != tt.wantAd {
				t.Errorf("addedRoundP99 = %v, want %v", got, tt.wantAd)
			}
		})
	}
}

func TestMergeKeepsRoundOrder(t *testing.T) {
	var s sample
	for _, p := range []time.Duration{3, 1, 2} {
		s = s.merge(sample{roundP99: []time.Duration{p}, lats: []time.Duration{p}})
	}
	if got := s.roundP99; len(got) != 3 || got[0] != 3 || got[1] != 1 || got[2] != 2 {
		t.Errorf("roundP99 after merges = %v, want [3 1 2]", got)
	}
}
