package ui

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlotsBoundDecodes: however many thumbnails are asked for at once,
// at most maxThumbDecodes screenshots are decoded together (each may be
// hundreds of megabytes of pixels), and a caller that gives up while it
// waits for a slot runs nothing.
func TestSlotsBoundDecodes(t *testing.T) {
	s := newSlots(maxThumbDecodes)
	var running, peak atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 * maxThumbDecodes {
		wg.Go(func() {
			err := s.do(context.Background(), func() error {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Errorf("do: %v", err)
			}
		})
	}
	// Wait until the slots are taken, then check a caller that gives up.
	for deadline := time.Now().Add(10 * time.Second); running.Load() < maxThumbDecodes; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d slots taken after 10 s", running.Load(), maxThumbDecodes)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	ran := false
	err := s.do(ctx, func() error { ran = true; return nil })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Errorf("a caller that gave up while waiting: err %v, ran %v; want DeadlineExceeded, not run", err, ran)
	}
	close(release)
	wg.Wait()
	if got := peak.Load(); got != maxThumbDecodes {
		t.Errorf("at most %d decodes ran at once, want %d", got, maxThumbDecodes)
	}
}
