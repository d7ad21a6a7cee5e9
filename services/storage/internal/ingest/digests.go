package ingest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"sync"
	"sync/atomic"
)

// digests is a Bloom filter over the digests of the stored blobs. A digest
// it does not hold was never stored, so a new blob (every distinct
// screenshot) is written without first asking the index for it: that
// lookup was 7-9 % of storage's CPU in the ingest and mesh benchmarks. A
// digest it holds may be stored, and the index is asked as before, so a
// false positive (1 % by design, more once blobs are deleted) costs what
// every blob cost before and nothing else.
//
// It must hold every digest in the index, or content stored before would
// be written again (a second copy no record names, given back at the next
// start). Every blob this writer stores is added before it is written, and
// the digests already stored are loaded from the index at start and again,
// into a filter twice the size, when the blobs added outgrow it; until a
// load has finished, every digest may be stored. Only a blob store this
// process alone writes may use it (the file store): the digests another
// process stores are not seen.
type digests struct {
	cur atomic.Pointer[bloom]
	// minCapacity bounds the filter's size from below, in digests.
	minCapacity int

	mu      sync.Mutex
	next    *bloom // being loaded: gets every digest added meanwhile
	growing bool   // a larger filter was asked for
	grow    chan struct{}
}

func newDigests() *digests {
	d := &digests{minCapacity: 1 << 20, grow: make(chan struct{}, 1)}
	d.cur.Store(&bloom{})
	return d
}

// mayHold reports whether sha may be stored; false means it is not. A nil
// filter may hold anything.
func (d *digests) mayHold(sha string) bool {
	if d == nil {
		return true
	}
	b := d.cur.Load()
	return !b.ready.Load() || b.test(sha)
}

// add records sha, about to be stored.
func (d *digests) add(sha string) {
	if d == nil {
		return
	}
	// Under mu, so that a filter put in place meanwhile gets it either way.
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.cur.Load()
	b.add(sha)
	if d.next != nil {
		d.next.add(sha)
	}
	if b.ready.Load() && b.n.Load() > b.capacity && !d.growing {
		d.growing = true
		select {
		case d.grow <- struct{}{}:
		default:
		}
	}
}

// digestLister lists the stored digests; index.DB implements it.
type digestLister interface {
	EachBlobDigest(ctx context.Context, size func(n int), fn func(sha string)) error
}

// load builds a filter from the index, sized for twice what it holds, and
// puts it in place once complete. inflight lists the digests of blobs
// being written and not yet committed: the index scan may miss them.
func (d *digests) load(ctx context.Context, idx digestLister, inflight func(fn func(sha string))) error {
	var nb *bloom
	err := idx.EachBlobDigest(ctx, func(n int) {
		nb = newBloom(max(d.minCapacity, 2*n))
		d.mu.Lock()
		d.next = nb
		d.mu.Unlock()
		// After next is in place, so that a blob either is pinned now or
		// was committed before the scan starts.
		inflight(nb.add)
	}, func(sha string) { nb.add(sha) })
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next = nil
	d.growing = false
	if err != nil {
		return err
	}
	nb.ready.Store(true)
	d.cur.Store(nb)
	if nb.n.Load() > nb.capacity {
		// Blobs committed during the load outgrew it already.
		d.growing = true
		select {
		case d.grow <- struct{}{}:
		default:
		}
	}
	return nil
}

// bloom is a Bloom filter of SHA-256 digests. The digests are uniform
// already, so the bit positions come from the digest itself (double
// hashing of its first two 64-bit words) rather than from another hash.
type bloom struct {
	words    []atomic.Uint64
	mask     uint64 // bits - 1; bits is a power of two
	capacity int64  // digests it holds at about 1 % false positives
	n        atomic.Int64
	ready    atomic.Bool
}

// bloomK positions per digest and bloomBitsPer bits per digest give about
// 1 % false positives at capacity.
const (
	bloomK       = 7
	bloomBitsPer = 10
)

func newBloom(capacity int) *bloom {
	nbits := uint64(1) << bits.Len64(uint64(capacity*bloomBitsPer-1))
	return &bloom{words: make([]atomic.Uint64, nbits/64), mask: nbits - 1, capacity: int64(capacity)}
}

func hashes(sha string) (h1, h2 uint64, ok bool) {
	var b [16]byte
	if len(sha) < 32 {
		return 0, 0, false
	}
	if _, err := hex.Decode(b[:], []byte(sha[:32])); err != nil {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]) | 1, true
}

func (b *bloom) add(sha string) {
	if len(b.words) == 0 {
		return
	}
	h1, h2, ok := hashes(sha)
	if !ok {
		return
	}
	for i := uint64(0); i < bloomK; i++ {
		p := (h1 + i*h2) & b.mask
		b.words[p/64].Or(1 << (p % 64))
	}
	b.n.Add(1)
}

func (b *bloom) test(sha string) bool {
	h1, h2, ok := hashes(sha)
	if !ok || len(b.words) == 0 {
		return true
	}
	for i := uint64(0); i < bloomK; i++ {
		p := (h1 + i*h2) & b.mask
		if b.words[p/64].Load()&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}
