package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestRealFFTPower checks the half-length real FFT against a direct DFT,
// and that silence gives exact zeros (mfcc's silent frames rely on it).
func TestRealFFTPower(t *testing.T) {
	const n = nFFT
	r := rand.New(rand.NewPCG(1, 2))
	cases := map[string]func(i int) float64{
		"zeros":   func(int) float64 { return 0 },
		"impulse": func(i int) float64 { return float64(min(1, max(0, 1-i))) },
		"dc":      func(int) float64 { return 0.25 },
		"nyquist": func(i int) float64 { return float64(1 - 2*(i%2)) },
		"tone":    func(i int) float64 { return math.Sin(2 * math.Pi * 440 * float64(i) / audioRate) },
		"noise":   func(int) float64 { return r.Float64()*2 - 1 },
		"quiet":   func(int) float64 { return (r.Float64()*2 - 1) * 1e-7 },
	}
	rf := newRealFFT(n)
	for name, gen := range cases {
		x := make([]float64, n)
		energy := 0.0
		for i := range x {
			x[i] = gen(i)
			energy += x[i] * x[i]
		}
		got := make([]float64, n/2+1)
		rf.power(x, got)
		for k := range got {
			var want complex128
			for i, v := range x {
				want += complex(v, 0) * cmplx.Exp(complex(0, -2*math.Pi*float64(k*i%n)/n))
			}
			w := real(want)*real(want) + imag(want)*imag(want)
			// Rounding is relative to the frame's energy (Parseval: the
			// bins' power sums to n·energy).
			if d := math.Abs(got[k] - w); d > 1e-11*float64(n)*energy {
				t.Fatalf("%s: bin %d: got %v, want %v", name, k, got[k], w)
			}
			if energy == 0 && got[k] != 0 {
				t.Fatalf("%s: bin %d of silence is %v, want exactly 0", name, k, got[k])
			}
		}
	}
}

// TestMelBands checks that a band's span gives the same energy, to the
// bit, as the whole filter row it was cut from.
func TestMelBands(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	filters, bands := melFilters(), melBands()
	power := make([]float64, nFFT/2+1)
	for range 20 {
		for k := range power {
			power[k] = r.ExpFloat64() * math.Pow(10, float64(r.IntN(12)-6))
		}
		for m := range nMels {
			want := 0.0
			for k, wk := range filters[m] {
				if wk != 0 {
					want += wk * power[k]
				}
			}
			got := 0.0
			for k, wk := range bands[m].w {
				if wk != 0 {
					got += wk * power[bands[m].lo+k]
				}
			}
			if got != want {
				t.Fatalf("band %d: got %v, want %v", m, got, want)
			}
		}
	}
}

// TestMonoReader checks the channel mean of every sample format, read in
// batches of any size, with a partial frame at the end dropped and the
// frame cap kept.
func TestMonoReader(t *testing.T) {
	// frames of 3 channels, as the numbers the decoder gives.
	samples := [][]float64{{0.5, -0.25, 0.125}, {1, 1, 1}, {-1, 0, 0.75}, {0.1, 0.2, 0.3}, {0, 0, 0}}
	encode := func(format string, channels int) []byte {
		var b bytes.Buffer
		for _, f := range samples {
			for _, v := range f[:channels] {
				switch format {
				case decodeInt16:
					_ = binary.Write(&b, binary.LittleEndian, int16(math.Round(v*32767)))
				case decodeFloat:
					_ = binary.Write(&b, binary.LittleEndian, float32(v))
				default:
					_ = binary.Write(&b, binary.LittleEndian, v)
				}
			}
		}
		return b.Bytes()
	}
	// want is numpy's float32 mean of the frame as the decoder gives it.
	want := func(format string, channels int, gain float64) []float32 {
		var out []float32
		for _, f := range samples {
			var sum float32
			for _, v := range f[:channels] {
				switch format {
				case decodeInt16:
					sum += float32(int16(math.Round(v*32767))) * (1.0 / 32768)
				case decodeFloat:
					sum += float32(v)
				default:
					sum += float32(v * gain)
				}
			}
			if channels > 1 {
				sum /= float32(channels)
			}
			out = append(out, sum)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		format    string
		channels  int
		gain      float64
		partial   int // bytes of a frame cut short at the end
		oneByte   bool
		maxFrames int
	}{
		{name: "int16 mono", format: decodeInt16, channels: 1, gain: 1, maxFrames: 100},
		{name: "int16 stereo, one byte at a time", format: decodeInt16, channels: 2, gain: 1, oneByte: true, maxFrames: 100},
		{name: "float32 3 channels, partial frame", format: decodeFloat, channels: 3, gain: 1, partial: 7, maxFrames: 100},
		{name: "float32 3 channels, one byte at a time, partial frame", format: decodeFloat, channels: 3, gain: 1, partial: 5, oneByte: true, maxFrames: 100},
		{name: "float64 with gain", format: decodeDouble, channels: 2, gain: 1.5, maxFrames: 100},
		{name: "over the frame cap", format: decodeFloat, channels: 2, gain: 1, maxFrames: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := encode(tc.format, tc.channels)
			data = append(data, make([]byte, tc.partial)...)
			var src io.Reader = bytes.NewReader(data)
			if tc.oneByte {
				src = iotest.OneByteReader(src)
			}
			m := &monoReader{src: src, channels: tc.channels, format: tc.format, gain: tc.gain, maxFrames: tc.maxFrames}
			got, err := readFloats(m, 1000, 0)
			wantY := want(tc.format, tc.channels, tc.gain)
			if tc.maxFrames < len(samples) {
				if !errors.Is(err, errAudioOverCap) || !m.over {
					t.Fatalf("past %d frames: err %v, over %v; want errAudioOverCap", tc.maxFrames, err, m.over)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wantY) || m.frames != len(samples) {
				t.Fatalf("got %d samples (%d frames), want %d", len(got), m.frames, len(wantY))
			}
			for i := range got {
				if got[i] != wantY[i] {
					t.Errorf("sample %d: got %v, want %v", i, got[i], wantY[i])
				}
			}
		})
	}
}
