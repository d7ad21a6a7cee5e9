package media

import (
	"math"
	"math/bits"
	"slices"
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
	// Unnormalised DCT-II (scipy.fftpack's default): 2·Σ x·cos(πk(2i+1)/2N).
	var cosTab [k][n]float64
	for u := range k {
		for i := range n {
			cosTab[u][i] = 2 * math.Cos(math.Pi*float64(u)*float64(2*i+1)/(2*n))
		}
	}
	// First along axis 0 (down the columns), then along axis 1.
	var cols [k][n]float64
	for u := range k {
		for x := range n {
			s := 0.0
			for y := range n {
				s += float64(l.pix[y*n+x]) * cosTab[u][y]
			}
			cols[u][x] = s
		}
	}
	var low [k * k]float64
	for u := range k {
		for v := range k {
			s := 0.0
			for x := range n {
				s += cols[u][x] * cosTab[v][x]
			}
			low[u*k+v] = s
		}
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

// hashDistance is ImageHash.__sub__: the number of differing bits.
func hashDistance(a, b uint64) int { return bits.OnesCount64(a ^ b) }
