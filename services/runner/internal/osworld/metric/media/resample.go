package media

import "math"

// Pillow's resampling filters (libImaging/Resample.c): OSWorld resizes with
// LANCZOS explicitly and with BICUBIC by default, and its SSIM thresholds
// depend on Pillow's exact rounding.
type filter struct {
	fn      func(float64) float64
	support float64
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

var (
	lanczos = filter{fn: func(x float64) float64 {
		if -3 <= x && x < 3 {
			return sinc(x) * sinc(x/3)
		}
		return 0
	}, support: 3}
	bicubic = filter{fn: func(x float64) float64 {
		const a = -0.5
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return ((a+2)*x-(a+3))*x*x + 1
		}
		if x < 2 {
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	}, support: 2}
)

// precisionBits is Pillow's fixed-point precision for 8-bit images.
const precisionBits = 32 - 8 - 2

// coeffs is precompute_coeffs followed by normalize_coeffs_8bpc.
func coeffs(inSize, outSize int, f filter) (bounds []int, kk []int32, ksize int) {
	scale := float64(inSize) / float64(outSize)
	filterscale := max(scale, 1)
	support := f.support * filterscale
	ksize = int(math.Ceil(support))*2 + 1
	bounds = make([]int, outSize*2)
	kk = make([]int32, outSize*ksize)
	k := make([]float64, ksize)
	for xx := 0; xx < outSize; xx++ {
		center := (float64(xx) + 0.5) * scale
		ss := 1 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := f.fn((float64(x+xmin) - center + 0.5) * ss)
			k[x] = w
			ww += w
		}
		for x := 0; x < ksize; x++ {
			v := 0.0
			if x < xmax {
				v = k[x]
				if ww != 0 {
					v /= ww
				}
			}
			if v < 0 {
				kk[xx*ksize+x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				kk[xx*ksize+x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		bounds[2*xx], bounds[2*xx+1] = xmin, xmax
	}
	return bounds, kk, ksize
}

func clipFixed(ss int64) uint8 {
	v := ss >> precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// resize is PIL's Image.resize(size, resample) without box or
// reducing_gap; lanczosFilter selects LANCZOS, else BICUBIC.
func (img *pimg) resize(w, h int, f filter) *pimg {
	if img.w == w && img.h == h {
		return img.clone()
	}
	if img.mode == "1" || img.mode == "P" {
		return img.resizeNearest(w, h)
	}
	switch img.mode {
	case "RGBA", "LA":
		pre := img.premultiply()
		out := pre.resampleConv(w, h, f)
		out.unpremultiply()
		return out
	}
	return img.resampleConv(w, h, f)
}

// resampleConv is ImagingResample: a horizontal pass, rounded to 8 bits,
// over the rows the vertical pass needs, then the vertical pass.
func (img *pimg) resampleConv(w, h int, f filter) *pimg {
	nb := bands(img.mode)
	cur := img
	bv, kv, ksv := coeffs(img.h, h, f)
	if w != img.w {
		bh, kh, ksh := coeffs(img.w, w, f)
		first := bv[0]
		last := bv[2*h-2] + bv[2*h-1]
		tmp := &pimg{mode: img.mode, w: w, h: last - first, pal: img.pal, format: img.format}
		tmp.pix = make([]uint8, tmp.w*tmp.h*nb)
		for yy := 0; yy < tmp.h; yy++ {
			row := img.pix[(yy+first)*img.w*nb : (yy+first+1)*img.w*nb]
			for xx := 0; xx < w; xx++ {
				xmin, xmax := bh[2*xx], bh[2*xx+1]
				k := kh[xx*ksh : xx*ksh+xmax]
				if nb == 1 {
					// One band (L, every hash's input): the same sum,
					// over slices the compiler need not check per tap.
					src := row[xmin : xmin+xmax]
					ss := int64(1) << (precisionBits - 1)
					for x, kx := range k {
						ss += int64(src[x]) * int64(kx)
					}
					tmp.pix[yy*w+xx] = clipFixed(ss)
					continue
				}
				for c := 0; c < nb; c++ {
					ss := int64(1) << (precisionBits - 1)
					for x := 0; x < xmax; x++ {
						ss += int64(row[(x+xmin)*nb+c]) * int64(k[x])
					}
					tmp.pix[(yy*w+xx)*nb+c] = clipFixed(ss)
				}
			}
		}
		for i := 0; i < h; i++ {
			bv[2*i] -= first
		}
		cur = tmp
	}
	if h == img.h {
		return cur
	}
	out := &pimg{mode: img.mode, w: cur.w, h: h, pal: img.pal, format: img.format}
	out.pix = make([]uint8, cur.w*h*nb)
	for yy := 0; yy < h; yy++ {
		ymin, ymax := bv[2*yy], bv[2*yy+1]
		k := kv[yy*ksv:]
		for xx := 0; xx < cur.w; xx++ {
			for c := 0; c < nb; c++ {
				ss := int64(1) << (precisionBits - 1)
				for y := 0; y < ymax; y++ {
					ss += int64(cur.pix[((y+ymin)*cur.w+xx)*nb+c]) * int64(k[y])
				}
				out.pix[(yy*cur.w+xx)*nb+c] = clipFixed(ss)
			}
		}
	}
	return out
}

// resizeNearest is Pillow's NEAREST resize (ImagingScaleAffine), which it
// forces for modes 1 and P: source positions accumulate the scale step by
// step from half a step, as Pillow's loop does.
func (img *pimg) resizeNearest(w, h int) *pimg {
	nb := bands(img.mode)
	out := &pimg{mode: img.mode, w: w, h: h, pal: img.pal, trans: img.trans, hasTrans: img.hasTrans, format: img.format}
	out.pix = make([]uint8, w*h*nb)
	sx, sy := float64(img.w)/float64(w), float64(img.h)/float64(h)
	xin := make([]int, w)
	xo := sx * 0.5
	for x := range w {
		xin[x] = min(int(xo), img.w-1)
		xo += sx
	}
	yo := sy * 0.5
	for y := 0; y < h; y++ {
		yi := min(int(yo), img.h-1)
		yo += sy
		for x := 0; x < w; x++ {
			copy(out.pix[(y*w+x)*nb:(y*w+x+1)*nb], img.pix[(yi*img.w+xin[x])*nb:(yi*img.w+xin[x]+1)*nb])
		}
	}
	return out
}

// premultiply is PIL's RGBA->RGBa (and LA->La) conversion.
func (img *pimg) premultiply() *pimg {
	nb := bands(img.mode)
	out := img.clone()
	for i := 0; i < img.w*img.h; i++ {
		a := int(img.pix[i*nb+nb-1])
		for c := 0; c < nb-1; c++ {
			t := int(img.pix[i*nb+c])*a + 128
			out.pix[i*nb+c] = uint8(((t >> 8) + t) >> 8)
		}
	}
	return out
}

// unpremultiply is PIL's RGBa->RGBA (and La->LA) conversion, in place.
func (img *pimg) unpremultiply() {
	nb := bands(img.mode)
	for i := 0; i < img.w*img.h; i++ {
		a := int(img.pix[i*nb+nb-1])
		if a == 0 || a == 255 {
			continue
		}
		for c := 0; c < nb-1; c++ {
			img.pix[i*nb+c] = clip8(255 * int(img.pix[i*nb+c]) / a)
		}
	}
}
