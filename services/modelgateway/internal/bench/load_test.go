package bench

import (
	"strings"
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

func TestGRPCFloor(t *testing.T) {
	// n requests of cpu each: cpuPerRequest is cpu.
	per := func(cpu time.Duration) sample {
		return sample{lats: make([]time.Duration, 10), cpu: 10 * cpu}
	}
	tests := []struct {
		name        string
		ng, health  sample
		want, wantN string
	}{
		{"over 1.5x", per(100 * time.Microsecond), per(180 * time.Microsecond), "1.80x nginx's", "out of reach of the gateway's own code"},
		{"under 1.5x", per(100 * time.Microsecond), per(120 * time.Microsecond), "1.20x nginx's", "within reach of the gateway's own code"},
		{"no nginx CPU", sample{}, per(120 * time.Microsecond), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			grpcFloor(&b, 1000, tt.ng, tt.health)
			got := b.String()
			if tt.want == "" {
				if got != "" {
					t.Fatalf("got %q, want nothing", got)
				}
				return
			}
			if !strings.Contains(got, tt.want) || !strings.Contains(got, tt.wantN) {
				t.Errorf("got %q, want %q and %q in it", got, tt.want, tt.wantN)
			}
		})
	}
}
