package media

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_videos reads frames as OpenCV does (every decoded frame, RGB
// after a bicubic swscale conversion, rotation applied); ffmpeg decodes
// here, streaming PPM frames so that only one frame per video is held.

const (
	videoMaxFrames = 100 // compare_videos's max_frames_to_check
	videoThreshold = 5   // its threshold: hash bits, and mismatching frames
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

func openFrames(ctx context.Context, path string) *frameReader {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return &frameReader{done: true}
	}
	out, wait, err := startTool(ctx, "ffmpeg", "-nostdin", "-v", "error", "-i", path,
		"-map", "0:v:0", "-vsync", "passthrough", "-frames:v", strconv.Itoa(videoMaxFrames),
		"-f", "image2pipe", "-c:v", "ppm", "-")
	if err != nil {
		return &frameReader{done: true}
	}
	return &frameReader{r: bufio.NewReaderSize(out, 1<<20), wait: wait}
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

// metricCompareVideos is vlc.py's compare_videos: the first 100 frames
// side by side; a frame pair whose perceptual hashes differ in more than
// 5 bits is a mismatch, and more than 5 mismatches score 0; when a video
// ends within the 100 frames, the score is whether both ended together.
func metricCompareVideos(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	p1, ok1 := result.(string)
	p2, ok2 := expected.(string)
	if !ok1 || !ok2 {
		return 0, nil
	}
	if err := requireTools("compare_videos", "ffmpeg"); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v1, v2 := openFrames(ctx, p1), openFrames(ctx, p2)
	defer v1.close()
	defer v2.close()
	mismatches := 0
	for checked := 0; checked < videoMaxFrames; checked++ {
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
		if hashDistance(h1, h2) > videoThreshold {
			mismatches++
			if mismatches > videoThreshold {
				return 0, nil
			}
		}
	}
	return 1, nil
}
