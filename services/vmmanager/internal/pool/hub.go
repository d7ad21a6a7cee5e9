package pool

import (
	"sync"
	"time"
)

// Event is one VM state change.
type Event struct {
	Time     time.Time
	VM       VMView
	Previous State
	Reason   string
}

// Hub fans VM state changes out to watchers. Publishing never blocks the
// pools: a watcher that falls more than its buffer behind is cut off (its
// channel is closed and Overflowed reports true) rather than slowing leases.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[*Subscription]struct{}{}} }

// Subscription receives events until cancelled or overflowed.
type Subscription struct {
	C          chan Event
	hub        *Hub
	overflowed bool
	closed     bool
}

// Subscribe registers a watcher with a buffer of n events.
func (h *Hub) Subscribe(n int) *Subscription {
	s := &Subscription{C: make(chan Event, n), hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Cancel unregisters the watcher.
func (s *Subscription) Cancel() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.hub.subs, s)
		close(s.C)
	}
}

// Overflowed reports whether the watcher was cut off for falling behind.
func (s *Subscription) Overflowed() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.overflowed
}

func (h *Hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.C <- e:
		default:
			s.overflowed = true
			s.closed = true
			delete(h.subs, s)
			close(s.C)
		}
	}
}
