package media

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/cmplx"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_audios in vlc.py: librosa.load (22050 Hz mono, soxr_hq), 20
// MFCCs, each coefficient scaled by its peak, fastdtw with cosine distance,
// exp(-distance/path length).
//
// librosa.load reads a file with soundfile (libsndfile) as float32 when
// libsndfile knows the format, and otherwise through audioread, which has
// the ffmpeg command write 16-bit samples. Here ffmpeg decodes both ways
// (librosaDecoding picks which), except Ogg Vorbis and Opus, which
// libsndfile's sndfile-convert decodes; the channels are averaged in
// float32 as numpy's mean does, and ffmpeg resamples the mono samples with
// libsoxr at librosa's quality (soxr_hq) and to librosa's length. For WAV,
// AIFF, AU, CAF, FLAC, Ogg and audioread's formats the samples are
// libsndfile's or audioread's bit for bit; MP3's differ from libmpg123's
// in the last bits of float32. From the samples on, the MFCCs and scores
// match librosa 0.11 and fastdtw to about 1e-6 (librosa computes in
// float32). TestCompareAudiosMatchesVLCPy checks all of it against
// OSWorld's vlc.py.

const (
	audioRate = 22050
	nFFT      = 2048
	hopLength = 512
	nMels     = 128
	nMFCC     = 20
	// maxAudioSeconds bounds the decoded audio (about 80 MB of samples at
	// librosa's rate); librosa loads any length, so longer audio is not
	// scored (metric.ErrOverCap).
	maxAudioSeconds = 15 * 60
	// maxAudioRate and maxAudioChannels bound what the decoder is let to
	// write per second. libsndfile and ffmpeg take more, which no real
	// recording nears: such a file fails to load (score 0).
	maxAudioRate     = 768000
	maxAudioChannels = 64
)

// errNotDecodedAlike marks a file that librosa would decode with a
// decoder whose samples ffmpeg's do not match: a score computed from
// ffmpeg's would differ from OSWorld's, so the metric fails instead.
var errNotDecodedAlike = errors.New("OSWorld decodes it otherwise than ffmpeg can: not scored")

// audioStream is what ffprobe reports of a file's first audio stream;
// demuxer, when set, is the format ffmpeg is told the file has.
type audioStream struct {
	format, codec, demuxer string
	channels, rate         int
	// seconds is the length ffprobe gives (an estimate for some formats,
	// 0 when it gives none): only a hint for how much to allocate.
	seconds float64
}

// probeAudio asks ffprobe about path's first audio stream. ffmpeg's
// format detection passes over some files that libsndfile opens (an MP3
// of a few frames behind an ID3 tag), which soundfile reads in OSWorld:
// when ffprobe finds nothing, libsndfile is asked which format the file
// is, and ffprobe is told.
func probeAudio(ctx context.Context, path string) (audioStream, error) {
	s, err := ffprobeAudio(ctx, path, "")
	if err == nil {
		return s, nil
	}
	out, infoErr := runTool(ctx, "sndfile-info", path)
	if infoErr != nil {
		return audioStream{}, err
	}
	info, ok := parseSndfileInfo(string(out))
	if !ok {
		return audioStream{}, err
	}
	demuxer, known := sndfileDemuxers[info.format&sndfileTypeMask]
	if !known {
		return audioStream{}, fmt.Errorf("audio %s: libsndfile reads it as format %#x, which ffmpeg does not recognise: %w",
			path, info.format, errNotDecodedAlike)
	}
	return ffprobeAudio(ctx, path, demuxer)
}

// sndfileTypeMask is libsndfile's SF_FORMAT_TYPEMASK: the container part
// of a format code. sndfileDemuxers names ffmpeg's demuxer for the
// containers both read.
const sndfileTypeMask = 0x0FFF0000

var sndfileDemuxers = map[int]string{
	0x010000: "wav",  // SF_FORMAT_WAV
	0x130000: "wav",  // SF_FORMAT_WAVEX
	0x220000: "wav",  // SF_FORMAT_RF64
	0x020000: "aiff", // SF_FORMAT_AIFF
	0x030000: "au",   // SF_FORMAT_AU
	0x0B0000: "w64",  // SF_FORMAT_W64
	0x170000: "flac", // SF_FORMAT_FLAC
	0x180000: "caf",  // SF_FORMAT_CAF
	0x200000: "ogg",  // SF_FORMAT_OGG
	0x230000: "mp3",  // SF_FORMAT_MPEG
}

func ffprobeAudio(ctx context.Context, path, demuxer string) (audioStream, error) {
	args := []string{"-v", "error"}
	if demuxer != "" {
		args = append(args, "-f", demuxer)
	}
	out, err := runTool(ctx, "ffprobe", append(args, "-select_streams", "a:0",
		"-show_entries", "format=format_name,duration:stream=codec_name,channels,sample_rate", "-of", "json", path)...)
	if err != nil {
		return audioStream{}, err
	}
	var probe struct {
		Streams []struct {
			Codec      string `json:"codec_name"`
			Channels   int    `json:"channels"`
			SampleRate string `json:"sample_rate"`
		} `json:"streams"`
		Format struct {
			Name     string `json:"format_name"`
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &probe); err != nil || len(probe.Streams) == 0 {
		return audioStream{}, fmt.Errorf("audio %s: no audio stream", path)
	}
	st := probe.Streams[0]
	rate, err := strconv.Atoi(st.SampleRate)
	if err != nil || rate < 1 || rate > maxAudioRate || st.Channels < 1 || st.Channels > maxAudioChannels {
		return audioStream{}, fmt.Errorf("audio %s: %d channels at %q Hz are outside 1-%d channels at 1-%d Hz",
			path, st.Channels, st.SampleRate, maxAudioChannels, maxAudioRate)
	}
	seconds, _ := strconv.ParseFloat(probe.Format.Duration, 64)
	return audioStream{format: probe.Format.Name, codec: st.Codec, demuxer: demuxer, channels: st.Channels, rate: rate, seconds: seconds}, nil
}

// How ffmpeg gives what librosa.load reads (librosaDecoding).
const (
	// decodeFloat: soundfile reads the file, and libsndfile decodes PCM,
	// FLAC and MPEG audio to the same float32 samples as ffmpeg.
	decodeFloat = "f32le"
	// decodeInt16: libsndfile does not know the format; audioread asks
	// the ffmpeg command for 16-bit samples.
	decodeInt16 = "s16le"
	// decodeSndfile: Ogg Vorbis and Opus, which libsndfile decodes with
	// other lengths (and Opus at another rate) than ffmpeg; libsndfile's
	// own sndfile-convert decodes them first (sndfileDecode), and ffmpeg
	// gives its float64 samples (decodeDouble).
	decodeSndfile = "sndfile"
	decodeDouble  = "f64le"
)

// librosaDecoding says how ffmpeg gives what librosa.load reads of s.
// ADPCM and GSM in WAV, and FLAC in Ogg, are libsndfile's, which decodes
// them otherwise than ffmpeg does: they wrap errNotDecodedAlike.
func librosaDecoding(s audioStream) (string, error) {
	switch {
	case s.format == "flac" || s.format == "mp3":
		return decodeFloat, nil
	case s.format == "wav" || s.format == "w64" || s.format == "aiff" || s.format == "au" || s.format == "caf":
		if strings.HasPrefix(s.codec, "pcm_") {
			return decodeFloat, nil
		}
		if strings.HasPrefix(s.codec, "adpcm_") || strings.HasPrefix(s.codec, "gsm") {
			return "", fmt.Errorf("%s in %s, which libsndfile decodes: %w", s.codec, s.format, errNotDecodedAlike)
		}
	case s.format == "ogg" && (s.codec == "vorbis" || s.codec == "opus"):
		return decodeSndfile, nil
	case s.format == "ogg" && s.codec == "flac":
		return "", fmt.Errorf("FLAC in Ogg, which libsndfile decodes: %w", errNotDecodedAlike)
	}
	return decodeInt16, nil
}

// loadAudio is librosa.load(path): mono float32 samples at 22050 Hz.
func loadAudio(ctx context.Context, path string) ([]float32, error) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("audio %s is not a readable file", path)
	}
	s, err := probeAudio(ctx, path)
	if err != nil {
		return nil, err
	}
	how, err := librosaDecoding(s)
	if err != nil {
		return nil, fmt.Errorf("audio %s: %w", path, err)
	}
	name, gain := path, 1.0
	if how == decodeSndfile {
		dir, err := os.MkdirTemp("", "compare-audios-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		converted, info, err := sndfileDecode(ctx, path, dir)
		switch {
		case errors.Is(err, errNotSndfile):
			// soundfile raises; librosa falls back to audioread.
			how = decodeInt16
		case err != nil:
			return nil, fmt.Errorf("audio %s: %w", path, err)
		case converted == "":
			return silence(info), nil
		default:
			name, how, gain = converted, decodeDouble, info.gain
			s = audioStream{rate: info.rate, channels: info.channels, seconds: float64(info.frames) / float64(info.rate)}
		}
	}
	if s.rate != audioRate && !hasSoxr(ctx) {
		return nil, fmt.Errorf("audio %s at %d Hz: ffmpeg was built without libsoxr, which librosa resamples with: %w",
			path, s.rate, errNotDecodedAlike)
	}
	args := []string{"-nostdin", "-v", "error"}
	if s.demuxer != "" {
		args = append(args, "-f", s.demuxer)
	}
	decoded, wait, err := startTool(ctx, "ffmpeg", append(args, "-i", name,
		"-map", "0:a:0", "-f", how, "-acodec", "pcm_"+how, "-")...)
	if err != nil {
		return nil, err
	}
	defer wait()
	mono := &monoReader{src: bufio.NewReaderSize(decoded, 1<<16), channels: s.channels, format: how, gain: gain,
		maxFrames: maxAudioSeconds * s.rate}
	// Room for the samples the length promises, so that they are not
	// copied as they grow (fresh pages are dear on a VM).
	hint := int(min(max(s.seconds, 0), maxAudioSeconds)*audioRate) + audioRate
	var y []float32
	if s.rate == audioRate {
		y, err = readFloats(mono, maxAudioSeconds*audioRate, hint)
	} else {
		y, err = resampleAudio(ctx, mono, s.rate, hint)
	}
	if mono.over {
		return nil, fmt.Errorf("audio %s is longer than the cap of %d s: %w", path, maxAudioSeconds, metric.ErrOverCap)
	}
	if err != nil {
		return nil, fmt.Errorf("audio %s: %w", path, err)
	}
	return y, nil
}

// sndfileInfo is what sndfile-info reports of a file libsndfile opens.
type sndfileInfo struct {
	rate, channels, frames int
	format                 int // SF_FORMAT_* container | encoding
	silent                 bool
	// gain undoes sndfile-convert's division by the peak, which it makes
	// when the peak is 1.0 or more (a loud lossy file decodes past full
	// scale): the peak as sndfile-info prints it, to six digits, so such
	// samples are libsndfile's to about 1e-6; 1 otherwise.
	gain float64
}

// errNotSndfile: libsndfile does not open the file, so soundfile raises
// and librosa reads it with audioread.
var errNotSndfile = errors.New("libsndfile does not open it")

// maxSndfileSamples bounds the float WAV sndfile-convert writes to disk
// (512 MiB: 15 minutes of 48 kHz stereo fit in 346 MB).
const maxSndfileSamples = 128 << 20

// sndfileDecode has libsndfile decode path, an Ogg Vorbis or Opus file,
// as soundfile does in OSWorld: sndfile-convert writes its float samples
// into a float WAV in dir, whose name it returns, unchanged when their
// peak is below 1.0 and divided by the peak otherwise (info.gain undoes
// that). A silent file, which sndfile-convert refuses, gives no name: its
// info says how long it is.
func sndfileDecode(ctx context.Context, path, dir string) (string, sndfileInfo, error) {
	out, err := runTool(ctx, "sndfile-info", path)
	if err != nil {
		return "", sndfileInfo{}, err
	}
	if bytes.HasPrefix(out, []byte("Error : Not able to open input file")) {
		return "", sndfileInfo{}, errNotSndfile
	}
	info, ok := parseSndfileInfo(string(out))
	if !ok {
		// libsndfile opened the file, so soundfile reads it in OSWorld.
		return "", sndfileInfo{}, fmt.Errorf("sndfile-info printed no summary of rate, frames, channels and peak (%.200q): %w",
			out, errNotDecodedAlike)
	}
	if info.rate < 1 || info.rate > maxAudioRate || info.channels < 1 || info.channels > maxAudioChannels || info.frames < 0 {
		return "", sndfileInfo{}, fmt.Errorf("%d frames of %d channels at %d Hz are outside 1-%d channels at 1-%d Hz",
			info.frames, info.channels, info.rate, maxAudioChannels, maxAudioRate)
	}
	if info.frames > maxAudioSeconds*info.rate {
		return "", sndfileInfo{}, fmt.Errorf("longer than the cap of %d s: %w", maxAudioSeconds, metric.ErrOverCap)
	}
	if info.frames*info.channels > maxSndfileSamples {
		return "", sndfileInfo{}, fmt.Errorf("%d frames of %d channels are over the cap of %d samples: %w",
			info.frames, info.channels, maxSndfileSamples, metric.ErrOverCap)
	}
	if info.silent {
		return "", info, nil
	}
	wav := filepath.Join(dir, "decoded.wav")
	if _, err := runTool(ctx, "sndfile-convert", "-float32", path, wav); err != nil {
		// It refuses a peak that is NaN, infinite or subnormal, which
		// soundfile reads.
		return "", sndfileInfo{}, fmt.Errorf("%w: %w", err, errNotDecodedAlike)
	}
	return wav, info, nil
}

// parseSndfileInfo reads the summary sndfile-info prints after a file's
// header dump, below its last line of dashes (the dump has lines such as
// "Channels : 6" of its own); ok is false when it is not all there (the
// peak is missing past 100 Mi frames).
func parseSndfileInfo(out string) (sndfileInfo, bool) {
	const rule = "\n----------------------------------------\n"
	i := strings.LastIndex(out, rule)
	if i < 0 {
		return sndfileInfo{}, false
	}
	var info sndfileInfo
	seen := map[string]bool{}
	for line := range strings.Lines(out[i+len(rule):]) {
		key, value, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		key = strings.TrimSpace(key)
		switch key {
		case "Sample Rate":
			info.rate, err = strconv.Atoi(value)
		case "Frames":
			info.frames, err = strconv.Atoi(value)
		case "Channels":
			info.channels, err = strconv.Atoi(value)
		case "Format":
			var f uint64
			f, err = strconv.ParseUint(value, 0, 32)
			info.format = int(f)
		case "Signal Max":
			// "0.5 (-6.02 dB)"; 0 means every sample is 0, which
			// sndfile-convert refuses to copy.
			var peak float64
			peak, err = strconv.ParseFloat(strings.Fields(value + " x")[0], 64)
			info.silent, info.gain = peak == 0, max(1, peak)
		default:
			continue
		}
		if err != nil {
			return sndfileInfo{}, false
		}
		seen[key] = true
	}
	if len(seen) != 5 {
		return sndfileInfo{}, false
	}
	return info, true
}

// silence is librosa.load of a file of info.frames zero samples: zeros at
// 22050 Hz, as many as resampling gives.
func silence(info sndfileInfo) []float32 {
	return make([]float32, resampledLength(info.frames, info.rate))
}

// resampledLength is the length librosa.resample cuts or pads its output
// to: ceil(n·target/orig), computed as librosa computes it.
func resampledLength(n, rate int) int {
	if rate == audioRate {
		return n
	}
	return int(math.Ceil(float64(n) * (float64(audioRate) / float64(rate))))
}

// resampleAudio is librosa.resample(y, orig_sr=rate, target_sr=22050,
// res_type="soxr_hq") of the samples mono gives: libsoxr at its HQ recipe
// (20 bits), as python-soxr calls it, through ffmpeg, then cut or padded
// with zeros to ceil(len·ratio) samples, as librosa's fix_length does.
func resampleAudio(ctx context.Context, mono *monoReader, rate, hint int) ([]float32, error) {
	out, wait, err := startToolInput(ctx, mono, "ffmpeg", "-nostdin", "-v", "error",
		"-f", "f32le", "-ar", strconv.Itoa(rate), "-ac", "1", "-i", "pipe:0",
		"-af", "aresample="+strconv.Itoa(audioRate)+":resampler=soxr:precision=20",
		"-f", "f32le", "-acodec", "pcm_f32le", "-")
	if err != nil {
		return nil, err
	}
	// libsoxr writes about len·ratio samples; the slack covers its flush.
	y, err := readFloats(out, maxAudioSeconds*audioRate+audioRate, hint)
	// Waiting also waits for the copy from mono, so its count is final.
	wait()
	if err != nil {
		return nil, err
	}
	want := resampledLength(mono.frames, rate)
	if len(y) >= want {
		return y[:want], nil
	}
	return append(y, make([]float32, want-len(y))...), nil
}

// readFloats reads little-endian float32 samples, at most maxSamples,
// with room for hint of them at first.
func readFloats(r io.Reader, maxSamples, hint int) ([]float32, error) {
	buf := make([]byte, 1<<16)
	y := make([]float32, 0, min(max(hint, 0), maxSamples))
	have := 0 // bytes in buf not yet made samples
	for {
		n, err := r.Read(buf[have:])
		have += n
		whole := have &^ 3
		if len(y)+whole/4 > maxSamples {
			return nil, fmt.Errorf("more than %d samples: %w", maxSamples, metric.ErrOverCap)
		}
		for i := 0; i < whole; i += 4 {
			y = append(y, math.Float32frombits(binary.LittleEndian.Uint32(buf[i:])))
		}
		have = copy(buf, buf[whole:have])
		if err == io.EOF {
			return y, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// monoReader reads interleaved frames of int16, float32 or float64
// samples (int16 scaled by 1/32768, as librosa's buf_to_float does;
// float64 multiplied by gain, then made float32) and gives their mean over
// the channels as little-endian float32: librosa's to_mono, numpy's
// float32 mean, the channels summed in turn and the sum divided by their
// number. Past maxFrames frames it stops with over set.
type monoReader struct {
	src       io.Reader
	channels  int
	format    string // decodeInt16, decodeFloat or decodeDouble
	gain      float64
	maxFrames int
	frames    int
	over      bool
	// frameSize is a frame's size in bytes; buf holds up to monoBatch
	// frames read at once.
	frameSize int
	buf       []byte
}

// monoBatch is how many frames monoReader reads from its source at once.
const monoBatch = 4096

func (m *monoReader) Read(p []byte) (int, error) {
	if m.frameSize == 0 {
		m.frameSize = map[string]int{decodeInt16: 2, decodeFloat: 4, decodeDouble: 8}[m.format] * m.channels
	}
	want := min(len(p)/4, monoBatch)
	if want == 0 {
		return 0, nil
	}
	if len(m.buf) < want*m.frameSize {
		m.buf = make([]byte, monoBatch*m.frameSize)
	}
	buf := m.buf[:want*m.frameSize]
	got, err := io.ReadAtLeast(m.src, buf, m.frameSize)
	if got < m.frameSize {
		if err == io.ErrUnexpectedEOF {
			err = io.EOF // a partial frame at the end is dropped, as numpy's reshape would refuse it
		}
		return 0, err
	}
	if rest := got % m.frameSize; rest != 0 {
		// Complete the last frame, or drop it at the end.
		if _, err := io.ReadFull(m.src, buf[got:got+m.frameSize-rest]); err == nil {
			got += m.frameSize - rest
		} else {
			got -= rest
		}
	}
	n := 0
	for f := 0; f+m.frameSize <= got; f += m.frameSize {
		if m.frames++; m.frames > m.maxFrames {
			m.over = true
			return n, errAudioOverCap
		}
		frame := buf[f : f+m.frameSize]
		var sum float32
		for c := range m.channels {
			switch m.format {
			case decodeInt16:
				sum += float32(int16(binary.LittleEndian.Uint16(frame[2*c:]))) * (1.0 / 32768)
			case decodeFloat:
				sum += math.Float32frombits(binary.LittleEndian.Uint32(frame[4*c:]))
			default:
				sum += float32(math.Float64frombits(binary.LittleEndian.Uint64(frame[8*c:])) * m.gain)
			}
		}
		if m.channels > 1 {
			sum /= float32(m.channels)
		}
		binary.LittleEndian.PutUint32(p[n:], math.Float32bits(sum))
		n += 4
	}
	return n, nil
}

var errAudioOverCap = errors.New("audio over the length cap")

// notDecodedAlike returns err if it wraps errNotDecodedAlike, else nil.
func notDecodedAlike(err error) error {
	if errors.Is(err, errNotDecodedAlike) {
		return err
	}
	return nil
}

var (
	soxrOnce sync.Once
	soxrOK   bool
)

// hasSoxr reports whether ffmpeg was built with libsoxr, which librosa
// resamples with; without it the audio is not scored.
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

// fftPlan is an in-place radix-2 complex FFT of one power-of-two length,
// its twiddle factors worked out once, each from its own sine and cosine.
type fftPlan struct {
	n       int
	twiddle [][]complex128 // per stage (size 2, 4, ... n): size/2 factors
}

func newFFTPlan(n int) *fftPlan {
	p := &fftPlan{n: n}
	for size := 2; size <= n; size <<= 1 {
		tw := make([]complex128, size/2)
		for k := range tw {
			sin, cos := math.Sincos(2 * math.Pi * float64(k) / float64(size))
			tw[k] = complex(cos, -sin)
		}
		p.twiddle = append(p.twiddle, tw)
	}
	return p
}

func (p *fftPlan) transform(a []complex128) {
	n := p.n
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
	stage := 0
	for size := 2; size <= n; size <<= 1 {
		tw, half := p.twiddle[stage], size/2
		for start := 0; start < n; start += size {
			lo, hi := a[start:start+half], a[start+half:start+size]
			for k, w := range tw {
				u, v := lo[k], hi[k]*w
				lo[k], hi[k] = u+v, u-v
			}
		}
		stage++
	}
}

// realFFT gives the power spectrum |X[k]|², k = 0 to n/2, of n real
// samples through a complex FFT of half the length (the even samples as
// real parts, the odd ones as imaginary parts), whose bins are then told
// apart with one twiddle each: half the work of a complex FFT of length n.
// An all-zero frame gives exact zeros.
type realFFT struct {
	n    int
	half *fftPlan
	z    []complex128
	rot  []complex128 // e^(-2πik/n), k < n/2
}

func newRealFFT(n int) *realFFT {
	r := &realFFT{n: n, half: newFFTPlan(n / 2), z: make([]complex128, n/2), rot: make([]complex128, n/2)}
	for k := range r.rot {
		sin, cos := math.Sincos(2 * math.Pi * float64(k) / float64(n))
		r.rot[k] = complex(cos, -sin)
	}
	return r
}

// power writes |X[k]|² of x (n samples) into out (n/2+1 bins).
func (r *realFFT) power(x, out []float64) {
	h := r.n / 2
	for i := range h {
		r.z[i] = complex(x[2*i], x[2*i+1])
	}
	r.half.transform(r.z)
	z0 := r.z[0]
	out[0] = (real(z0) + imag(z0)) * (real(z0) + imag(z0))
	out[h] = (real(z0) - imag(z0)) * (real(z0) - imag(z0))
	for k := 1; k < h; k++ {
		a, b := r.z[k], cmplx.Conj(r.z[h-k])
		sum, d := a+b, a-b
		even := complex(real(sum)*0.5, imag(sum)*0.5)
		odd := complex(imag(d)*0.5, -real(d)*0.5) // (a-b)/2i
		x := even + r.rot[k]*odd
		out[k] = real(x)*real(x) + imag(x)*imag(x)
	}
}

// melBand is one mel filter's non-zero span: weights w over the FFT bins
// from lo on.
type melBand struct {
	lo int
	w  []float64
}

// melBands is melFilters cut to each filter's span, so that a frame's
// band energies skip the bins a filter gives no weight, which are most.
func melBands() []melBand {
	filters := melFilters()
	bands := make([]melBand, len(filters))
	for m, f := range filters {
		lo, hi := 0, 0
		for k, wk := range f {
			if wk != 0 {
				if hi == 0 {
					lo = k
				}
				hi = k + 1
			}
		}
		bands[m] = melBand{lo: lo, w: f[lo:hi]}
	}
	return bands
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
	mel := melBands()
	rfft := newRealFFT(nFFT)
	spec := make([][]float64, frames) // frames × mels, in dB
	bands := make([]float64, frames*nMels)
	buf := make([]float64, nFFT)
	power := make([]float64, nFFT/2+1)
	peak := math.Inf(-1)
	for t := range frames {
		start := t*hopLength - pad
		for i := range buf {
			v := 0.0
			if j := start + i; j >= 0 && j < len(y) {
				v = float64(y[j])
			}
			buf[i] = v * window[i]
		}
		rfft.power(buf, power)
		row := bands[t*nMels : (t+1)*nMels : (t+1)*nMels]
		for m := range nMels {
			s := 0.0
			band := power[mel[m].lo:]
			for k, wk := range mel[m].w {
				if wk != 0 {
					s += wk * band[k]
				}
			}
			row[m] = 10 * math.Log10(max(1e-10, s))
			peak = max(peak, row[m])
		}
		spec[t] = row
	}
	out := make([][]float64, frames)
	coeffs := make([]float64, frames*nMFCC) // one array for every frame's 20
	for t, row := range spec {
		for m := range row {
			row[m] = max(row[m], peak-80)
		}
		// dctII, not a direct sum: a frame whose mel bands are all at the
		// floor (silence) is constant, and its coefficients past the first
		// must come out exactly 0, as scipy's do. normalizeRows would
		// scale a direct sum's rounding noise there up to ±1.
		c := coeffs[t*nMFCC : (t+1)*nMFCC : (t+1)*nMFCC]
		copy(c, dctII(row))
		for k := range c {
			f := math.Sqrt(1.0 / (2 * nMels))
			if k == 0 {
				f = math.Sqrt(1.0 / (4 * nMels))
			}
			c[k] *= f
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

// audioFeatures is a file as compare_audios reads it: librosa.load's
// samples, and their MFCCs normalised per coefficient (when there are
// samples).
type audioFeatures struct {
	y    []float32
	mfcc [][]float64
	err  error
}

func loadFeatures(ctx context.Context, path string) audioFeatures {
	y, err := loadAudio(ctx, path)
	f := audioFeatures{y: y, err: err}
	if err == nil && len(y) > 0 {
		f.mfcc = mfcc(y)
		normalizeRows(f.mfcc)
	}
	return f
}

// metricCompareAudios is vlc.py's compare_audios. An unreadable or empty
// file counts as empty: two empty files score 1, one scores 0.
func metricCompareAudios(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	p1, _ := result.(string)
	p2, _ := expected.(string)
	if p1 == "" || p2 == "" {
		return 0, nil
	}
	// libsndfile's programs decode Ogg and tell formats ffmpeg does not
	// find, as soundfile does in OSWorld.
	if err := requireTools("compare_audios", "ffmpeg", "ffprobe", "sndfile-info", "sndfile-convert"); err != nil {
		return 0, err
	}
	// The two files are decoded and their features worked out side by
	// side: each is a pipeline of ffmpeg processes, then Go's MFCC.
	var f1, f2 audioFeatures
	var wg sync.WaitGroup
	wg.Go(func() { f1 = loadFeatures(ctx, p1) })
	f2 = loadFeatures(ctx, p2)
	wg.Wait()
	y1, err1, y2, err2 := f1.y, f1.err, f2.y, f2.err
	if err := cmp.Or(metric.OverCap(err1), metric.OverCap(err2), notDecodedAlike(err1), notDecodedAlike(err2)); err != nil {
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
	distance, path := fastDTW(f1.mfcc, f2.mfcc, 1, cosineDistance)
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
