//go:build !unix

package imagecache

// mapRing allocates the ring on the heap where there is no mmap.
func mapRing(n int) ([]byte, func() error, error) {
	return make([]byte, n), nil, nil
}
