package imagecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
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

// TestGetRefreshesAnOldImage: an image asked for a third time when it is in
// the oldest eighth of the ring moves to the head and outlives the images
// written after it; one asked for only twice does not move.
func TestGetRefreshesAnOldImage(t *testing.T) {
	for _, tt := range []struct {
		name      string
		reads     int // Gets of a while it is new
		wantMoved bool
	}{
		{"asked for a third time", 2, true},
		{"asked for a second time", 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, 800)
			a := img('a', 100)
			c.Put(a, "image/png")
			for range tt.reads {
				if !get(c, a) { // new: stays where it is
					t.Fatal("a not held")
				}
			}
			var later [][]byte
			for i := range 6 { // 100..700: a is 700 bytes behind head, in the oldest eighth
				later = append(later, img(byte('b'+i), 100))
				c.Put(later[i], "image/png")
			}
			if !get(c, a) {
				t.Fatal("a not held before the ring turns")
			}
			h := img('h', 100)
			c.Put(h, "image/png") // the ring's end if a moved there, else 700..800
			c.Put(img('i', 100), "image/png")
			// Moved: a at 700..800, h at 0..100 (a's old place), i over b.
			// Not moved: h at 700..800, i over a.
			if got := held(c, a); got != tt.wantMoved {
				t.Errorf("a held = %v, want %v", got, tt.wantMoved)
			}
			if got := held(c, later[0]); got == tt.wantMoved {
				t.Errorf("b held = %v, want %v", got, !tt.wantMoved)
			}
			if !held(c, h) || !held(c, later[5]) {
				t.Error("h or g not held")
			}
			if n, used := c.Usage(); n != 8 || used != 800 {
				t.Errorf("Usage = %d images, %d bytes; want 8, 800", n, used)
			}
		})
	}
}

// TestRecentScreenshotsWrittenOnce: the runner's pattern, episodes taking
// steps in turn, each request naming its episode's two previous
// screenshots and carrying a new one. A ring a little larger than two
// screenshots per episode serves every reference and writes each
// screenshot once. The first version, which moved any image named past the
// newest quarter of the ring, wrote 1,340 slots here for 640 screenshots.
func TestRecentScreenshotsWrittenOnce(t *testing.T) {
	const episodes, size = 16, 100
	c := newCache(t, size*(2*episodes+2))
	history := make([][][]byte, episodes)
	misses, puts := 0, 0
	for round := range 40 {
		for e := range episodes {
			for _, old := range history[e] {
				if !get(c, old) {
					misses++
					c.Put(old, "image/png") // the runner sends it again
					puts++
				}
			}
			shot := img(byte(e), size)
			binary.BigEndian.PutUint32(shot, uint32(round)) // each step's screenshot its own
			c.Put(shot, "image/png")
			puts++
			history[e] = append(history[e], shot)
			if len(history[e]) > 2 {
				history[e] = history[e][1:]
			}
		}
	}
	c.mu.Lock()
	written := int(c.first) + len(c.order) // slots written, moves included
	c.mu.Unlock()
	if misses != 0 || written != puts {
		t.Errorf("%d references missed, %d slots written for %d screenshots; want 0 and %d", misses, written, puts, puts)
	}
}
