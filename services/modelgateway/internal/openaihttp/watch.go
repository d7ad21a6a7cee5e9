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

// watchList ends the requests whose client closed its connection or whose
// deadline passed, and every request once the handler closes. One
// goroutine does the checks, ticking every watchAfter while requests are
// in flight and gone when none are: a timer per request, as before, cost
// each request a timer set and stopped, and a timer due sooner than the
// runtime's next one wakes a sleeping thread to re-arm its poll.
type watchList struct {
	mu      sync.Mutex
	head    *call // requests in flight, newest first
	running bool  // the checking goroutine runs
	closed  bool
	// due and expired are the checking goroutine's scratch lists.
	due, expired []*call
}

// call is one request in flight: the context the gateway routes it under,
// and its entry in the watch list, which ends it when its client hangs
// up, when its deadline passes (to within watchAfter) or when the handler
// closes. context.WithTimeout and context.AfterFunc (for the backend
// connection) cost each request about ten allocations, a runtime timer
// set and stopped and an entry in a map of the parent's children; the
// list visits every request anyway, and the backend client has a call
// interrupt its connection itself (InterruptConn).
type call struct {
	l        *watchList
	conn     net.Conn // the client's
	start    time.Time
	deadline time.Time     // zero: none
	next     time.Duration // check the client when this long after start
	// prev, succ and in are guarded by l.mu.
	prev, succ *call
	in         bool

	mu   sync.Mutex
	err  error
	done chan struct{} // made when first asked for, or at the end
	// backend is the connection to interrupt when the call ends.
	backend net.Conn
}

var _ context.Context = (*call)(nil)

// closedDone is Done of a call that ended before anyone asked for it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// aLongTimeAgo is a deadline in the past: setting it interrupts any read or
// write in progress on a connection.
var aLongTimeAgo = time.Unix(1, 0)

// Deadline is the request's deadline, if it has one.
func (c *call) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done is closed when the call ends.
func (c *call) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

// Err is nil until the call ends, then why.
func (c *call) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value is nil: a request carries no values.
func (c *call) Value(any) any { return nil }

// InterruptConn has conn's deadline moved to the past when the call ends,
// or now if it has: the backend sees the request go away.
func (c *call) InterruptConn(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		conn.SetDeadline(aLongTimeAgo)
		return
	}
	c.backend = conn
}

// ReleaseConn undoes InterruptConn, and reports whether conn was left
// alone, so that it can be reused.
func (c *call) ReleaseConn(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backend != conn {
		return false
	}
	c.backend = nil
	return true
}

// cancel ends the call with err (context.Canceled or
// context.DeadlineExceeded), unless it has ended.
func (c *call) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done == nil {
		c.done = closedDone
	} else {
		close(c.done)
	}
	if c.backend != nil {
		c.backend.SetDeadline(aLongTimeAgo)
		c.backend = nil
	}
}

// begin adds a request on conn that started at start, with a deadline
// timeout after it (none when timeout is 0).
func (l *watchList) begin(conn net.Conn, start time.Time, timeout time.Duration) *call {
	c := &call{l: l, conn: conn, start: start, next: watchAfter}
	if timeout > 0 {
		c.deadline = start.Add(timeout)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.cancel(context.Canceled)
		return c
	}
	c.in, c.succ = true, l.head
	if l.head != nil {
		l.head.prev = c
	}
	l.head = c
	idle := !l.running
	l.running = true
	l.mu.Unlock()
	if idle {
		go l.run()
	}
	return c
}

// leave takes the request out of the list: it is over, and nothing needs
// to end it any more.
func (c *call) leave() {
	l := c.l
	l.mu.Lock()
	l.remove(c)
	l.mu.Unlock()
}

func (l *watchList) remove(c *call) {
	if !c.in {
		return
	}
	c.in = false
	if c.prev != nil {
		c.prev.succ = c.succ
	} else {
		l.head = c.succ
	}
	if c.succ != nil {
		c.succ.prev = c.prev
	}
	c.prev, c.succ = nil, nil
}

// run ends the requests past their deadline and checks the clients that
// are due, every watchAfter, until none is in flight.
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
		due, expired := l.due[:0], l.expired[:0]
		for c := l.head; c != nil; {
			succ := c.succ
			switch {
			case !c.deadline.IsZero() && !now.Before(c.deadline):
				l.remove(c)
				expired = append(expired, c)
			case now.Sub(c.start) >= c.next:
				due = append(due, c)
				// Next time twice as late, or watchMax later.
				c.next = min(2*c.next, c.next+watchMax)
			}
			c = succ
		}
		l.due, l.expired = due, expired
		l.mu.Unlock()
		// The checks are syscalls: done outside the lock, which every
		// request takes at its start and end. A request that ended
		// meanwhile is cancelled for nothing, which is harmless.
		for i, c := range expired {
			c.cancel(context.DeadlineExceeded)
			expired[i] = nil
		}
		for i, c := range due {
			if peerclosed.Closed(c.conn) {
				c.leave()
				c.cancel(context.Canceled)
			}
			due[i] = nil
		}
	}
}

// close cancels every request in flight and every later one.
func (l *watchList) close() {
	l.mu.Lock()
	l.closed = true
	var all []*call
	for c := l.head; c != nil; c = c.succ {
		all = append(all, c)
	}
	for _, c := range all {
		l.remove(c)
	}
	l.mu.Unlock()
	for _, c := range all {
		c.cancel(context.Canceled)
	}
}
