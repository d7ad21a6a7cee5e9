package grpcserver

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// bufferPool is the pool every gRPC server, client and codec in the
// process uses. gRPC's default pool has no tier between 32 KB and 1 MB and
// clears the whole capacity of every buffer it hands out, so each 200 KB
// screenshot a runner sends cost a 1 MB memclr when it is marshalled and
// again when it is received: 13 % of the CPU of the storage benchmark. This
// pool has a class at every power of two up to 16 MB and does not clear:
// gRPC overwrites every byte of a buffer before anything reads it.
var bufferPool = newPow2Pool(8, 24)

// init makes it the default, which codecs and clients read when they are
// used. Servers copy the default into their options when the grpc package
// initialises, before this runs, so New passes it to each server as well.
func init() { experimental.SetDefaultBufferPool(bufferPool) }

// pow2Pool keeps buffers in sync.Pools by capacity class: class k holds
// buffers whose capacity is at least 1<<k.
type pow2Pool struct {
	min, max int
	pools    []sync.Pool
}

func newPow2Pool(minExp, maxExp int) *pow2Pool {
	return &pow2Pool{min: minExp, max: maxExp, pools: make([]sync.Pool, maxExp-minExp+1)}
}

var _ mem.BufferPool = (*pow2Pool)(nil)

// Get returns a buffer of the given length with unspecified contents.
func (p *pow2Pool) Get(length int) *[]byte {
	k := p.min
	if length > 1<<p.min {
		k = bits.Len(uint(length - 1)) // smallest k with 1<<k >= length
	}
	if k > p.max {
		b := make([]byte, length)
		return &b
	}
	if b, ok := p.pools[k-p.min].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	b := make([]byte, length, 1<<k)
	return &b
}

// Put returns a buffer to the class its capacity fills.
func (p *pow2Pool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<p.min {
		return
	}
	k := bits.Len(uint(c)) - 1 // largest k with 1<<k <= c
	if k > p.max {
		return
	}
	p.pools[k-p.min].Put(b)
}
