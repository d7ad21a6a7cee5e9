package media

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// The image metrics of gimp.py and vlc.py's compare_images. OSWorld lets
// PIL's exceptions (a missing, corrupt or too small image) escape the
// metric, which ends the evaluation with no reward: here they score 0.
// An image over maxPixels, which PIL would open, is not scored: the
// metrics return its error (metric.ErrOverCap).

// structureSSIM is gimp.py's structure_check_by_ssim: both images in RGB,
// at least 7 pixels each way and of one size, with mean SSIM at least
// threshold.
func structureSSIM(a, b *pimg, threshold float64) bool {
	if a.w < 7 || a.h < 7 || b.w < 7 || b.h < 7 {
		return false
	}
	a, errA := a.convert("RGB")
	b, errB := b.convert("RGB")
	if errA != nil || errB != nil || a.w != b.w || a.h != b.h {
		return false
	}
	s, err := ssim(a, b, 7)
	return err == nil && s >= threshold
}

// structureMSE is structure_check_by_mse: a resized (LANCZOS) to b's size,
// both in RGB, mean squared difference of the [0,1] samples under
// threshold.
func structureMSE(a, b *pimg, threshold float64) bool {
	if a.w != b.w || a.h != b.h {
		a = a.resize(b.w, b.h, lanczos)
	}
	a, errA := a.convert("RGB")
	b, errB := b.convert("RGB")
	if errA != nil || errB != nil {
		return false
	}
	sum := 0.0
	for i := range a.pix {
		d := float64(float32(a.pix[i])/255 - float32(b.pix[i])/255)
		sum += d * d
	}
	return sum/float64(len(a.pix)) < threshold
}

// openPair opens the two images of a two-path metric; ok is false when
// either is missing or unreadable (noted; src is opened first, as OSWorld does,
// and tgt only when src opens), and err is set for one over a size cap.
func openPair(ctx context.Context, src, tgt any) (a, b *pimg, ok bool, err error) {
	if src == nil || tgt == nil {
		return nil, nil, false, nil
	}
	a, err = openImage(src)
	if err != nil {
		return nil, nil, false, metric.Because(ctx, err)
	}
	b, err = openImage(tgt)
	if err != nil {
		return nil, nil, false, metric.Because(ctx, err)
	}
	return a, b, true, nil
}

func floatOpt(opts map[string]any, key string, def float64) float64 {
	if v, ok := opts[key].(float64); ok {
		return v
	}
	return def
}

// brightness is calculate_brightness: the mean of the L conversion.
func brightness(img *pimg) (float64, bool) {
	l, err := img.convert("L")
	if err != nil {
		return 0, false
	}
	return l.mean(), true
}

// normalizeBrightness is normalize_brightness: Image.point with
// min(255, max(0, int(x*factor))) on every band of the image as it is (on
// the indices of a P image, as PIL does).
func normalizeBrightness(img *pimg, target float64) (*pimg, bool) {
	cur, ok := brightness(img)
	if !ok || cur == 0 {
		// Python divides by zero here.
		return nil, false
	}
	factor := target / cur
	var lut [256]uint8
	for i := range lut {
		lut[i] = uint8(min(255, max(0, int(float64(i)*factor))))
	}
	out := img.clone()
	for i, v := range out.pix {
		out.pix[i] = lut[v]
	}
	return out, true
}

// metricBrightnessDecrease is check_brightness_decrease_and_structure_sim:
// src darker than tgt, and after normalising both to brightness 128 their
// MSE is under the threshold option (0.03).
func metricBrightnessDecrease(ctx context.Context, src, tgt any, _ bool, opts map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	ba, ok1 := brightness(a)
	bb, ok2 := brightness(b)
	if !ok1 || !ok2 {
		return 0, nil
	}
	na, ok1 := normalizeBrightness(a, 128)
	nb, ok2 := normalizeBrightness(b, 128)
	if !ok1 || !ok2 {
		return 0, nil
	}
	return metric.Bool(bb > ba && structureMSE(na, nb, floatOpt(opts, "threshold", 0.03))), nil
}

// metricSaturationIncrease is check_saturation_increase_and_structure_sim:
// src's mean HSV saturation above tgt's, and the H and V bands each
// structurally similar (SSIM ≥ 0.9).
func metricSaturationIncrease(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	ha, err := a.convert("HSV")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	hb, err := b.convert("HSV")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	increased := hb.band(1).mean() < ha.band(1).mean()
	same := structureSSIM(ha.band(0), hb.band(0), 0.9) && structureSSIM(ha.band(2), hb.band(2), 0.9)
	return metric.Bool(increased && same), nil
}

// metricContrastIncrease is check_contrast_increase_and_structure_sim: the
// population standard deviation over all samples (alpha included) of src
// above tgt's, and SSIM ≥ 0.65.
func metricContrastIncrease(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	return metric.Bool(stddev(b.pix) < stddev(a.pix) && structureSSIM(a, b, 0.65)), nil
}

func stddev(p []uint8) float64 {
	if len(p) == 0 {
		return math.NaN()
	}
	var s, ss float64
	for _, v := range p {
		s += float64(v)
	}
	m := s / float64(len(p))
	for _, v := range p {
		d := float64(v) - m
		ss += d * d
	}
	return float64(float32(math.Sqrt(ss / float64(len(p)))))
}

// metricFileExistsStructure is check_file_exists_and_structure_sim: src is
// a regular file and structurally similar (SSIM ≥ 0.9) to tgt.
func metricFileExistsStructure(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	p, _ := src.(string)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return 0, nil
	}
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	return metric.Bool(structureSSIM(a, b, 0.9)), nil
}

// metricStructureSim is check_structure_sim: same size and SSIM ≥ 0.9.
func metricStructureSim(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok || a.w != b.w || a.h != b.h {
		return 0, err
	}
	return metric.Bool(structureSSIM(a, b, 0.9)), nil
}

// metricStructureSimThreshold is check_structure_sim_with_threshold: src
// resized (LANCZOS) to tgt's size, both in RGB, SSIM with a window of 7
// (or the largest odd size that fits) at least the ssim_threshold option
// (0.85).
func metricStructureSimThreshold(ctx context.Context, src, tgt any, _ bool, opts map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	threshold := floatOpt(opts, "ssim_threshold", 0.85)
	if a.w != b.w || a.h != b.h {
		a = a.resize(b.w, b.h, lanczos)
	}
	a, errA := a.convert("RGB")
	b, errB := b.convert("RGB")
	if errA != nil || errB != nil {
		return 0, nil
	}
	win := 7
	if d := min(a.w, a.h); d < 7 {
		win = d
		if d%2 == 0 {
			win = d - 1
		}
		if win < 1 {
			return 0, nil
		}
	}
	s, err := ssim(a, b, win)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	return metric.Bool(s >= threshold), nil
}

// metricStructureSimResized is check_structure_sim_resized: src (cropped
// to its opaque pixels when it has transparency) resized with PIL's default
// BICUBIC to tgt's size, SSIM ≥ 0.9.
func metricStructureSimResized(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	var resized *pimg
	if a.mode == "RGBA" || a.mode == "LA" || hasTransparency(a) {
		rgba, err := a.convert("RGBA")
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		x0, y0, x1, y1, ok := rgba.band(3).bbox()
		if !ok {
			return 0, nil
		}
		content, err := rgba.crop(x0, y0, x1, y1).convert("RGB")
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		resized = content.resize(b.w, b.h, bicubic)
	} else {
		resized = a.resize(b.w, b.h, bicubic)
	}
	return metric.Bool(structureSSIM(resized, b, 0.9)), nil
}

// hasTransparency is "transparency" in PIL's img.info.
func hasTransparency(img *pimg) bool {
	return img.hasTrans && (img.mode == "P" || img.mode == "L" || img.mode == "RGB" || img.mode == "1" || img.mode == "I;16")
}

// metricPaletteStructure is check_palette_and_structure_sim: src is a
// palette image, and its RGB conversion is similar to tgt (SSIM ≥ 0.9).
func metricPaletteStructure(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	rgb, err := a.convert("RGB")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	return metric.Bool(a.mode == "P" && structureSSIM(rgb, b, 0.9)), nil
}

// metricImageMirror is check_image_mirror: src flipped left-right is
// similar to tgt with SSIM ≥ 0.99.
func metricImageMirror(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	return metric.Bool(structureSSIM(a.flipLR(), b, 0.99)), nil
}

// metricTextboxLeft is check_textbox_on_leftside: the leftmost dark pixel
// (L < 128) lies within the left 5% of the width.
func metricTextboxLeft(ctx context.Context, src, _ any, _ bool, _ map[string]any) (float64, error) {
	img, err := openImage(src)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	l, err := img.convert("L")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	left := l.w
	for y := 0; y < l.h; y++ {
		for x := 0; x < l.w; x++ {
			if l.pix[y*l.w+x] < 128 {
				left = min(left, x)
				break
			}
		}
	}
	return metric.Bool(float64(left) < float64(l.w)*0.05), nil
}

// metricGreenBackground is check_green_background. OSWorld indexes the
// numpy arrays as [x, y] (column as row): a pixel of tgt that is not black
// must be green (G above R and B) in src at the same transposed index. An
// index past the array raises in Python, so every non-square image, and
// a src smaller than tgt, scores 0 unless a non-green pixel came first.
func metricGreenBackground(ctx context.Context, src, tgt any, _ bool, _ map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, src, tgt)
	if err != nil || !ok {
		return 0, err
	}
	na, nb := bands(a.mode), bands(b.mode)
	if nb < 2 || na < 2 {
		// A 2-D array yields scalars that [:3] cannot slice.
		return 0, nil
	}
	for x := 0; x < b.w; x++ {
		for y := 0; y < b.h; y++ {
			// target_pixels[x, y]: row x, column y.
			if x >= b.h || y >= b.w {
				return 0, nil
			}
			tp := b.pix[(x*b.w+y)*nb : (x*b.w+y+1)*nb]
			if nb >= 3 && tp[0] == 0 && tp[1] == 0 && tp[2] == 0 {
				continue
			}
			if x >= a.h || y >= a.w || na < 3 {
				return 0, nil
			}
			sp := a.pix[(x*a.w+y)*na:]
			if !(sp[1] > sp[0] && sp[1] > sp[2]) {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// metricTrianglePosition is check_triangle_position: the second least
// frequent colour (OSWorld's argsort ascending, index 1) has its centroid
// within 5% of each dimension from the image centre.
func metricTrianglePosition(ctx context.Context, src, _ any, _ bool, _ map[string]any) (float64, error) {
	img, err := openImage(src)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	nb := bands(img.mode)
	if nb < 2 {
		// np.array of a one-band image has no third axis: IndexError.
		return 0, nil
	}
	counts := map[string]int{}
	for i := 0; i < img.w*img.h; i++ {
		counts[string(img.pix[i*nb:(i+1)*nb])]++
	}
	if len(counts) < 2 {
		return 0, nil
	}
	type entry struct {
		c string
		n int
	}
	var es []entry
	for c, n := range counts {
		es = append(es, entry{c, n})
	}
	// np.unique sorts colours lexicographically; argsort then orders by
	// count. Ties keep the colour order here (numpy's introsort does not
	// promise one).
	slices.SortFunc(es, func(p, q entry) int { return strings.Compare(p.c, q.c) })
	slices.SortStableFunc(es, func(p, q entry) int { return cmp.Compare(p.n, q.n) })
	tri := es[1].c
	var sy, sx float64
	n := 0
	for i := 0; i < img.w*img.h; i++ {
		if string(img.pix[i*nb:(i+1)*nb]) == tri {
			sy += float64(i / img.w)
			sx += float64(i % img.w)
			n++
		}
	}
	cy, cx := sy/float64(n), sx/float64(n)
	h, w := float64(img.h), float64(img.w)
	return metric.Bool(math.Abs(cy-h/2) < 0.05*h && math.Abs(cx-w/2) < 0.05*w), nil
}

// metricImageSize is check_image_size: the width and height rules (each
// optional) equal the image's size, or with ignore_transparent its opaque
// content's box. As in OSWorld, any image with info["transparency"] is
// measured by its content too.
func metricImageSize(ctx context.Context, src, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	img, err := openImage(src)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	ignore, _ := rule["ignore_transparent"].(bool)
	w, h := img.w, img.h
	if ignore && (img.mode == "RGBA" || img.mode == "LA") || hasTransparency(img) {
		rgba, err := img.convert("RGBA")
		if err != nil {
			return 0, metric.Because(ctx, err)
		}
		x0, y0, x1, y1, ok := rgba.band(3).bbox()
		w, h = x1-x0, y1-y0
		if !ok {
			w, h = 0, 0
		}
	}
	eq := func(key string, got int) bool {
		v, present := rule[key]
		if !present || v == nil {
			return true
		}
		f, isNum := v.(float64)
		return isNum && f == float64(got)
	}
	return metric.Bool(eq("height", h) && eq("width", w)), nil
}

// metricImageFileSize is check_image_file_size: the file is smaller than
// rules["max_size"] bytes.
func metricImageFileSize(ctx context.Context, src, expected any, _ bool, _ map[string]any) (float64, error) {
	rule, err := metric.Rules(expected)
	if err != nil {
		return 0, err
	}
	p, ok := src.(string)
	if !ok {
		return 0, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	limit, ok := rule["max_size"].(float64)
	if !ok {
		return 0, fmt.Errorf("check_image_file_size: rules.max_size must be a number")
	}
	return metric.Bool(float64(fi.Size()) < limit), nil
}

// metricCompareImages is vlc.py's compare_images: both images in L,
// resized (LANCZOS) to the lexicographically smaller (width, height) of
// the two, SSIM with skimage's defaults; with reference_base_result b the
// score is (s-b)/(1-b) when s ≥ b+0.01, else 0. A negative SSIM, which
// OSWorld would return as is, scores 0.
func metricCompareImages(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	a, b, ok, err := openPair(ctx, result, expected)
	if err != nil || !ok {
		return 0, err
	}
	la, err := a.convert("L")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	lb, err := b.convert("L")
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	w, h := la.w, la.h
	if lb.w < w || lb.w == w && lb.h < h {
		w, h = lb.w, lb.h
	}
	la, lb = la.resize(w, h, lanczos), lb.resize(w, h, lanczos)
	s, err := ssim(la, lb, 7)
	if err != nil {
		return 0, metric.Because(ctx, err)
	}
	if base, ok := opts["reference_base_result"].(float64); ok {
		if s >= base+0.01 {
			return clamp01((s - base) / (1 - base)), nil
		}
		return 0, nil
	}
	return clamp01(s), nil
}

func clamp01(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return min(v, 1)
}

// metricCompareImageList is compare_image_list: pairwise, each predicted
// image (resized with LANCZOS to the gold size, converted to the gold
// mode) has no differing pixel (PIL's getbbox of the difference, which for
// RGBA looks at alpha only).
func metricCompareImageList(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	preds, isList := result.([]any)
	golds, _ := expected.([]any)
	if !isList {
		preds, golds = []any{result}, []any{expected}
	}
	for i := 0; i < min(len(preds), len(golds)); i++ {
		if s, _ := preds[i].(string); s == "" {
			return 0, nil
		}
		if s, _ := golds[i].(string); s == "" {
			return 0, nil
		}
		p, g, ok, err := openPair(ctx, preds[i], golds[i])
		if err != nil || !ok {
			return 0, err
		}
		if p.w != g.w || p.h != g.h {
			p = p.resize(g.w, g.h, lanczos)
		}
		if p.mode != g.mode {
			c, err := p.convert(g.mode)
			if err != nil {
				return 0, metric.Because(ctx, err)
			}
			p = c
		}
		diff := &pimg{mode: g.mode, w: g.w, h: g.h, pix: make([]uint8, len(g.pix))}
		for k := range g.pix {
			d := int(p.pix[k]) - int(g.pix[k])
			diff.pix[k] = uint8(max(d, -d))
		}
		if _, _, _, _, nonzero := diff.bbox(); nonzero {
			return 0, nil
		}
	}
	return 1, nil
}
