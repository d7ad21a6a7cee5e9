package docs

import (
	"math"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/docs/docx"
)

// lab converts an 8-bit sRGB colour to CIE L*a*b* as scikit-image's
// rgb2lab does (D65, 2° observer, its sRGB matrix and its 0.008856
// threshold), so that distances near the threshold agree with OSWorld.
func lab(c docx.RGB) [3]float64 {
	var lin [3]float64
	for i, v := range c {
		x := float64(v) / 255.0
		if x > 0.04045 {
			x = math.Pow((x+0.055)/1.055, 2.4)
		} else {
			x /= 12.92
		}
		lin[i] = x
	}
	m := [3][3]float64{
		{0.412453, 0.357580, 0.180423},
		{0.212671, 0.715160, 0.072169},
		{0.019334, 0.119193, 0.950227},
	}
	white := [3]float64{0.95047, 1.0, 1.08883}
	var f [3]float64
	for i := range 3 {
		x := (m[i][0]*lin[0] + m[i][1]*lin[1] + m[i][2]*lin[2]) / white[i]
		if x > 0.008856 {
			x = math.Cbrt(x)
		} else {
			x = 7.787*x + 16.0/116.0
		}
		f[i] = x
	}
	return [3]float64{116*f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])}
}

// polar2pi is scikit-image's _cart2polar_2pi: radius and angle in [0, 2π).
func polar2pi(x, y float64) (float64, float64) {
	t := math.Atan2(y, x)
	if t < 0 {
		t += 2 * math.Pi
	}
	return math.Hypot(x, y), t
}

// deltaE2000 is the CIEDE2000 distance of two sRGB colours, as docs.py
// computes it with rgb2lab and deltaE_ciede2000.
func deltaE2000(c1, c2 docx.RGB) float64 { return ciede2000(lab(c1), lab(c2)) }

// ciede2000 is scikit-image's deltaE_ciede2000 (kL = kC = kH = 1).
func ciede2000(l1, l2 [3]float64) float64 {
	L1, a1, b1 := l1[0], l1[1], l1[2]
	L2, a2, b2 := l2[0], l2[1], l2[2]

	cbar := 0.5 * (math.Hypot(a1, b1) + math.Hypot(a2, b2))
	c7 := math.Pow(cbar, 7)
	g := 0.5 * (1 - math.Sqrt(c7/(c7+math.Pow(25, 7))))
	scale := 1 + g
	C1, h1 := polar2pi(a1*scale, b1)
	C2, h2 := polar2pi(a2*scale, b2)

	lbar := 0.5 * (L1 + L2)
	tmp := (lbar - 50) * (lbar - 50)
	sl := 1 + 0.015*tmp/math.Sqrt(20+tmp)
	lTerm := (L2 - L1) / sl

	cbar = 0.5 * (C1 + C2)
	sc := 1 + 0.045*cbar
	cTerm := (C2 - C1) / sc

	hDiff := h2 - h1
	hSum := h1 + h2
	cc := C1 * C2
	dH := hDiff
	if hDiff > math.Pi {
		dH -= 2 * math.Pi
	}
	if hDiff < -math.Pi {
		dH += 2 * math.Pi
	}
	if cc == 0 {
		dH = 0
	}
	dHTerm := 2 * math.Sqrt(cc) * math.Sin(dH/2)

	hbar := hSum
	if cc != 0 && math.Abs(hDiff) > math.Pi {
		if hSum < 2*math.Pi {
			hbar += 2 * math.Pi
		} else {
			hbar -= 2 * math.Pi
		}
	}
	if cc == 0 {
		hbar *= 2
	}
	hbar *= 0.5

	deg := math.Pi / 180
	t := 1 - 0.17*math.Cos(hbar-30*deg) + 0.24*math.Cos(2*hbar) +
		0.32*math.Cos(3*hbar+6*deg) - 0.20*math.Cos(4*hbar-63*deg)
	sh := 1 + 0.015*cbar*t
	hTerm := dHTerm / sh

	c7 = math.Pow(cbar, 7)
	rc := 2 * math.Sqrt(c7/(c7+math.Pow(25, 7)))
	dtheta := 30 * deg * math.Exp(-math.Pow((hbar/deg-275)/25, 2))
	rTerm := -math.Sin(2*dtheta) * rc * cTerm * hTerm

	de2 := lTerm*lTerm + cTerm*cTerm + hTerm*hTerm + rTerm
	return math.Sqrt(math.Max(de2, 0))
}
