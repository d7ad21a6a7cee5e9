package media

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/cmplx"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_audios in vlc.py: librosa.load (22050 Hz mono, soxr_hq), 20
// MFCCs, each coefficient scaled by its peak, fastdtw with cosine distance,
// exp(-distance/path length). Here ffmpeg decodes, averages the channels
// with equal gains (librosa's to_mono) and resamples with libsoxr at 20
// bits (soxr_hq). From the samples on, the MFCCs and scores match librosa
// 0.10 and fastdtw to about 1e-8 (librosa computes in float32); decoders
// and the resampler's filter edges may differ slightly from soundfile's
// and python-soxr's.

const (
	audioRate = 22050
	nFFT      = 2048
	hopLength = 512
	nMels     = 128
	nMFCC     = 20
	// maxAudioSeconds bounds the decoded audio (about 80 MB of samples);
	// librosa loads any length, so longer audio is not scored
	// (metric.ErrOverCap).
	maxAudioSeconds = 15 * 60
)

// loadAudio is librosa.load(path): mono float samples at 22050 Hz.
func loadAudio(ctx context.Context, path string) ([]float32, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("audio %s is not a readable file", path)
	}
	probe, err := runTool(ctx, "ffprobe", "-v", "error", "-select_streams", "a:0",
		"-show_entries", "stream=channels", "-of", "csv=p=0", path)
	if err != nil {
		return nil, err
	}
	channels, err := strconv.Atoi(strings.TrimSpace(strings.Split(string(probe), "\n")[0]))
	if err != nil || channels < 1 || channels > 64 {
		return nil, fmt.Errorf("audio %s: no audio stream", path)
	}
	gains := make([]string, channels)
	for i := range gains {
		gains[i] = fmt.Sprintf("%.17g*c%d", 1/float64(channels), i)
	}
	filter := "pan=mono|c0=" + strings.Join(gains, "+") + ",aresample=" + strconv.Itoa(audioRate)
	if hasSoxr(ctx) {
		filter += ":resampler=soxr:precision=20"
	}
	out, wait, err := startTool(ctx, "ffmpeg", "-nostdin", "-v", "error", "-i", path,
		"-map", "0:a:0", "-af", filter, "-f", "f32le", "-acodec", "pcm_f32le", "-")
	if err != nil {
		return nil, err
	}
	defer wait()
	const maxBytes = maxAudioSeconds * audioRate * 4
	data, err := io.ReadAll(io.LimitReader(out, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBytes {
		return nil, fmt.Errorf("audio %s is longer than the cap of %d s: %w", path, maxAudioSeconds, metric.ErrOverCap)
	}
	y := make([]float32, len(data)/4)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return y, nil
}

var (
	soxrOnce sync.Once
	soxrOK   bool
)

// hasSoxr reports whether ffmpeg was built with libsoxr; without it the
// audio is resampled with swresample's default filter, which differs from
// soxr_hq only near the band edge.
func hasSoxr(ctx context.Context) bool {
	soxrOnce.Do(func() {
		_, err := runTool(ctx, "ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "anullsrc=r=44100:cl=mono",
			"-t", "0.01", "-af", "aresample=22050:resampler=soxr", "-f", "null", "-")
		soxrOK = err == nil
	})
	return soxrOK
}

// hzToMel and melToHz are librosa's Slaney mel scale.
func hzToMel(f float64) float64 {
	const fsp, minLogHz, minLogMel = 200.0 / 3, 1000.0, 15.0
	logstep := math.Log(6.4) / 27
	if f >= minLogHz {
		return minLogMel + math.Log(f/minLogHz)/logstep
	}
	return f / fsp
}

func melToHz(m float64) float64 {
	const fsp, minLogHz, minLogMel = 200.0 / 3, 1000.0, 15.0
	logstep := math.Log(6.4) / 27
	if m >= minLogMel {
		return minLogHz * math.Exp(logstep*(m-minLogMel))
	}
	return fsp * m
}

// melFilters is librosa.filters.mel(sr=22050, n_fft=2048, n_mels=128)
// with Slaney normalisation.
func melFilters() [][]float64 {
	nBins := nFFT/2 + 1
	melF := make([]float64, nMels+2)
	lo, hi := hzToMel(0), hzToMel(audioRate/2.0)
	for i := range melF {
		melF[i] = melToHz(lo + (hi-lo)*float64(i)/float64(nMels+1))
	}
	w := make([][]float64, nMels)
	for i := range w {
		w[i] = make([]float64, nBins)
		enorm := 2 / (melF[i+2] - melF[i])
		for k := range nBins {
			f := float64(k) * audioRate / nFFT
			lower := -(melF[i] - f) / (melF[i+1] - melF[i])
			upper := (melF[i+2] - f) / (melF[i+2] - melF[i+1])
			w[i][k] = max(0, min(lower, upper)) * enorm
		}
	}
	return w
}

// fft is an in-place radix-2 complex FFT of a power-of-two length.
func fft(a []complex128) {
	n := len(a)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			a[i], a[j] = a[j], a[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		step := cmplx.Exp(complex(0, -2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			w := complex(1, 0)
			for k := 0; k < size/2; k++ {
				u, v := a[start+k], a[start+k+size/2]*w
				a[start+k], a[start+k+size/2] = u+v, u-v
				w *= step
			}
		}
	}
}

// mfcc is librosa.feature.mfcc(y=y, sr=22050): a centred, zero-padded
// STFT with a periodic Hann window, the power mel spectrogram in dB
// (floored 80 dB below its peak), and the orthonormal DCT-II of each frame
// cut to 20 coefficients. It returns frames × 20.
func mfcc(y []float32) [][]float64 {
	pad := nFFT / 2
	frames := 1 + len(y)/hopLength
	window := make([]float64, nFFT)
	for i := range window {
		window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/nFFT)
	}
	mel := melFilters()
	spec := make([][]float64, frames) // frames × mels, in dB
	buf := make([]complex128, nFFT)
	power := make([]float64, nFFT/2+1)
	peak := math.Inf(-1)
	for t := range frames {
		start := t*hopLength - pad
		for i := range buf {
			v := 0.0
			if j := start + i; j >= 0 && j < len(y) {
				v = float64(y[j])
			}
			buf[i] = complex(v*window[i], 0)
		}
		fft(buf)
		for k := range power {
			re, im := real(buf[k]), imag(buf[k])
			power[k] = re*re + im*im
		}
		row := make([]float64, nMels)
		for m := range nMels {
			s := 0.0
			for k, wk := range mel[m] {
				if wk != 0 {
					s += wk * power[k]
				}
			}
			row[m] = 10 * math.Log10(max(1e-10, s))
			peak = max(peak, row[m])
		}
		spec[t] = row
	}
	out := make([][]float64, frames)
	for t, row := range spec {
		for m := range row {
			row[m] = max(row[m], peak-80)
		}
		c := make([]float64, nMFCC)
		for k := range nMFCC {
			s := 0.0
			for n, v := range row {
				s += v * math.Cos(math.Pi*float64(k)*float64(2*n+1)/(2*nMels))
			}
			f := math.Sqrt(1.0 / (2 * nMels))
			if k == 0 {
				f = math.Sqrt(1.0 / (4 * nMels))
			}
			c[k] = 2 * s * f
		}
		out[t] = c
	}
	return out
}

// normalizeRows is librosa.util.normalize(mfcc, axis=1): each coefficient
// divided by its largest magnitude over time (left alone when that is
// below float32's smallest normal).
func normalizeRows(m [][]float64) {
	for k := range nMFCC {
		peak := 0.0
		for _, f := range m {
			peak = max(peak, math.Abs(f[k]))
		}
		if peak < 1.1754943508222875e-38 {
			peak = 1
		}
		for _, f := range m {
			f[k] /= peak
		}
	}
}

// cosineDistance is scipy.spatial.distance.cosine, clipped to [0, 2]
// (NaN for a zero vector, as scipy gives).
func cosineDistance(u, v []float64) float64 {
	var uv, uu, vv float64
	for i := range u {
		uv += u[i] * v[i]
		uu += u[i] * u[i]
		vv += v[i] * v[i]
	}
	d := 1 - uv/math.Sqrt(uu*vv)
	if math.IsNaN(d) {
		return d
	}
	return min(max(d, 0), 2)
}

type cell struct{ i, j int }

// fastDTW is the fastdtw package's fastdtw(x, y, radius=1, dist) in its
// pure-Python form, the one pip installs: the package ships only an sdist
// whose C++ extension needs numpy at build time, which pip's isolated build
// lacks, so setup.py falls back to fastdtw.py. (The compiled module breaks
// ties and bounds its window differently, and its distances differ on long
// sequences.) The path found on halved sequences is widened by the radius,
// projected to full resolution and searched there.
func fastDTW(x, y [][]float64, radius int, dist func(a, b []float64) float64) (float64, []cell) {
	if len(x) < radius+2 || len(y) < radius+2 {
		return dtw(x, y, nil, dist)
	}
	_, path := fastDTW(halve(x), halve(y), radius, dist)
	return dtw(x, y, expandWindow(path, len(x), len(y), radius), dist)
}

func halve(x [][]float64) [][]float64 {
	out := make([][]float64, 0, len(x)/2)
	for i := 0; i+1 < len(x); i += 2 {
		v := make([]float64, len(x[i]))
		for k := range v {
			v[k] = (x[i][k] + x[i+1][k]) / 2
		}
		out = append(out, v)
	}
	return out
}

// expandWindow is fastdtw's __expand_window: the path's cells grown by the
// radius, each split into its four full-resolution cells, then per row
// the first contiguous run of window cells from where the previous row's
// run started.
func expandWindow(path []cell, lenX, lenY, radius int) []cell {
	grown := map[cell]bool{}
	for _, p := range path {
		for a := -radius; a <= radius; a++ {
			for b := -radius; b <= radius; b++ {
				grown[cell{p.i + a, p.j + b}] = true
			}
		}
	}
	win := map[cell]bool{}
	for c := range grown {
		win[cell{2 * c.i, 2 * c.j}] = true
		win[cell{2 * c.i, 2*c.j + 1}] = true
		win[cell{2*c.i + 1, 2 * c.j}] = true
		win[cell{2*c.i + 1, 2*c.j + 1}] = true
	}
	var out []cell
	startJ := 0
	for i := range lenX {
		newStart := -1
		for j := startJ; j < lenY; j++ {
			if win[cell{i, j}] {
				out = append(out, cell{i, j})
				if newStart < 0 {
					newStart = j
				}
			} else if newStart >= 0 {
				break
			}
		}
		if newStart < 0 {
			// Python would fail on range(None, ...); the window always
			// covers every row, so this does not happen.
			newStart = startJ
		}
		startJ = newStart
	}
	return out
}

// dtw is fastdtw's __dtw over the window (every cell when nil). Ties go to
// the first of (i-1, j), (i, j-1), (i-1, j-1), as Python's min does.
func dtw(x, y [][]float64, window []cell, dist func(a, b []float64) float64) (float64, []cell) {
	if window == nil {
		for i := range x {
			for j := range y {
				window = append(window, cell{i, j})
			}
		}
	}
	type entry struct {
		cost float64
		from cell
	}
	d := make(map[cell]entry, len(window)+1)
	d[cell{0, 0}] = entry{0, cell{0, 0}}
	get := func(c cell) entry {
		if e, ok := d[c]; ok {
			return e
		}
		return entry{cost: math.Inf(1)}
	}
	for _, w := range window {
		i, j := w.i+1, w.j+1
		dt := dist(x[i-1], y[j-1])
		best := entry{get(cell{i - 1, j}).cost + dt, cell{i - 1, j}}
		for _, c := range []cell{{i, j - 1}, {i - 1, j - 1}} {
			if v := get(c).cost + dt; v < best.cost {
				best = entry{v, c}
			}
		}
		d[cell{i, j}] = best
	}
	var path []cell
	i, j := len(x), len(y)
	for !(i == 0 && j == 0) {
		path = append(path, cell{i - 1, j - 1})
		e, ok := d[cell{i, j}]
		if !ok {
			return math.Inf(1), nil
		}
		i, j = e.from.i, e.from.j
	}
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	return d[cell{len(x), len(y)}].cost, path
}

// metricCompareAudios is vlc.py's compare_audios. An unreadable or empty
// file counts as empty: two empty files score 1, one scores 0.
func metricCompareAudios(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	p1, _ := result.(string)
	p2, _ := expected.(string)
	if p1 == "" || p2 == "" {
		return 0, nil
	}
	if err := requireTools("compare_audios", "ffmpeg", "ffprobe"); err != nil {
		return 0, err
	}
	y1, err1 := loadAudio(ctx, p1)
	y2, err2 := loadAudio(ctx, p2)
	if err := cmp.Or(metric.OverCap(err1), metric.OverCap(err2)); err != nil {
		return 0, fmt.Errorf("compare_audios: %w", err)
	}
	bad1, bad2 := err1 != nil || len(y1) == 0, err2 != nil || len(y2) == 0
	if bad1 && bad2 {
		return 1, nil
	}
	if bad1 || bad2 {
		if err := cmp.Or(err1, err2); err != nil {
			metric.Notef(ctx, "%v", err)
		}
		return 0, nil
	}
	m1, m2 := mfcc(y1), mfcc(y2)
	normalizeRows(m1)
	normalizeRows(m2)
	distance, path := fastDTW(m1, m2, 1, cosineDistance)
	if len(path) == 0 {
		return 0, nil
	}
	s := math.Exp(-distance / float64(len(path)))
	if math.IsNaN(s) {
		// A silent frame has no direction: scipy's cosine gives NaN, and
		// so would OSWorld's score.
		return 0, nil
	}
	return s, nil
}
