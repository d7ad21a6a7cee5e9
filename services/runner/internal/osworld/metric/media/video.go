package media

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_videos reads frames as OpenCV does (every decoded frame, RGB
// after a bicubic swscale conversion, a display matrix's quarter turns
// applied); ffmpeg decodes here, streaming PPM frames so that only one
// frame per video is held.

// compare_videos's defaults: max_frames_to_check, and threshold (hash
// bits, and mismatching frames).
const (
	videoMaxFrames = 100
	videoThreshold = 5
)

// frameReader yields the decoded frames of a video, nil at the end (or at
// a decoding error, where OpenCV's read() returns False).
type frameReader struct {
	r    *bufio.Reader
	wait func() error
	done bool
	// overCap is the error of a frame over maxPixels, which OpenCV
	// reads: the comparison stops there unscored.
	overCap error
}

// openFrames decodes at most limit frames of the video at path; a limit
// below 0 decodes them all.
func openFrames(ctx context.Context, path string, limit int) *frameReader {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return &frameReader{done: true}
	}
	args := []string{"-nostdin", "-v", "error"}
	if !quarterTurns(ctx, path) {
		args = append(args, "-noautorotate")
	}
	args = append(args, "-i", path, "-map", "0:v:0", "-vsync", "passthrough")
	if limit >= 0 {
		args = append(args, "-frames:v", strconv.Itoa(limit))
	}
	out, wait, err := startTool(ctx, "ffmpeg", append(args, "-f", "image2pipe", "-c:v", "ppm", "-")...)
	if err != nil {
		return &frameReader{done: true}
	}
	return &frameReader{r: bufio.NewReaderSize(out, 1<<20), wait: wait}
}

// quarterTurns reports whether the display rotation of the video at path
// is a multiple of 90° (none counts), the only turns OpenCV applies. For
// any other angle ffmpeg would insert a rotate filter, which OpenCV does
// not, so the caller turns ffmpeg's rotation off.
func quarterTurns(ctx context.Context, path string) bool {
	out, err := runTool(ctx, "ffprobe", "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream_side_data=rotation", "-of", "csv=p=0", path)
	if err != nil {
		// ffmpeg then fails to open it too.
		return true
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	deg, err := strconv.Atoi(strings.TrimSpace(first))
	return err != nil || deg%90 == 0
}

func (f *frameReader) close() {
	if f.wait != nil {
		_ = f.wait()
		f.wait = nil
	}
}

// next returns the next frame, or nil when there is none; after a nil,
// overCap tells whether a frame over the size cap ended the reading.
func (f *frameReader) next() *pimg {
	if f.done {
		return nil
	}
	img, err := readPPM(f.r)
	if err != nil {
		f.done = true
		f.overCap = metric.OverCap(err)
		f.close()
		return nil
	}
	return img
}

var errBadPPM = errors.New("malformed PPM frame")

// readPPM reads one binary PPM (P6, maxval 255) as ffmpeg writes it.
func readPPM(r *bufio.Reader) (*pimg, error) {
	var fields [4]string
	for i := range fields {
		tok, err := ppmToken(r)
		if err != nil {
			return nil, err
		}
		fields[i] = tok
	}
	if fields[0] != "P6" || fields[3] != "255" {
		return nil, errBadPPM
	}
	w, err1 := strconv.Atoi(fields[1])
	h, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 {
		return nil, errBadPPM
	}
	if w > maxPixels || h > maxPixels || w*h > maxPixels {
		// ffmpeg decoded it, and OpenCV would read it.
		return nil, fmt.Errorf("video frame of %dx%d pixels is over the cap of %d pixels: %w", w, h, maxPixels, metric.ErrOverCap)
	}
	// Read before allocating the whole frame: a truncated stream must not
	// cost the memory its header claims.
	n := int64(w) * int64(h) * 3
	pix, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if int64(len(pix)) != n {
		return nil, io.ErrUnexpectedEOF
	}
	return &pimg{mode: "RGB", w: w, h: h, pix: pix}, nil
}

// ppmToken reads a header token and the one whitespace byte after it.
func ppmToken(r *bufio.Reader) (string, error) {
	var tok []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			if len(tok) > 0 {
				return string(tok), nil
			}
			continue
		}
		if len(tok) > 16 {
			return "", errBadPPM
		}
		tok = append(tok, c)
	}
}

// metricCompareVideos is vlc.py's compare_videos: the first
// max_frames_to_check frames (100) side by side; a frame pair whose
// perceptual hashes differ in more than threshold (5) bits is a mismatch,
// and more mismatches than threshold score 0; when a video ends within
// those frames, the score is whether both ended together. The options are
// compared as Python compares them (2.5 frames is three); one that is not
// a number fails the evaluation, where Python raises.
func metricCompareVideos(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	maxFrames, err := videoOpt(opts, "max_frames_to_check", videoMaxFrames)
	if err != nil {
		return 0, err
	}
	threshold, err := videoOpt(opts, "threshold", videoThreshold)
	if err != nil {
		return 0, err
	}
	p1, ok1 := result.(string)
	p2, ok2 := expected.(string)
	if !ok1 || !ok2 {
		return 0, nil
	}
	if err := requireTools("compare_videos", "ffmpeg", "ffprobe"); err != nil {
		return 0, err
	}
	// The frames the loop can read: ceil(maxFrames), or all of them when
	// that is past any video's length.
	limit := -1
	if maxFrames < 1<<30 {
		limit = max(0, int(math.Ceil(maxFrames)))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v1, v2 := openFrames(ctx, p1, limit), openFrames(ctx, p2, limit)
	defer v1.close()
	defer v2.close()
	mismatches := 0
	for checked := 0; float64(checked) < maxFrames; checked++ {
		f1, f2 := v1.next(), v2.next()
		if err := cmp.Or(v1.overCap, v2.overCap); err != nil {
			return 0, fmt.Errorf("compare_videos: %w", err)
		}
		if f1 == nil || f2 == nil {
			return metric.Bool(f1 == nil && f2 == nil), nil
		}
		h1, err1 := phash(f1)
		h2, err2 := phash(f2)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("compare_videos: hash frames: %v, %v", err1, err2)
		}
		if float64(hashDistance(h1, h2)) > threshold {
			mismatches++
			if float64(mismatches) > threshold {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// videoOpt is compare_videos's numeric option key, def when absent. A
// boolean is the number Python makes of it.
func videoOpt(opts map[string]any, key string, def float64) (float64, error) {
	v, ok := opts[key]
	if !ok {
		return def, nil
	}
	switch v := v.(type) {
	case float64:
		return v, nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	}
	text, _ := json.Marshal(v)
	return 0, fmt.Errorf("compare_videos: option %s must be a number, got %.100s", key, text)
}
