package routing

import (
	"fmt"
	"testing"
)

type tgt struct {
	id     string
	load   int
	weight float64
}

func (t *tgt) ID() string      { return t.id }
func (t *tgt) Load() int       { return t.load }
func (t *tgt) Weight() float64 { return t.weight }

func targets(loads ...int) []Target {
	ts := make([]Target, len(loads))
	for i, l := range loads {
		ts[i] = &tgt{id: fmt.Sprintf("b%d", i), load: l, weight: 1}
	}
	return ts
}

func TestRoundRobinCycles(t *testing.T) {
	p, _ := New(Config{Policy: RoundRobin}, Hooks{})
	ts := targets(5, 0, 9)
	var got []int
	for range 6 {
		got = append(got, p.Pick("k", ts))
	}
	want := []int{0, 1, 2, 0, 1, 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("picks = %v, want %v", got, want)
	}
}

func TestLeastLoaded(t *testing.T) {
	tests := []struct {
		loads []int
		want  int
	}{
		{[]int{3, 1, 2}, 1},
		{[]int{0, 5, 5}, 0},
		{[]int{7, 7, 2}, 2},
	}
	p, _ := New(Config{Policy: LeastLoaded}, Hooks{})
	for _, tt := range tests {
		if got := p.Pick("", targets(tt.loads...)); got != tt.want {
			t.Errorf("Pick(loads %v) = %d, want %d", tt.loads, got, tt.want)
		}
	}
}

func TestLeastLoadedSpreadsTies(t *testing.T) {
	p, _ := New(Config{Policy: LeastLoaded}, Hooks{})
	ts := targets(0, 0, 0, 0)
	seen := map[int]bool{}
	for range 8 {
		seen[p.Pick("", ts)] = true
	}
	if len(seen) != 4 {
		t.Errorf("idle backends chosen = %v, want all 4", seen)
	}
}

func TestWeighted(t *testing.T) {
	p, _ := New(Config{Policy: Weighted}, Hooks{})
	ts := []Target{&tgt{id: "a", weight: 3}, &tgt{id: "b", weight: 1}}
	counts := map[int]int{}
	for range 400 {
		counts[p.Pick("", ts)]++
	}
	if counts[0] != 300 || counts[1] != 100 {
		t.Errorf("counts = %v, want 300/100", counts)
	}
}

func TestStickyPinsUntilImbalance(t *testing.T) {
	var pins, unpins int
	p, _ := New(Config{Policy: StickyLeastLoaded, ImbalanceAbs: 4, ImbalanceRel: 1.5}, Hooks{
		Pin: func(string) { pins++ }, Unpin: func(string) { unpins++ },
	})
	a, b := &tgt{id: "a", weight: 1}, &tgt{id: "b", weight: 1, load: 1}
	ts := []Target{a, b}
	if got := p.Pick("ep", ts); got != 0 {
		t.Fatalf("first turn went to %d, want least loaded 0", got)
	}
	tests := []struct {
		loadA, loadB int
		want         int
	}{
		{3, 0, 0},  // 3-0 <= 4: stay
		{4, 0, 0},  // 4-0 <= 4: stay
		{10, 8, 0}, // 2 apart: stay
		{20, 5, 1}, // 15 apart and 4x: move to b
	}
	for i, tt := range tests[:4] {
		a.load, b.load = tt.loadA, tt.loadB
		if got := p.Pick("ep", ts); got != tt.want {
			t.Errorf("step %d loads a=%d b=%d: Pick = %d, want %d", i, tt.loadA, tt.loadB, got, tt.want)
		}
	}
	a.load, b.load = 30, 30
	if got := p.Pick("ep", ts); got != 1 {
		t.Errorf("after move, equal load: Pick = %d, want the new pin 1", got)
	}
	if pins != 2 || unpins != 1 {
		t.Errorf("pins/unpins = %d/%d, want 2/1", pins, unpins)
	}
	if got := PinCounts(p)["b"]; got != 1 {
		t.Errorf("PinCounts[b] = %d, want 1", got)
	}
}

func TestStickyMovesOffMissingBackend(t *testing.T) {
	p, _ := New(Config{Policy: StickyLeastLoaded}, Hooks{})
	a, b := &tgt{id: "a"}, &tgt{id: "b", load: 1}
	if got := p.Pick("ep", []Target{a, b}); got != 0 {
		t.Fatalf("first pick %d, want 0", got)
	}
	// a is gone (unhealthy or already tried).
	if got := p.Pick("ep", []Target{b}); got != 0 {
		t.Fatalf("pick without a = %d, want 0 (b)", got)
	}
	if got := p.Pick("ep", []Target{a, b}); got != 1 {
		t.Errorf("after moving, a back: Pick = %d, want 1 (stay on b)", got)
	}
}

func TestStickyLRUIsBounded(t *testing.T) {
	p, _ := New(Config{Policy: StickyLeastLoaded, MaxPinnedKeys: 10}, Hooks{})
	ts := targets(0, 0)
	for i := range 100 {
		p.Pick(fmt.Sprint("k", i), ts)
	}
	total := 0
	for _, n := range PinCounts(p) {
		total += n
	}
	if total != 10 {
		t.Errorf("pinned keys = %d, want 10", total)
	}
}

func TestUnknownPolicy(t *testing.T) {
	if _, err := New(Config{Policy: "random"}, Hooks{}); err == nil {
		t.Error("New(random) succeeded, want error")
	}
}
