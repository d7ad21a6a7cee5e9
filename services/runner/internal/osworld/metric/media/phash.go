package media

import (
	"math"
	"math/bits"
	"slices"
	"sync"
)

// phash is imagehash.phash (hash_size 8): the image in L, resized with
// LANCZOS to 32×32, a 2-D DCT-II, and the 8×8 lowest frequencies compared
// with their median. The 64 bits are in row-major order.
func phash(img *pimg) (uint64, error) {
	l, err := img.convert("L")
	if err != nil {
		return 0, err
	}
	l = l.resize(32, 32, lanczos)
	const n, k = 32, 8
	// First along axis 0 (down the columns), then along axis 1, as
	// scipy.fftpack.dct(dct(pixels, axis=0), axis=1).
	var cols [k][n]float64
	col := make([]float64, n)
	for x := range n {
		for y := range n {
			col[y] = float64(l.pix[y*n+x])
		}
		out := dctII(col)
		for u := range k {
			cols[u][x] = out[u]
		}
	}
	var low [k * k]float64
	for u := range k {
		out := dctII(cols[u][:])
		copy(low[u*k:], out[:k])
	}
	sorted := low
	slices.Sort(sorted[:])
	med := (sorted[31] + sorted[32]) / 2
	var h uint64
	for i, v := range low {
		if v > med {
			h |= 1 << i
		}
	}
	return h, nil
}

// dctII is scipy.fftpack.dct's unnormalised DCT-II of x (a length that is
// a power of two): y[k] = 2·Σ x[i]·cos(πk(2i+1)/2N). It splits x into
// the sums and differences of its mirrored halves, as an FFT's butterflies
// do, so that a coefficient that is zero in exact arithmetic because the
// input is constant (or mirror-symmetric) along the axis comes out exactly
// 0, as scipy's gives it. A direct sum leaves rounding noise there
// instead, and the hash of a flat frame, compared with a median of zeros,
// then rests on that noise.
func dctII(x []float64) []float64 {
	out := make([]float64, len(x))
	dctHalf(x, out)
	for i := range out {
		out[i] *= 2
	}
	return out
}

// dctHalf writes Σ x[i]·cos(πk(2i+1)/2N) for each k to out.
func dctHalf(x, out []float64) {
	n := len(x)
	if n == 1 {
		out[0] = x[0]
		return
	}
	h := n / 2
	sum, diff := make([]float64, h), make([]float64, h)
	for i := range h {
		sum[i] = x[i] + x[n-1-i]
		diff[i] = x[i] - x[n-1-i]
	}
	// The even outputs are the half-length transform of the sums; the
	// odd ones are direct sums over the differences.
	even := make([]float64, h)
	dctHalf(sum, even)
	cos := oddCos(n)
	for k := range h {
		out[2*k] = even[k]
		s := 0.0
		for i := range h {
			s += diff[i] * cos[k*h+i]
		}
		out[2*k+1] = s
	}
}

// oddCos is cos(π(2k+1)(2i+1)/2n) for k, i < n/2, row k first: the odd
// outputs' weights, made once per length (phash uses 2 to 32).
func oddCos(n int) []float64 {
	oddCosMu.Lock()
	defer oddCosMu.Unlock()
	if t, ok := oddCosTabs[n]; ok {
		return t
	}
	h := n / 2
	t := make([]float64, h*h)
	for k := range h {
		for i := range h {
			t[k*h+i] = math.Cos(math.Pi * float64(2*k+1) * float64(2*i+1) / float64(2*n))
		}
	}
	oddCosTabs[n] = t
	return t
}

var (
	oddCosMu   sync.Mutex
	oddCosTabs = map[int][]float64{}
)

// hashDistance is ImageHash.__sub__: the number of differing bits.
func hashDistance(a, b uint64) int { return bits.OnesCount64(a ^ b) }
