package openaihttp

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/peerclosed"
)

// A request still running watchAfter after it started has its client
// connection checked, then again at intervals doubling up to watchMax (one
// syscall each): thousands of minutes-long generations cost a few
// thousand checks per second, and a request answered sooner costs nothing
// but joining and leaving the list.
const (
	watchAfter = 50 * time.Millisecond
	watchMax   = 400 * time.Millisecond
)

// watchList cancels the requests whose client closed its connection, and
// every request once the handler closes. One goroutine does the checks,
// ticking every watchAfter while requests are in flight and gone when
// none are: a timer per request, as before, cost each request a timer set
// and stopped, and a timer due sooner than the runtime's next one wakes
// a sleeping thread to re-arm its poll.
type watchList struct {
	mu      sync.Mutex
	head    *watcher // requests in flight, newest first
	running bool     // the checking goroutine runs
	closed  bool
	// due is the checking goroutine's scratch list.
	due []*watcher
}

// watcher is one request in the list.
type watcher struct {
	l          *watchList
	conn       net.Conn
	cancel     context.CancelFunc
	start      time.Time
	next       time.Duration // check when this long after start
	prev, succ *watcher
	in         bool // in the list
}

// watch adds a request on conn; cancel ends it.
func (l *watchList) watch(conn net.Conn, cancel context.CancelFunc) *watcher {
	w := &watcher{l: l, conn: conn, cancel: cancel, start: time.Now(), next: watchAfter}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return w
	}
	w.in, w.succ = true, l.head
	if l.head != nil {
		l.head.prev = w
	}
	l.head = w
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go l.run()
	}
	return w
}

// stop takes the request out of the list: it is over or no longer needs
// watching.
func (w *watcher) stop() {
	l := w.l
	l.mu.Lock()
	l.remove(w)
	l.mu.Unlock()
}

func (l *watchList) remove(w *watcher) {
	if !w.in {
		return
	}
	w.in = false
	if w.prev != nil {
		w.prev.succ = w.succ
	} else {
		l.head = w.succ
	}
	if w.succ != nil {
		w.succ.prev = w.prev
	}
	w.prev, w.succ = nil, nil
}

// run checks the requests that are due, every watchAfter, until none is
// in flight.
func (l *watchList) run() {
	t := time.NewTicker(watchAfter)
	defer t.Stop()
	for range t.C {
		now := time.Now()
		l.mu.Lock()
		if l.head == nil {
			l.running = false
			l.mu.Unlock()
			return
		}
		due := l.due[:0]
		for w := l.head; w != nil; w = w.succ {
			if now.Sub(w.start) >= w.next {
				due = append(due, w)
				// Next time twice as late, or watchMax later.
				w.next = min(2*w.next, w.next+watchMax)
			}
		}
		l.due = due
		l.mu.Unlock()
		// The checks are syscalls: done outside the lock, which every
		// request takes at its start and end. A request that ended
		// meanwhile is cancelled for nothing, which is harmless.
		for i, w := range due {
			if peerclosed.Closed(w.conn) {
				w.stop()
				w.cancel()
			}
			due[i] = nil
		}
	}
}

// close cancels every request in flight and every later one.
func (l *watchList) close() {
	l.mu.Lock()
	l.closed = true
	var all []*watcher
	for w := l.head; w != nil; w = w.succ {
		all = append(all, w)
	}
	for _, w := range all {
		l.remove(w)
	}
	l.mu.Unlock()
	for _, w := range all {
		w.cancel()
	}
}
