// Package imagecache keeps the images of recent gRPC Chat requests by their
// SHA-256, so that a caller sends each image once and names it by its digest
// in later requests. An agent's requests carry the last few screenshots of
// its episode, each screenshot in several requests in a row: without the
// cache every copy crosses the network and is parsed again.
//
// Images are kept in one ring of memory mapped outside the Go heap and
// written in turn: a new image takes the place of the oldest ones. Outside
// the heap, because a heap of hundreds of megabytes of cached screenshots
// raised the collector's target with it, so the process's other
// allocations walked through gigabytes of fresh pages between collections:
// in the mesh benchmark the gateway spent a fifth of its CPU in the kernel
// zeroing pages and its CPU per request rose by two thirds. The ring's
// pages are touched once and reused.
//
// A digest the cache does not hold is the caller's to send again; nothing
// is ever fetched from elsewhere. Keys are computed here from the bytes,
// never taken from the caller, so one caller cannot make another's
// reference resolve to other content. An image handed out by Get is pinned
// until released: the ring does not write over it, and an image that would
// have to is not stored.
package imagecache

import (
	"crypto/sha256"
	"fmt"
	"sync"
)

// Image is a cached image. Data is the ring's memory: read it only until
// Release, never change it.
type Image struct {
	Data      []byte
	MediaType string
}

type entry struct {
	key       [32]byte
	off, n    int
	mediaType string
	pins      int
	// reads counts the Gets that found it.
	reads int
	// seq is the number of its slot in write order.
	seq uint64
}

// slot is a span of the ring written once; e is nil once its image moved
// to a newer slot.
type slot struct {
	off, n int
	e      *entry
}

// Cache is a ring of image bytes with an index by digest. Safe for
// concurrent use.
type Cache struct {
	ring  []byte
	unmap func() error

	mu   sync.Mutex
	head int // where the next image is written
	// order holds the slots in the order they were written: those of the
	// ring's previous pass (at or after head), then those of this pass
	// (before head). first is the seq of order[0].
	order []slot
	first uint64
	byKey map[[32]byte]*entry
	used  int64
}

// New returns a cache of maxBytes of image data, whose memory is mapped
// now and taken from the system as it is first written.
func New(maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 || maxBytes > 1<<40 {
		return nil, fmt.Errorf("image cache of %d bytes: must be in 1..1 TiB", maxBytes)
	}
	ring, unmap, err := mapRing(int(maxBytes))
	if err != nil {
		return nil, fmt.Errorf("map the image cache (%d bytes): %w", maxBytes, err)
	}
	return &Cache{ring: ring, unmap: unmap, byKey: make(map[[32]byte]*entry)}, nil
}

// Close returns the ring's memory. No Image may be in use.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey, c.order, c.used = map[[32]byte]*entry{}, nil, 0
	if c.unmap == nil {
		return nil
	}
	err := c.unmap()
	c.unmap, c.ring = nil, nil
	return err
}

// Put stores a copy of data under its SHA-256 and returns the digest and
// whether the cache holds it. An image larger than the cache, or one whose
// place in the ring holds an image in use, is not stored.
func (c *Cache) Put(data []byte, mediaType string) ([32]byte, bool) {
	key := sha256.Sum256(data)
	n := len(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return key, true
	}
	if n == 0 || n > len(c.ring) {
		return key, false
	}
	off, ok := c.reserve(n)
	if !ok {
		return key, false
	}
	e := &entry{key: key, off: off, n: n, mediaType: mediaType}
	// The copy runs under the lock, which readers take only to pin and
	// unpin: about 20 us for a 200 KB screenshot.
	copy(c.ring[off:off+n], data)
	c.push(e)
	c.byKey[key] = e
	c.used += int64(n)
	return key, true
}

// reserve makes room for n bytes at head, evicting the oldest images, and
// advances head past them; false when an image in use is in the way.
func (c *Cache) reserve(n int) (int, bool) {
	if c.head+n > len(c.ring) {
		// Wrap: the rest of the previous pass, after head, goes first.
		for len(c.order) > 0 && c.order[0].off >= c.head {
			if !c.evictOldest() {
				return 0, false
			}
		}
		c.head = 0
	}
	for len(c.order) > 0 && c.order[0].off >= c.head && c.order[0].off < c.head+n {
		if !c.evictOldest() {
			return 0, false
		}
	}
	off := c.head
	c.head += n
	return off, true
}

// evictOldest drops the oldest slot and its image, unless that is pinned.
func (c *Cache) evictOldest() bool {
	sl := c.order[0]
	if e := sl.e; e != nil {
		if e.pins > 0 {
			return false
		}
		delete(c.byKey, e.key)
		c.used -= int64(e.n)
	}
	c.order[0] = slot{}
	c.order = c.order[1:]
	c.first++
	return true
}

// push appends e's slot at its current offset.
func (c *Cache) push(e *entry) {
	e.seq = c.first + uint64(len(c.order))
	c.order = append(c.order, slot{off: e.off, n: e.n, e: e})
}

// refresh moves an image to the head when it is in the oldest eighth of
// the ring and has been asked for at least twice before, so that an image
// a caller goes on naming step after step (a task's picture in every
// request) outlives the ring's turn.
//
// An image named only by the next few requests after it came is left
// where it is. A runner's requests carry its episode's last 3
// screenshots, so each is named twice and then never again, and moving it
// only writes the ring faster, which ages every other image as fast. The
// first version moved any image named past the newest quarter of the
// ring: in the mesh benchmark (1,024 episodes, the default 512 MiB) those
// copies were 9 % of the gateway's CPU samples, and 2-8 % of the requests
// missed an image and were sent again whole (0.5-4 % after).
func (c *Cache) refresh(e *entry) {
	age := c.head - e.off
	if age < 0 {
		age += len(c.ring)
	}
	if e.reads < refreshAfterReads || age < len(c.ring)-len(c.ring)/8 || e.pins > 0 {
		return
	}
	e.pins++ // its own slot must not be taken while it is copied
	off, ok := c.reserve(e.n)
	e.pins--
	if !ok {
		return
	}
	copy(c.ring[off:off+e.n], c.ring[e.off:e.off+e.n])
	c.order[e.seq-c.first].e = nil // pinned, so not evicted: still in order
	e.off = off
	c.push(e)
}

// refreshAfterReads is how many Gets an image must have had, this one
// included, before it may be moved: the third. See refresh.
const refreshAfterReads = 3

// Get returns the image stored under key, pinned: call release once done
// with its Data.
func (c *Cache) Get(key [32]byte) (img Image, release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return Image{}, nil, false
	}
	e.reads++
	c.refresh(e)
	e.pins++
	var once sync.Once
	release = func() {
		once.Do(func() {
			c.mu.Lock()
			e.pins--
			c.mu.Unlock()
		})
	}
	return Image{Data: c.ring[e.off : e.off+e.n : e.off+e.n], MediaType: e.mediaType}, release, true
}

// Usage returns the images held and their bytes.
func (c *Cache) Usage() (images int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.used
}
