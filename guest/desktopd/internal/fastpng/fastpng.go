// Package fastpng encodes 8-bit RGB images as PNG quickly by filling,
// filtering and deflating horizontal strips of the image in parallel.
//
// The strips are compressed independently and joined the way pigz joins
// its blocks: every strip but the last ends with a sync flush, so the
// concatenation is one valid deflate stream. Each strip goes into its own
// IDAT chunk and the zlib Adler-32 is combined from the per-strip sums, so
// nothing has to be computed twice.
package fastpng

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"
)

// FillFunc writes the raw RGB pixels of rows [y0, y1) into dst, which holds
// exactly (y1-y0)*width*3 bytes. It is called concurrently for different
// strips.
type FillFunc func(y0, y1 int, dst []byte) error

// Options tunes the encoder. The zero value is usable.
type Options struct {
	// Strips is how many horizontal strips the image is cut into; 0 picks
	// a value from the image height and GOMAXPROCS.
	Strips int
	// Workers bounds how many strips are processed at once; 0 means
	// GOMAXPROCS.
	Workers int
	// Level is the flate level; 0 means flate.BestSpeed.
	Level int
}

type strip struct {
	raw      []byte
	filtered []byte
	out      bytes.Buffer
	adler    uint32
	n        int // filtered length, for the Adler-32 combination
}

var stripPool = sync.Pool{New: func() any { return new(strip) }}

var writerPool sync.Pool // of *flate.Writer at BestSpeed

// Encode writes a width×height RGB PNG to w, pulling pixels from fill.
func Encode(w io.Writer, width, height int, fill FillFunc, opts Options) error {
	if width <= 0 || height <= 0 || width > 1<<15 || height > 1<<15 {
		return fmt.Errorf("fastpng: bad size %dx%d", width, height)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	n := opts.Strips
	if n <= 0 {
		// A few strips per worker keeps the pool busy while one strip
		// waits for its pixels.
		n = 4 * workers
	}
	if n > height {
		n = height
	}
	level := opts.Level
	if level == 0 {
		level = flate.BestSpeed
	}

	rowBytes := width * 3
	strips := make([]*strip, n)
	errs := make([]error, n)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		y0, y1 := i*height/n, (i+1)*height/n
		s := stripPool.Get().(*strip)
		strips[i] = s
		sem <- struct{}{}
		wg.Add(1)
		go func(i, y0, y1 int, s *strip) {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.encode(width, rowBytes, y0, y1, fill, level, i == n-1)
		}(i, y0, y1, s)
	}
	wg.Wait()
	defer func() {
		for _, s := range strips {
			stripPool.Put(s)
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	var hdr [13]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(width))
	binary.BigEndian.PutUint32(hdr[4:], uint32(height))
	hdr[8] = 8 // bit depth
	hdr[9] = 2 // colour type: truecolour RGB
	if _, err := io.WriteString(w, "\x89PNG\r\n\x1a\n"); err != nil {
		return err
	}
	if err := writeChunk(w, "IHDR", hdr[:]); err != nil {
		return err
	}
	// zlib header: deflate, 32K window, fastest-compression hint.
	if err := writeChunk(w, "IDAT", []byte{0x78, 0x01}); err != nil {
		return err
	}
	sum := uint32(1)
	for _, s := range strips {
		if err := writeChunk(w, "IDAT", s.out.Bytes()); err != nil {
			return err
		}
		sum = adler32Combine(sum, s.adler, s.n)
	}
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], sum)
	if err := writeChunk(w, "IDAT", tail[:]); err != nil {
		return err
	}
	return writeChunk(w, "IEND", nil)
}

func (s *strip) encode(width, rowBytes, y0, y1 int, fill FillFunc, level int, last bool) error {
	rows := y1 - y0
	s.raw = grow(s.raw, rows*rowBytes)
	s.filtered = grow(s.filtered, rows*(rowBytes+1))
	s.out.Reset()
	if err := fill(y0, y1, s.raw); err != nil {
		return fmt.Errorf("fill rows %d-%d: %w", y0, y1, err)
	}
	// The first row of a strip uses Sub (its upper neighbour lives in
	// another strip); the rest use Up, which turns the long runs of
	// identical rows on a desktop into zeros that deflate well.
	for r := 0; r < rows; r++ {
		cur := s.raw[r*rowBytes : (r+1)*rowBytes]
		dst := s.filtered[r*(rowBytes+1) : (r+1)*(rowBytes+1)]
		if r == 0 {
			dst[0] = 1
			copy(dst[1:4], cur[:3])
			for i := 3; i < rowBytes; i++ {
				dst[1+i] = cur[i] - cur[i-3]
			}
			continue
		}
		prev := s.raw[(r-1)*rowBytes : r*rowBytes]
		dst[0] = 2
		d := dst[1:]
		for i := range cur {
			d[i] = cur[i] - prev[i]
		}
	}
	s.adler = adler32.Checksum(s.filtered)
	s.n = len(s.filtered)

	fw, _ := writerPool.Get().(*flate.Writer)
	if fw == nil || level != flate.BestSpeed {
		var err error
		fw, err = flate.NewWriter(&s.out, level)
		if err != nil {
			return err
		}
	} else {
		fw.Reset(&s.out)
	}
	if _, err := fw.Write(s.filtered); err != nil {
		return err
	}
	var err error
	if last {
		err = fw.Close()
	} else {
		err = fw.Flush()
	}
	if level == flate.BestSpeed {
		writerPool.Put(fw)
	}
	return err
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func writeChunk(w io.Writer, typ string, data []byte) error {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	crc := crc32.NewIEEE()
	crc.Write(hdr[4:8])
	crc.Write(data)
	var foot [4]byte
	binary.BigEndian.PutUint32(foot[:], crc.Sum32())
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := w.Write(foot[:])
	return err
}

// adler32Combine returns the Adler-32 of A‖B from adler(A), adler(B) and
// len(B), as zlib's adler32_combine does.
func adler32Combine(a1, a2 uint32, len2 int) uint32 {
	const base = 65521
	rem := uint32(len2 % base)
	sum1 := a1 & 0xffff
	sum2 := (rem * sum1) % base
	sum1 += (a2 & 0xffff) + base - 1
	sum2 += (a1 >> 16) + (a2 >> 16) + base - rem
	if sum1 >= base {
		sum1 -= base
	}
	if sum1 >= base {
		sum1 -= base
	}
	if sum2 >= base<<1 {
		sum2 -= base << 1
	}
	if sum2 >= base {
		sum2 -= base
	}
	return sum1 | sum2<<16
}
