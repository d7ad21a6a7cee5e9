//go:build !linux

package peerclosed

// hungUp falls back to peek where POLLRDHUP does not exist: a close behind
// unread data goes unseen until the data is read.
func hungUp(fd uintptr) bool { return peek(fd) }
