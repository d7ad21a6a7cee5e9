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
		name                           string
		ng, front, health, bare, event sample
		want, wantNot                  []string
	}{
		{"bare proxy over 1.5x", per(100 * us), per(230 * us), per(140 * us), per(180 * us), sample{},
			[]string{"costs 180us, 1.80x nginx's request (100us)", "health check (no backend) 140us, 1.40x", "own code adds 50us (230us in all)", "out of reach of the gateway's own code"},
			[]string{"without grpc-go"}},
		{"bare proxy under 1.5x", per(100 * us), per(160 * us), per(110 * us), per(120 * us), sample{},
			[]string{"1.20x nginx's request", "own code adds 40us", "within reach of the gateway's own code"}, nil},
		// The health check under 1.5x does not make the goal reachable:
		// the bare proxy, which also calls the backend, is the floor.
		{"health under, bare over", per(100 * us), per(200 * us), per(120 * us), per(160 * us), sample{},
			[]string{"1.60x nginx's request", "out of reach"}, nil},
		{"event-loop floor under 1.5x", per(100 * us), per(300 * us), per(150 * us), per(250 * us), per(110 * us),
			[]string{"floor is grpc-go's", "without grpc-go at 1000 req/s: the event-loop gRPC proxy (HTTP/2 on the HTTP front's engine, no gateway code) costs 110us, 1.10x nginx's request; the 1.5x goal on a gRPC front built that way is within reach of the gateway's own code"}, nil},
		{"event-loop floor over 1.5x", per(100 * us), per(300 * us), per(150 * us), per(250 * us), per(170 * us),
			[]string{"costs 170us, 1.70x nginx's request; the 1.5x goal on a gRPC front built that way is out of reach of the gateway's own code: the floor is gRPC's on an event loop"}, nil},
		{"no nginx CPU", sample{}, per(120 * us), per(120 * us), per(120 * us), per(120 * us), nil, nil},
		{"no bare proxy CPU", per(100 * us), per(120 * us), per(120 * us), sample{}, per(120 * us), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			grpcFloor(&b, 1000, tt.ng, tt.front, tt.health, tt.bare, tt.event)
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
			[]string{"FAIL (gRPC 800us, HTTP 400us", "bare grpc-go proxy (no gateway code) adds 900us at p99 (median round), the HTTP front 400us; the goal is out of reach",
				"without grpc-go at 1000 req/s: the event-loop gRPC proxy adds 500us at p99 (median round), over the HTTP front's 400us"}},
		{"floor under the HTTP front", 900 * us, 1300 * us, 800 * us, 800 * us,
			[]string{"FAIL (gRPC 800us", "adds 300us at p99 (median round), the HTTP front 400us; the goal is within reach of the gateway's own code",
				"the event-loop gRPC proxy adds 300us at p99 (median round), within the HTTP front's 400us"}},
		{"met", 900 * us, 800 * us, 700 * us, 700 * us, []string{"PASS (gRPC 300us, HTTP 400us", "within reach"}},
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
