package peerclosed

import "golang.org/x/sys/unix"

// hungUp reports whether the peer closed or reset the socket, whether or
// not data it sent before is still unread (POLLRDHUP).
func hungUp(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	for {
		_, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true
		}
		return fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	}
}
