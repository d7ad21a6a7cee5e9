package media

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// ffmpegAudio renders a lavfi source to a file.
func ffmpegAudio(t *testing.T, dir, name, src string, args ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	base := []string{"-loglevel", "error", "-y", "-f", "lavfi", "-i", src}
	run(t, "ffmpeg", append(append(base, args...), p)...)
	return p
}

func TestCompareAudios(t *testing.T) {
	needTools(t, "ffmpeg", "ffprobe", "sndfile-info", "sndfile-convert")
	dir := t.TempDir()
	// A melody: three tones in turn, as a stereo WAV at 44.1 kHz and the
	// same as a mono MP3.
	melody := "aevalsrc=0.4*sin(2*PI*t*(440+220*floor(mod(t\\,1.5)/0.5)))|0.4*sin(2*PI*t*(440+220*floor(mod(t\\,1.5)/0.5))):s=44100:d=3"
	wav := ffmpegAudio(t, dir, "gold.wav", melody)
	mp3 := ffmpegAudio(t, dir, "same.mp3", melody, "-ac", "1", "-b:a", "128k")
	other := ffmpegAudio(t, dir, "other.wav", "aevalsrc=0.4*sin(2*PI*t*(1500+700*floor(mod(t\\,0.9)/0.3))):s=22050:d=3")
	noise := ffmpegAudio(t, dir, "noise.wav", "anoisesrc=d=3:c=pink:r=22050:seed=3")
	empty := filepath.Join(dir, "empty.wav")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	score := func(a, b any) float64 {
		t.Helper()
		s, err := metricCompareAudios(context.Background(), a, b, true, nil)
		if err != nil {
			t.Fatalf("compare_audios(%v, %v): %v", a, b, err)
		}
		return s
	}
	if got := score(wav, wav); !(math.Abs(got-1) <= 1e-12) {
		t.Errorf("same file got %v, want 1", got)
	}
	// The wants are librosa 0.10.2's mfcc and normalize with fastdtw 0.3.4
	// and scipy's cosine on the samples loadAudio gives (they agree to
	// 1e-8); the tolerance leaves room for other ffmpeg builds.
	for _, tt := range []struct {
		name string
		file string
		want float64
	}{
		{"the melody as MP3", mp3, 0.9999862651},
		{"another melody", other, 0.3989202929},
		{"pink noise", noise, 0.3192295499},
	} {
		if got := score(tt.file, wav); !(math.Abs(got-tt.want) <= 1e-3) {
			t.Errorf("%s: compare_audios got %.10f, want %.10f", tt.name, got, tt.want)
		}
	}
	tests := []struct {
		name string
		a, b any
		want float64
	}{
		{"one empty", empty, wav, 0},
		{"both empty", empty, filepath.Join(dir, "none.wav"), 1},
		{"nil", nil, wav, 0},
		{"not audio", fixture("src.png"), wav, 0},
	}
	for _, tt := range tests {
		if got := score(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: compare_audios got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestMelFilters checks librosa's Slaney filterbank properties: the mel
// scale is linear below 1 kHz, and each triangle has area-normalised
// height 2/(f[i+2]-f[i]).
func TestMelFilters(t *testing.T) {
	if got := hzToMel(1000); !(math.Abs(got-15) <= 1e-12) {
		t.Errorf("hzToMel(1000) got %v, want 15", got)
	}
	for _, f := range []float64{0, 300, 999, 1000, 4000, 11025} {
		if got := melToHz(hzToMel(f)); !(math.Abs(got-f) <= 1e-9) {
			t.Errorf("melToHz(hzToMel(%v)) got %v", f, got)
		}
	}
	w := melFilters()
	if len(w) != nMels || len(w[0]) != nFFT/2+1 {
		t.Fatalf("filterbank is %dx%d", len(w), len(w[0]))
	}
	for i, row := range w {
		nonzero := false
		for _, v := range row {
			if v < 0 {
				t.Fatalf("filter %d has a negative weight", i)
			}
			nonzero = nonzero || v > 0
		}
		if !nonzero {
			t.Errorf("filter %d is empty", i)
		}
	}
}

func TestFastDTW(t *testing.T) {
	seq := func(vals ...float64) [][]float64 {
		out := make([][]float64, len(vals))
		for i, v := range vals {
			out[i] = []float64{v}
		}
		return out
	}
	abs := func(a, b []float64) float64 { return math.Abs(a[0] - b[0]) }
	// fastdtw.fastdtw([1,2,3,4,5,6,7,8], [1,1,2,3,4,5,6,8], dist=...) is
	// exact here: the warping is within the radius.
	d, path := fastDTW(seq(1, 2, 3, 4, 5, 6, 7, 8), seq(1, 1, 2, 3, 4, 5, 6, 8), 1, abs)
	if d != 1 {
		t.Errorf("distance got %v, want 1", d)
	}
	if path[0] != (cell{0, 0}) || path[len(path)-1] != (cell{7, 7}) {
		t.Errorf("path got %v", path)
	}
	d, _ = dtw(seq(0, 0), seq(0), nil, abs)
	if d != 0 {
		t.Errorf("dtw got %v, want 0", d)
	}
}

// TestFastDTWParity compares with fastdtw 0.3.4's pure-Python fastdtw and
// scipy's cosine on the same sequences: 147.40690121569526 over a path of
// 400 cells (the compiled module would give 175.48366618556685 and 410).
func TestFastDTWParity(t *testing.T) {
	x := make([][]float64, 300)
	for i := range x {
		x[i] = make([]float64, 20)
		for k := range x[i] {
			x[i][k] = math.Sin(float64(i)*0.37+float64(k)*1.3) + 0.5*math.Cos(float64(i*i)*0.011+float64(k))
		}
	}
	y := make([][]float64, 333)
	for j := range y {
		y[j] = make([]float64, 20)
		for k := range y[j] {
			y[j][k] = math.Sin(float64(j)*0.33+float64(k)*1.3+0.2) + 0.5*math.Cos(float64(j*j)*0.013+float64(k))
		}
	}
	d, path := fastDTW(x, y, 1, cosineDistance)
	if math.Abs(d-147.40690121569526) > 1e-9 || len(path) != 400 {
		t.Errorf("fastDTW got %v over %d cells, want 147.40690121569526 over 400", d, len(path))
	}
}
