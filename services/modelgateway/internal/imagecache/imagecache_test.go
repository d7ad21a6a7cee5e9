package imagecache

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"testing"
)

func img(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func newCache(t *testing.T, n int64) *Cache {
	t.Helper()
	c, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPutGet(t *testing.T) {
	c := newCache(t, 1000)
	data := img('a', 100)
	key, stored := c.Put(data, "image/png")
	if key != sha256.Sum256(data) || !stored {
		t.Fatalf("Put = %x, %v; want the SHA-256 of the bytes, stored", key[:4], stored)
	}
	data[0] = 'z' // the caller's buffer is reused
	got, release, ok := c.Get(key)
	if !ok {
		t.Fatal("Get: not found")
	}
	defer release()
	if !bytes.Equal(got.Data, img('a', 100)) || got.MediaType != "image/png" {
		t.Errorf("Get = %q (%s), want the bytes as they were put", got.Data[:4], got.MediaType)
	}
	if _, _, ok := c.Get(sha256.Sum256([]byte("other"))); ok {
		t.Error("Get of a digest never put: found")
	}
}

// held reports whether the cache holds data, with its bytes intact,
// without Get's refresh.
func held(c *Cache, data []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[sha256.Sum256(data)]
	return ok && bytes.Equal(c.ring[e.off:e.off+e.n], data)
}

// get is Get and release.
func get(c *Cache, data []byte) bool {
	_, release, ok := c.Get(sha256.Sum256(data))
	if ok {
		release()
	}
	return ok
}

// TestRingEvictsOldest: images are written in turn around the ring; a new
// one takes the place of the oldest, including across the wrap.
func TestRingEvictsOldest(t *testing.T) {
	c := newCache(t, 300)
	a, b, cc, d, e := img('a', 100), img('b', 100), img('c', 100), img('d', 150), img('e', 120)
	for _, x := range [][]byte{a, b, cc} {
		c.Put(x, "image/png")
	}
	c.Put(d, "image/png") // no room after c: wraps to 0, over a and b
	tests := []struct {
		name string
		data []byte
		want bool
	}{{"a", a, false}, {"b", b, false}, {"c", cc, true}, {"d", d, true}}
	for _, tt := range tests {
		if got := held(c, tt.data); got != tt.want {
			t.Errorf("after d: %s held = %v, want %v", tt.name, got, tt.want)
		}
	}
	c.Put(e, "image/png") // 150..270, over c
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{{"c", cc, false}, {"d", d, true}, {"e", e, true}} {
		if got := held(c, tt.data); got != tt.want {
			t.Errorf("after e: %s held = %v, want %v", tt.name, got, tt.want)
		}
	}
	if n, used := c.Usage(); n != 2 || used != 270 {
		t.Errorf("Usage = %d images, %d bytes; want 2, 270", n, used)
	}
}

// TestPinnedNotOverwritten: an image handed out and not released keeps its
// bytes; an image that would need its place is not stored.
func TestPinnedNotOverwritten(t *testing.T) {
	c := newCache(t, 200)
	a := img('a', 100)
	ka, _ := c.Put(a, "image/png")
	got, release, ok := c.Get(ka)
	if !ok {
		t.Fatal("a not held")
	}
	c.Put(img('b', 100), "image/png")
	if _, stored := c.Put(img('c', 100), "image/png"); stored {
		t.Error("c stored over the pinned a")
	}
	if !bytes.Equal(got.Data, a) {
		t.Error("a's bytes changed while pinned")
	}
	release()
	release() // a second release is harmless
	if _, stored := c.Put(img('c', 100), "image/png"); !stored {
		t.Error("c not stored once a was released")
	}
	if held(c, a) {
		t.Error("a still held after c took its place")
	}
}

func TestPutSameTwiceStoresOnce(t *testing.T) {
	c := newCache(t, 1000)
	c.Put(img('a', 100), "image/png")
	c.Put(img('a', 100), "image/png")
	if n, used := c.Usage(); n != 1 || used != 100 {
		t.Errorf("Usage = %d images, %d bytes; want 1, 100", n, used)
	}
}

func TestLargerThanCacheNotStored(t *testing.T) {
	c := newCache(t, 100)
	if _, stored := c.Put(img('a', 101), "image/png"); stored {
		t.Error("an image larger than the cache was stored")
	}
	if n, used := c.Usage(); n != 0 || used != 0 {
		t.Errorf("Usage = %d, %d; want 0, 0", n, used)
	}
}

func TestBadSize(t *testing.T) {
	for _, n := range []int64{0, -1, 1<<40 + 1} {
		if _, err := New(n); err == nil {
			t.Errorf("New(%d): no error", n)
		}
	}
}

// TestConcurrentUse: readers always see the bytes whose digest they asked
// for, while writers go round the ring many times.
func TestConcurrentUse(t *testing.T) {
	c := newCache(t, 40*64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				want := img(byte(g*31+i%40), 64+g)
				k, _ := c.Put(want, "image/png")
				if got, release, ok := c.Get(k); ok {
					if !bytes.Equal(got.Data, want) {
						t.Errorf("Get returned other content")
					}
					release()
				}
			}
		}()
	}
	wg.Wait()
	if _, used := c.Usage(); used > 40*64 {
		t.Errorf("used %d bytes, bound %d", used, 40*64)
	}
}

// TestGetRefreshesAnOldImage: an image asked for when it is past the
// newest quarter of the ring moves to the head and outlives one that was not asked
// for.
func TestGetRefreshesAnOldImage(t *testing.T) {
	c := newCache(t, 300)
	a, b, cc, d := img('a', 100), img('b', 100), img('c', 100), img('d', 100)
	c.Put(a, "image/png")
	c.Put(b, "image/png")
	if !get(c, a) { // a is 200 bytes behind head: moves to 200..300
		t.Fatal("a not held")
	}
	c.Put(cc, "image/png") // wraps to 0, where a was
	c.Put(d, "image/png")  // 100..200, over b
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{{"a", a, true}, {"b", b, false}, {"c", cc, true}, {"d", d, true}} {
		if got := held(c, tt.data); got != tt.want {
			t.Errorf("%s held = %v, want %v", tt.name, got, tt.want)
		}
	}
	if n, used := c.Usage(); n != 3 || used != 300 {
		t.Errorf("Usage = %d images, %d bytes; want 3, 300", n, used)
	}
}
