//go:build unix

package imagecache

import "syscall"

// mapRing maps n bytes of private anonymous memory, outside the Go heap.
func mapRing(n int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
