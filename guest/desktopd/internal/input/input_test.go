package input

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

// fakeDevice records the events sent to it.
type fakeDevice struct {
	mu     sync.Mutex
	events []string
}

func (d *fakeDevice) record(e string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, e)
}

func (d *fakeDevice) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.events)
}

func (d *fakeDevice) Size() (int, int)                    { return 640, 480 }
func (d *fakeDevice) Move(x, y int)                       { d.record("move") }
func (d *fakeDevice) Button(button int, press bool)       { d.record("button") }
func (d *fakeDevice) Key(code xproto.Keycode, press bool) { d.record("key") }
func (d *fakeDevice) SpareKeycodes() int                  { return 8 }
func (d *fakeDevice) Flush(ctx context.Context) error     { return nil }
func (d *fakeDevice) Pointer(ctx context.Context) (int, int, error) {
	return 0, 0, nil
}
func (d *fakeDevice) Resolve(ctx context.Context, syms []uint32) ([]x11.Stroke, error) {
	return make([]x11.Stroke, len(syms)), nil
}

// TestDoAbandonedWaiterSendsNothing: a request queued behind another one
// for the input whose caller gives up (its client timed out or went away)
// returns at once and never sends its events later, when the input frees:
// a stale click landing after the caller moved on would act on a screen
// it never saw.
func TestDoAbandonedWaiterSendsNothing(t *testing.T) {
	dev := &fakeDevice{}
	c := New(dev)
	release := make(chan struct{})
	holding := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- c.Do(context.Background(), func(a *Actor) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		second <- c.Do(ctx, func(a *Actor) error {
			return a.Click(ctx, &Point{10, 10}, Left, 1, 0)
		})
	}()
	time.Sleep(20 * time.Millisecond) // the second is queued on the input
	cancel()
	returned := false
	select {
	case err := <-second:
		returned = true
		if !errors.Is(err, context.Canceled) {
			t.Errorf("abandoned Do = %v, want %v", err, context.Canceled)
		}
	case <-time.After(30 * time.Second):
		t.Error("abandoned Do still waiting for the input 30s after its context ended")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !returned {
		select {
		case <-second:
		case <-time.After(30 * time.Second):
			t.Fatal("abandoned Do never returned")
		}
	}
	if got := dev.count(); got != 0 {
		t.Errorf("abandoned request sent %d events, want 0", got)
	}
	// The input is free again for the next request.
	if err := c.Do(context.Background(), func(a *Actor) error { return a.MoveTo(context.Background(), Point{1, 1}, 0) }); err != nil || dev.count() != 1 {
		t.Errorf("Do after the abandoned one = %v with %d events, want nil with 1", err, dev.count())
	}
}

// TestPerformStopsWhenContextEnds: the actions of a batch whose caller
// went away are not performed, instant ones included.
func TestPerformStopsWhenContextEnds(t *testing.T) {
	dev := &fakeDevice{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := New(dev).Do(context.Background(), func(a *Actor) error {
		return a.Perform(ctx, Action{Type: "CLICK", At: &Point{5, 5}, Button: Left, Clicks: 1})
	})
	if !errors.Is(err, context.Canceled) || dev.count() != 0 {
		t.Errorf("Perform with an ended context = %v with %d events, want %v with 0", err, dev.count(), context.Canceled)
	}
}
