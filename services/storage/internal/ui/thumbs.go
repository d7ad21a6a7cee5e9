package ui

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	_ "image/png" // screenshots are PNG
	"sync"

	"golang.org/x/image/draw"
)

// Thumbnails are the screenshot shrunk by an integer factor (2 or 4), so
// the page knows the original size from the thumbnail's (and draws the
// action marker at the right pixel) without reading the original.
var thumbScales = map[int]bool{2: true, 4: true}

// maxThumbPixels bounds the screenshots the server decodes to shrink:
// 64 megapixels is 256 MiB of RGBA.
const maxThumbPixels = 64 << 20

// maxThumbDecodes is how many screenshots are decoded for thumbnails at
// once: each may be maxThumbPixels (256 MiB of RGBA, and as much again for
// a PNG's own buffers), and a page asks for dozens of different ones.
const maxThumbDecodes = 2

// slots bounds how many callers run some work at once.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

// do runs fn once a slot is free, or returns ctx's error if ctx ends first.
func (s slots) do(ctx context.Context, fn func() error) error {
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s }()
	return fn()
}

// errNotImage marks a blob the thumbnailer cannot shrink.
var errNotImage = errors.New("not an image that can be shrunk")

// makeThumb decodes a PNG or JPEG and returns it shrunk by scale as JPEG.
func makeThumb(data []byte, scale int) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read image header: %w: %w", err, errNotImage)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxThumbPixels {
		return nil, fmt.Errorf("image of %dx%d pixels: too large: %w", cfg.Width, cfg.Height, errNotImage)
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode image: %w: %w", err, errNotImage)
	}
	b := src.Bounds()
	w, h := (b.Dx()+scale-1)/scale, (b.Dy()+scale-1)/scale
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	// ApproxBiLinear: good enough for a preview, several times faster
	// than CatmullRom on a full-HD screenshot.
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, b, draw.Src, nil)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: 82}); err != nil {
		return nil, fmt.Errorf("encode thumbnail: %w", err)
	}
	return out.Bytes(), nil
}

// lru is a cache of byte slices bounded by their total size.
type lru struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	ll    *list.List
	items map[string]*list.Element
}

type lruEntry struct {
	key  string
	data []byte
}

func newLRU(maxBytes int64) *lru {
	return &lru{max: maxBytes, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*lruEntry).data, true
}

func (c *lru) put(key string, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&lruEntry{key: key, data: data})
	c.bytes += int64(len(data))
	for c.bytes > c.max {
		last := c.ll.Back()
		ent := last.Value.(*lruEntry)
		c.ll.Remove(last)
		delete(c.items, ent.key)
		c.bytes -= int64(len(ent.data))
	}
}

// size returns the entries and bytes held.
func (c *lru) size() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.bytes
}
