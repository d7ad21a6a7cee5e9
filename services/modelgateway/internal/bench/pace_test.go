package bench

import (
	"testing"
	"time"
)

// TestPacerCountsPeriods checks the counts wait returns against the clock
// read around each call: the kernel counts the periods ended when it
// answers the read, which falls between the two readings. A slow machine
// moves both bounds with it, so the test does not depend on timing.
// Halfway, the test falls behind on purpose, as a loaded generator does.
func TestPacerCountsPeriods(t *testing.T) {
	const period = 2 * time.Millisecond
	p, err := newPacer(period)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	got := 0
	for i := 0; got < 20; i++ {
		if i == 3 {
			// Fall behind: the next wait must report the missed periods.
			time.Sleep(5 * period)
		}
		before := time.Since(p.start)
		n, err := p.wait()
		after := time.Since(p.start)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1 {
			t.Fatalf("wait returned %d periods, want at least 1", n)
		}
		got += n
		// p.start is read just before the timer is armed: the kernel's
		// count can trail the clock by up to one period, never lead it.
		if lo, hi := int(before/period)-1, int(after/period); got < lo || got > hi {
			t.Fatalf("after %v..%v, %d periods counted, want %d..%d", before, after, got, lo, hi)
		}
	}
}

func TestPacerDue(t *testing.T) {
	p, err := newPacer(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	for _, tt := range []struct {
		i    int
		want time.Duration
	}{{0, time.Millisecond}, {1, 2 * time.Millisecond}, {999, time.Second}} {
		if got := p.due(tt.i).Sub(p.start); got != tt.want {
			t.Errorf("due(%d) = start+%v, want start+%v", tt.i, got, tt.want)
		}
	}
}

func TestPacerRejectsPeriod(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := newPacer(d); err == nil {
			t.Errorf("newPacer(%v) succeeded, want an error", d)
		}
	}
}
