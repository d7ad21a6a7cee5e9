package clock

import (
	"testing"
	"time"
)

func TestFakeRunsDueTimersInOrder(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	var got []int
	c.AfterFunc(3*time.Second, func() { got = append(got, 3) })
	c.AfterFunc(time.Second, func() { got = append(got, 1) })
	stopped := c.AfterFunc(2*time.Second, func() { got = append(got, 2) })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	// A callback scheduling another timer that is also due.
	c.AfterFunc(1500*time.Millisecond, func() {
		c.AfterFunc(time.Second, func() { got = append(got, 25) })
	})
	c.Advance(2900 * time.Millisecond)
	if want := []int{1, 25}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after 2.9s ran %v, want %v", got, want)
	}
	c.Advance(time.Second)
	if len(got) != 3 || got[2] != 3 {
		t.Fatalf("after 3.9s ran %v, want [1 25 3]", got)
	}
	if want := time.Unix(0, 0).Add(3900 * time.Millisecond); !c.Now().Equal(want) {
		t.Errorf("Now = %v, want %v", c.Now(), want)
	}
}
