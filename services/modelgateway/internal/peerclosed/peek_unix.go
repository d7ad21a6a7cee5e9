//go:build unix

package peerclosed

import "syscall"

// peek looks at the socket without consuming: an orderly close reads as 0
// bytes, a reset as an error; no data yet is EAGAIN.
func peek(fd uintptr) bool {
	var b [1]byte
	for {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			return false
		case err != nil:
			return true
		}
		return n == 0
	}
}
