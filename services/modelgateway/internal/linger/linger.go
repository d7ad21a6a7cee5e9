// Package linger closes a connection the server stopped reading in a way
// its client can still read the answer from.
//
// When the OpenAI front refuses a body before reading it (over the size
// limit, or sent without the token), fasthttp writes the 401 or 413 and
// closes the connection with the rest of the body unread. A socket closed
// with unread data sends a reset, which makes the client's write fail
// (broken pipe) and can discard the answer before the client reads it:
// OpenAI's Python client, which writes the whole body before reading,
// then reports a connection error and retries instead of showing the 401.
// A connection marked with Drain is instead half-closed after the answer
// (FIN), and what the client still sends is read and thrown away until it
// closes its side, for a bounded time and on a bounded number of
// connections at once, as net/http's server lingers after such answers.
package linger

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Listener hands out connections that can be drained on close.
type Listener struct {
	net.Listener
	slots chan struct{} // one per connection being drained
	wait  time.Duration
}

// NewListener wraps ln: at most max connections are drained at once (the
// others close at once) and each for at most wait.
func NewListener(ln net.Listener, max int, wait time.Duration) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, max), wait: wait}
}

// Accept returns the next TCP connection, wrapped so that Drain can mark
// it; other kinds are returned as they are.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	return &Conn{TCPConn: tc, l: l}, nil
}

// Conn is a TCP connection from a Listener. The embedded *net.TCPConn keeps
// its fast paths (ReadFrom, WriteTo, SyscallConn).
type Conn struct {
	*net.TCPConn
	l     *Listener
	drain atomic.Bool
}

// Close closes the connection, or, when it was marked with Drain, sends
// FIN and reads what the client still sends until it closes too or the
// listener's wait has passed.
func (c *Conn) Close() error {
	if !c.drain.Swap(false) {
		return c.TCPConn.Close()
	}
	select {
	case c.l.slots <- struct{}{}:
	default: // too many drains already: a reset is the lesser harm
		return c.TCPConn.Close()
	}
	if err := c.TCPConn.CloseWrite(); err != nil {
		<-c.l.slots
		return c.TCPConn.Close()
	}
	go func() {
		defer func() { <-c.l.slots }()
		// A deadline on the socket is wall time by nature; the bound
		// only caps how long a slot is held.
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(c.l.wait))
		_, _ = io.Copy(io.Discard, c.TCPConn)
		_ = c.TCPConn.Close()
	}()
	return nil
}

// Drain marks c, or the connection under its TLS, to be drained when it
// is closed. It reports whether c came from a Listener.
func Drain(c net.Conn) bool {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	lc, ok := c.(*Conn)
	if ok {
		lc.drain.Store(true)
	}
	return ok
}
