// Package peerclosed tells whether the other end of a TCP connection has
// closed it, without reading (and so without taking bytes from) whoever owns
// the connection. fasthttp neither watches a client connection while its
// handler runs nor checks a pooled connection before reusing it; net/http
// did both with a background read per connection, which is the goroutine
// hand-off the gateway no longer pays for.
package peerclosed

import (
	"net"
	"syscall"
)

// Closed reports whether the peer closed c (or reset it, or c is closed).
// It answers false when it cannot tell, e.g. for a connection that is not
// a socket.
func Closed(c net.Conn) bool {
	check := peek
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		// TLS: the socket is underneath, and a peer that closes sends a
		// close_notify record before its FIN. That unread record hides
		// the FIN from a peek, so ask the socket whether the peer hung up.
		c, check = nc.NetConn(), hungUp
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	if err := rc.Control(func(fd uintptr) { closed = check(fd) }); err != nil {
		return true // c itself is closed
	}
	return closed
}
