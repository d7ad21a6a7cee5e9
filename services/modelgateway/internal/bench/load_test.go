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
	us := time.Microsecond
	tests := []struct {
		name                                    string
		ng, front, goFront, health, bare, event sample
		want, wantNot                           []string
	}{
		{"event-loop floor over 1.5x", per(100 * us), per(230 * us), per(320 * us), per(140 * us), per(260 * us), per(180 * us),
			[]string{"the event-loop gRPC proxy (the front's engine, no gateway code) costs 180us, 1.80x nginx's request (100us)", "own code adds 50us (230us in all)",
				"out of reach of the gateway's own code: the floor is gRPC's on an event loop",
				"engine goroutines at 1000 req/s: the gRPC front on grpc-go's server costs 320us, 3.20x nginx's, on a floor (bare grpc-go proxy) of 260us, 2.60x (a health check, no backend: 140us); the event loop saves 90us a request"},
			nil},
		{"event-loop floor under 1.5x", per(100 * us), per(160 * us), per(300 * us), per(110 * us), per(250 * us), per(120 * us),
			[]string{"1.20x nginx's request", "own code adds 40us", "within reach of the gateway's own code"}, []string{"out of reach"}},
		{"no other engine's figures", per(100 * us), per(160 * us), sample{}, sample{}, sample{}, per(120 * us),
			[]string{"within reach"}, []string{"engine goroutines"}},
		{"no nginx CPU", sample{}, per(120 * us), per(120 * us), per(120 * us), per(120 * us), per(120 * us), nil, nil},
		{"no event-loop floor CPU", per(100 * us), per(120 * us), per(120 * us), per(120 * us), per(120 * us), sample{}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			grpcFloor(&b, 1000, tt.ng, tt.front, tt.goFront, tt.health, tt.bare, tt.event)
			got := b.String()
			if tt.want == nil {
				if got != "" {
					t.Fatalf("got %q, want nothing", got)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want %q in it", got, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("got %q, want no %q in it", got, w)
				}
			}
		})
	}
}

func TestGRPCP99Floor(t *testing.T) {
	us := time.Microsecond
	rounds := func(d time.Duration) sample {
		return sample{lats: make([]time.Duration, 10), cpu: 10 * 100 * us, roundP99: []time.Duration{d, d, d}}
	}
	tests := []struct {
		name                               string
		httpFront, grpc, bareRPC, eventRPC time.Duration // p99 of each path; fakellm direct's is 500us
		want                               []string
	}{
		{"floor over the HTTP front", 900 * us, 1300 * us, 1400 * us, 1000 * us,
			[]string{"FAIL (gRPC 800us, HTTP 400us", "the event-loop gRPC proxy (no gateway code) adds 500us at p99 (median round), a bare grpc-go proxy 900us, the HTTP front 400us; the goal is out of reach"}},
		{"floor under the HTTP front", 900 * us, 1300 * us, 1400 * us, 800 * us,
			[]string{"FAIL (gRPC 800us", "adds 300us at p99 (median round), a bare grpc-go proxy 900us, the HTTP front 400us; the goal is within reach of the gateway's own code"}},
		{"met", 900 * us, 800 * us, 1400 * us, 700 * us, []string{"PASS (gRPC 300us, HTTP 400us", "within reach"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			costVerdicts(&b, 1000, rounds(0), rounds(tt.httpFront), rounds(tt.grpc), rounds(tt.bareRPC), rounds(tt.eventRPC), rounds(500*us), 1000)
			got := b.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want %q in it", got, w)
				}
			}
		})
	}
}
