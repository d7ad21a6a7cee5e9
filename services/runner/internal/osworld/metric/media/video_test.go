package media

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ffmpegVideo renders a lavfi source to a file.
func ffmpegVideo(t *testing.T, dir, name, src string, args ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	base := []string{"-loglevel", "error", "-y", "-f", "lavfi", "-i", src}
	run(t, "ffmpeg", append(append(base, args...), p)...)
	return p
}

func TestCompareVideos(t *testing.T) {
	needTools(t, "ffmpeg")
	dir := t.TempDir()
	src := "testsrc2=size=160x120:rate=25"
	gold := ffmpegVideo(t, dir, "gold.mp4", src, "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	// The same frames through another codec and quality.
	reencoded := ffmpegVideo(t, dir, "same.mkv", src, "-t", "2", "-c:v", "mpeg4", "-q:v", "5")
	flipped := ffmpegVideo(t, dir, "flipped.mp4", src+",hflip", "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	shorter := ffmpegVideo(t, dir, "short.mp4", src, "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	// Past 100 frames only the first 100 count.
	long1 := ffmpegVideo(t, dir, "long1.mp4", src, "-t", "5", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	long2 := ffmpegVideo(t, dir, "long2.mp4", src, "-t", "6", "-c:v", "mpeg4", "-q:v", "4")
	// Flat frames: scipy's DCT gives every coefficient but the first
	// exactly 0, so two flat videos hash alike whatever their colours.
	flatA := ffmpegVideo(t, dir, "flat-a.mp4", "color=c=0x3070c0:size=64x48:rate=25", "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	flatB := ffmpegVideo(t, dir, "flat-b.mkv", "color=c=0x406080:size=64x48:rate=25", "-t", "1", "-c:v", "mpeg4", "-q:v", "5")
	// A display matrix: OpenCV turns a video by quarter turns only.
	upsideDown := ffmpegVideo(t, dir, "upside-down.mp4", src+",hflip,vflip", "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	turned180 := withRotation(t, gold, filepath.Join(dir, "turned180.mp4"), 180)
	turned45 := withRotation(t, gold, filepath.Join(dir, "turned45.mp4"), 45)
	// ffmpeg writes rotate=90 as a matrix OpenCV turns counterclockwise,
	// and 89.7 as one that ffprobe's rotation field prints as 89 and
	// OpenCV rounds to 90.
	turned90 := withRotation(t, gold, filepath.Join(dir, "turned90.mp4"), 90)
	turned897 := withRotation(t, gold, filepath.Join(dir, "turned89.7.mp4"), 89.7)
	counterclockwise := ffmpegVideo(t, dir, "cclock.mp4", src+",transpose=cclock", "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	corrupt := filepath.Join(dir, "corrupt.mp4")
	if err := os.WriteFile(corrupt, bytes.Repeat([]byte("not a video "), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		result, exp any
		opts        map[string]any
		want        float64
	}{
		{"re-encoded", reencoded, gold, nil, 1},
		{"mirrored", flipped, gold, nil, 0},
		{"shorter", shorter, gold, nil, 0},
		{"past 100 frames", long2, long1, nil, 1},
		{"missing result", filepath.Join(dir, "none.mp4"), gold, nil, 0},
		{"corrupt result", corrupt, gold, nil, 0},
		// OpenCV reads no frame from either: both "ended" together.
		{"both unreadable", corrupt, filepath.Join(dir, "none.mp4"), nil, 1},
		{"nil", nil, gold, nil, 0},
		{"flat frames of two colours", flatA, flatB, nil, 1},
		{"turned 180 by its matrix", turned180, upsideDown, nil, 1},
		{"a matrix of 45 is not applied", turned45, gold, nil, 1},
		{"turned 90 by its matrix", turned90, counterclockwise, nil, 1},
		{"a matrix of 89.7 turns as 90", turned897, counterclockwise, nil, 1},
		{"a matrix of 89.7 turns", turned897, gold, nil, 0},
		{"mirrored, a threshold of 64 bits", flipped, gold, map[string]any{"threshold": 64.0}, 1},
		{"mirrored, first frame only", flipped, gold, map[string]any{"max_frames_to_check": 1.0}, 1},
		{"shorter, within its frames", shorter, gold, map[string]any{"max_frames_to_check": 25.0}, 1},
		{"shorter, past them", shorter, gold, map[string]any{"max_frames_to_check": 25.5}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricCompareVideos(context.Background(), tt.result, tt.exp, true, tt.opts)
			if err != nil || got != tt.want {
				t.Errorf("compare_videos got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestOpenCVTurn reads display matrices as ffprobe prints them and turns
// them as OpenCV does.
func TestOpenCVTurn(t *testing.T) {
	row := func(a, b, c int) string { return fmt.Sprintf("%12d%12d%12d", a, b, c) }
	matrix := func(a, b, d, e int) string {
		return "\n00000000:" + row(a, b, 0) + "\n00000001:" + row(d, e, 0) + "\n00000002:" + row(0, 0, 1<<30) + "\n"
	}
	for _, tc := range []struct {
		name, text string
		ok         bool
		want       int
	}{
		{"rotate=90", matrix(0, -65536, 65536, 0), true, 270},
		{"rotate=-90", matrix(0, 65536, -65536, 0), true, 90},
		{"rotate=180", matrix(-65536, 0, 0, -65536), true, 180},
		{"rotate=89.7, which ffprobe prints as 89", matrix(343, -65535, 65535, 343), true, 270},
		{"rotate=45", matrix(46340, -46340, 46340, 46340), true, 315},
		{"identity", matrix(65536, 0, 0, 65536), true, 0},
		{"a mirror turns as its rotation", matrix(-65536, 0, 0, 65536), true, 180},
		{"degenerate", matrix(0, 0, 0, 0), true, 0},
		{"eight entries", "\n00000000:  1 2 3\n00000001:  4 5 6\n00000002:  7 8\n", false, 0},
		{"ten entries", "\n00000000:  1 2 3\n00000001:  4 5 6\n00000002:  7 8 9 10\n", false, 0},
		{"past 32 bits", "\n00000000:  4294967296 0 0\n00000001:  0 1 0\n00000002:  0 0 1\n", false, 0},
		{"empty", "", false, 0},
	} {
		m, ok := parseDisplayMatrix(tc.text)
		if ok != tc.ok {
			t.Errorf("%s: parsed %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if ok {
			if got := openCVTurn(m); got != tc.want {
				t.Errorf("%s: turn %d, want %d", tc.name, got, tc.want)
			}
		}
	}
}

// TestCompareVideosCancelled: past the caller's deadline the comparison
// ends with the cause, not a score.
func TestCompareVideosCancelled(t *testing.T) {
	needTools(t, "ffmpeg")
	dir := t.TempDir()
	v := ffmpegVideo(t, dir, "v.mp4", "testsrc2=size=160x120:rate=25", "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := metricCompareVideos(ctx, v, v, true, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("compare_videos with its context cancelled got %v, %v; want context.Canceled", got, err)
	}
}

func TestCompareVideosOptions(t *testing.T) {
	for _, opts := range []map[string]any{{"threshold": "5"}, {"max_frames_to_check": nil}} {
		_, err := metricCompareVideos(context.Background(), "a.mp4", "b.mp4", true, opts)
		for k := range opts {
			if err == nil || !strings.Contains(err.Error(), "option "+k+" must be a number") {
				t.Errorf("compare_videos with %v: %v, want an error naming the option", opts, err)
			}
		}
	}
}

// withRotation copies the MP4 at src to dst with a display matrix of deg
// degrees, the frames untouched.
func withRotation(t *testing.T, src, dst string, deg float64) string {
	t.Helper()
	run(t, "ffmpeg", "-loglevel", "error", "-y", "-i", src, "-c", "copy", "-metadata:s:v:0", fmt.Sprintf("rotate=%g", deg), dst)
	return dst
}

// FuzzReadPPM feeds arbitrary bytes to the frame reader.
func FuzzReadPPM(f *testing.F) {
	f.Add([]byte("P6\n2 1\n255\n\x00\x01\x02\x03\x04\x05"))
	f.Add([]byte("P6 99999999 99999999 255 "))
	f.Add([]byte("P6\n2 1\n255\n\x00\x01\x02\x03\x04\x05P6\n1 1\n255\n\x06\x07\x08P6\n1 2\n255\n\x09"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		for range 4 {
			// The last frame's pixels are the next one's buffer, as
			// frameReader passes them.
			img, err := readPPM(r, buf)
			if err != nil {
				return
			}
			if len(img.pix) != img.w*img.h*3 {
				t.Fatalf("frame of %dx%d has %d bytes", img.w, img.h, len(img.pix))
			}
			buf = img.pix
		}
	})
}
