package media

import "fmt"

// ssimPlane is skimage.metrics.structural_similarity for two single-band
// uint8 images of one size with its defaults: a win×win uniform window,
// K1 0.01, K2 0.03, data_range 255 (the uint8 range), the sample covariance,
// and the mean over the pixels whose window lies inside the image (skimage
// crops (win-1)/2 from each side, so scipy's border mode never matters).
// Window sums are exact integers, so this differs from scipy's running float
// sums only in the last bits.
func ssimPlane(a, b []uint8, w, h, win int) (float64, error) {
	if win%2 == 0 || win < 1 {
		return 0, fmt.Errorf("ssim: window size %d must be odd", win)
	}
	if w < win || h < win {
		return 0, fmt.Errorf("ssim: window size %d exceeds the %dx%d image", win, w, h)
	}
	const (
		c1 = (0.01 * 255) * (0.01 * 255)
		c2 = (0.03 * 255) * (0.03 * 255)
	)
	np := float64(win * win)
	covNorm := np / (np - 1)
	// Column sums over the current band of win rows: a, b, a², b², ab.
	ca := make([]int64, w)
	cb := make([]int64, w)
	caa := make([]int64, w)
	cbb := make([]int64, w)
	cab := make([]int64, w)
	add := func(y int, sign int64) {
		ra, rb := a[y*w:(y+1)*w], b[y*w:(y+1)*w]
		for x := range w {
			va, vb := int64(ra[x]), int64(rb[x])
			ca[x] += sign * va
			cb[x] += sign * vb
			caa[x] += sign * va * va
			cbb[x] += sign * vb * vb
			cab[x] += sign * va * vb
		}
	}
	for y := range win {
		add(y, 1)
	}
	total := 0.0
	for top := 0; ; top++ {
		var sa, sb, saa, sbb, sab int64
		for x := range win {
			sa, sb, saa, sbb, sab = sa+ca[x], sb+cb[x], saa+caa[x], sbb+cbb[x], sab+cab[x]
		}
		for x := 0; ; x++ {
			ux, uy := float64(sa)/np, float64(sb)/np
			uxx, uyy, uxy := float64(saa)/np, float64(sbb)/np, float64(sab)/np
			vx := covNorm * (uxx - ux*ux)
			vy := covNorm * (uyy - uy*uy)
			vxy := covNorm * (uxy - ux*uy)
			a1, a2 := 2*ux*uy+c1, 2*vxy+c2
			b1, b2 := ux*ux+uy*uy+c1, vx+vy+c2
			total += (a1 * a2) / (b1 * b2)
			if x+win >= w {
				break
			}
			sa += ca[x+win] - ca[x]
			sb += cb[x+win] - cb[x]
			saa += caa[x+win] - caa[x]
			sbb += cbb[x+win] - cbb[x]
			sab += cab[x+win] - cab[x]
		}
		if top+win >= h {
			break
		}
		add(top, -1)
		add(top+win, 1)
	}
	return total / float64((w-win+1)*(h-win+1)), nil
}

// ssim is structural_similarity over all bands of two images of one mode
// and size (channel_axis=2 for several bands): the mean of the per-band
// means.
func ssim(x, y *pimg, win int) (float64, error) {
	if x.w != y.w || x.h != y.h || x.mode != y.mode {
		return 0, fmt.Errorf("ssim: images differ in size or mode")
	}
	nb := bands(x.mode)
	if nb == 1 {
		return ssimPlane(x.pix, y.pix, x.w, x.h, win)
	}
	sum := 0.0
	for k := range nb {
		s, err := ssimPlane(x.band(k).pix, y.band(k).pix, x.w, x.h, win)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum / float64(nb), nil
}
