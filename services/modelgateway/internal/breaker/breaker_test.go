package breaker

import (
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
)

func TestBreaker(t *testing.T) {
	type step struct {
		advance time.Duration
		allow   bool // expected Allow()
		record  *bool
		want    State
	}
	ok, fail := true, false
	tests := []struct {
		name  string
		steps []step
	}{
		{"stays closed on success", []step{
			{allow: true, record: &ok, want: Closed},
			{allow: true, record: &ok, want: Closed},
		}},
		{"opens after threshold failures", []step{
			{allow: true, record: &fail, want: Closed},
			{allow: true, record: &fail, want: Closed},
			{allow: true, record: &fail, want: Open},
			{allow: false, want: Open},
		}},
		{"success resets the failure run", []step{
			{allow: true, record: &fail, want: Closed},
			{allow: true, record: &fail, want: Closed},
			{allow: true, record: &ok, want: Closed},
			{allow: true, record: &fail, want: Closed},
		}},
		{"half-opens after cooldown and closes after successes", []step{
			{allow: true, record: &fail}, {allow: true, record: &fail}, {allow: true, record: &fail, want: Open},
			{advance: 9 * time.Second, allow: false, want: Open},
			{advance: time.Second, allow: true, record: &ok, want: HalfOpen},
			{allow: true, record: &ok, want: Closed},
		}},
		{"half-open failure reopens", []step{
			{allow: true, record: &fail}, {allow: true, record: &fail}, {allow: true, record: &fail, want: Open},
			{advance: 10 * time.Second, allow: true, record: &fail, want: Open},
			{allow: false, want: Open},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			var transitions []State
			b := New(Config{FailureThreshold: 3, OpenFor: 10 * time.Second, HalfOpenSuccesses: 2}, clk, func(_, to State) {
				transitions = append(transitions, to)
			})
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				if got := b.Allow(); got != s.allow {
					t.Fatalf("step %d: Allow() = %v, want %v", i, got, s.allow)
				}
				if s.record != nil {
					b.Record(*s.record)
				}
				if s.want != 0 {
					if got := b.State(); got != s.want {
						t.Fatalf("step %d: State() = %v, want %v (transitions %v)", i, got, s.want, transitions)
					}
				}
			}
		})
	}
}

func TestHalfOpenAllowsOneTrialAtATime(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	b := New(Config{FailureThreshold: 1, OpenFor: time.Second}, clk, nil)
	b.Allow()
	b.Record(false)
	clk.Advance(time.Second)
	if !b.Allow() {
		t.Fatal("first trial refused")
	}
	if b.Allow() {
		t.Fatal("second concurrent trial allowed, want refused")
	}
	b.Cancel()
	if !b.Allow() {
		t.Fatal("trial refused after Cancel gave the slot back")
	}
}
