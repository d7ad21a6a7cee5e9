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
	"sync"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// compare_videos reads frames as OpenCV does (every decoded frame, RGB
// after a bicubic swscale conversion, a display matrix's quarter turns
// applied as OpenCV rounds its angle); ffmpeg decodes here, streaming PPM
// frames so that only one frame per video is held.

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
	// buf is the last frame's pixels, reused for the next frame of its
	// size: a frame is hashed before the next is read.
	buf []byte
}

// openFrames decodes at most limit frames of the video at path; a limit
// below 0 decodes them all.
func openFrames(ctx context.Context, path string, limit int) *frameReader {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return &frameReader{done: true}
	}
	// ffmpeg's own rotation is off: it rounds the angle otherwise than
	// OpenCV and turns by any angle, so the turn OpenCV makes is asked
	// for explicitly.
	args := []string{"-nostdin", "-v", "error", "-noautorotate", "-i", path, "-map", "0:v:0", "-vsync", "passthrough"}
	if turn := displayTurn(ctx, path); turn != "" {
		args = append(args, "-vf", turn)
	}
	if limit >= 0 {
		args = append(args, "-frames:v", strconv.Itoa(limit))
	}
	out, wait, err := startTool(ctx, "ffmpeg", append(args, "-f", "image2pipe", "-c:v", "ppm", "-")...)
	if err != nil {
		return &frameReader{done: true}
	}
	return &frameReader{r: bufio.NewReaderSize(out, 1<<20), wait: wait}
}

// displayTurn is the filter that turns the frames of the video at path as
// OpenCV 4.7 and later do by its display matrix: the matrix's angle
// (av_display_rotation_get) rounded to whole degrees as cvRound rounds,
// and applied only when that is a quarter turn. "" is no turn. (ffprobe's
// own "rotation" field cuts the angle to an integer: 89.7° prints as 89,
// which OpenCV turns as 90.)
func displayTurn(ctx context.Context, path string) string {
	out, err := runTool(ctx, "ffprobe", "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream_side_data=displaymatrix", "-of", "json", path)
	if err != nil {
		// ffmpeg then fails to open it too.
		return ""
	}
	var probe struct {
		Streams []struct {
			SideData []struct {
				Matrix string `json:"displaymatrix"`
			} `json:"side_data_list"`
		} `json:"streams"`
	}
	if json.Unmarshal(out, &probe) != nil || len(probe.Streams) == 0 {
		return ""
	}
	for _, sd := range probe.Streams[0].SideData {
		m, ok := parseDisplayMatrix(sd.Matrix)
		if !ok {
			continue
		}
		switch openCVTurn(m) {
		case 90:
			return "transpose=clock"
		case 180:
			return "hflip,vflip"
		case 270:
			return "transpose=cclock"
		}
		return ""
	}
	return ""
}

// parseDisplayMatrix reads the nine 32-bit entries of a display matrix as
// ffprobe prints them: three rows of "00000000:  a  b  c".
func parseDisplayMatrix(text string) ([9]int32, bool) {
	var m [9]int32
	n := 0
	for line := range strings.Lines(text) {
		_, row, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		for _, f := range strings.Fields(row) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil || n == len(m) {
				return m, false
			}
			m[n] = int32(v)
			n++
		}
	}
	return m, n == len(m)
}

// openCVTurn is the angle OpenCV turns a video by for display matrix m
// (CAP_PROP_ORIENTATION_META): minus the matrix's rotation in degrees
// (libavutil's av_display_rotation_get, entries in 16.16 fixed point),
// rounded half to even, in [0, 360). A degenerate matrix turns nothing.
func openCVTurn(m [9]int32) int {
	fp := func(v int32) float64 { return float64(v) / (1 << 16) }
	scale0, scale1 := math.Hypot(fp(m[0]), fp(m[3])), math.Hypot(fp(m[1]), fp(m[4]))
	if scale0 == 0 || scale1 == 0 {
		return 0
	}
	rotation := -math.Atan2(fp(m[1])/scale1, fp(m[0])/scale0) * 180 / math.Pi
	turn := -int(math.RoundToEven(rotation))
	if turn < 0 {
		turn += 360
	}
	return turn
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
	img, err := readPPM(f.r, f.buf)
	if err != nil {
		f.done = true
		f.overCap = metric.OverCap(err)
		f.close()
		return nil
	}
	f.buf = img.pix
	return img
}

var errBadPPM = errors.New("malformed PPM frame")

// readPPM reads one binary PPM (P6, maxval 255) as ffmpeg writes it,
// into buf when the frame fits it.
func readPPM(r *bufio.Reader, buf []byte) (*pimg, error) {
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
	n := int64(w) * int64(h) * 3
	var pix []byte
	if int64(cap(buf)) >= n {
		pix = buf[:n]
		if _, err := io.ReadFull(r, pix); err != nil {
			return nil, err
		}
	} else {
		// Read before allocating the whole frame: a truncated stream must
		// not cost the memory its header claims.
		var err error
		if pix, err = io.ReadAll(io.LimitReader(r, n)); err != nil {
			return nil, err
		}
		if int64(len(pix)) != n {
			return nil, io.ErrUnexpectedEOF
		}
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
	// Each video is decoded and its frames hashed by a goroutine of its
	// own; cancelling stops both (and kills their ffmpeg), and the
	// comparison returns only once they are done.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	h1, h2 := make(chan frameHash, 4), make(chan frameHash, 4)
	wg.Go(func() { hashFrames(ctx, openFrames(ctx, p1, limit), h1) })
	wg.Go(func() { hashFrames(ctx, openFrames(ctx, p2, limit), h2) })
	mismatches := 0
	for checked := 0; float64(checked) < maxFrames; checked++ {
		f1, ok1 := <-h1
		f2, ok2 := <-h2
		if !ok1 || !ok2 {
			// The caller's deadline passed: the hashers stopped.
			return 0, fmt.Errorf("compare_videos: %w", context.Cause(ctx))
		}
		if err := cmp.Or(f1.overCap, f2.overCap); err != nil {
			return 0, fmt.Errorf("compare_videos: %w", err)
		}
		if f1.end || f2.end {
			return metric.Bool(f1.end && f2.end), nil
		}
		if f1.err != nil || f2.err != nil {
			return 0, fmt.Errorf("compare_videos: hash frames: %v, %v", f1.err, f2.err)
		}
		if float64(hashDistance(f1.hash, f2.hash)) > threshold {
			mismatches++
			if float64(mismatches) > threshold {
				return 0, nil
			}
		}
	}
	return 1, nil
}

// frameHash is one frame's perceptual hash, or the end of the video
// (with overCap when a frame over the size cap ended it).
type frameHash struct {
	hash    uint64
	err     error
	end     bool
	overCap error
}

// hashFrames sends the phash of each frame v reads to out, then the end
// for ever after, until ctx is done; then it closes v and out.
func hashFrames(ctx context.Context, v *frameReader, out chan<- frameHash) {
	defer close(out)
	defer v.close()
	for ctx.Err() == nil {
		var fh frameHash
		if img := v.next(); img == nil {
			fh = frameHash{end: true, overCap: v.overCap}
		} else {
			fh.hash, fh.err = phash(img)
		}
		select {
		case out <- fh:
		case <-ctx.Done():
			return
		}
	}
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
