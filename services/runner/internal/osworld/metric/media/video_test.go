package media

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	corrupt := filepath.Join(dir, "corrupt.mp4")
	if err := os.WriteFile(corrupt, bytes.Repeat([]byte("not a video "), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		result, exp any
		want        float64
	}{
		{"re-encoded", reencoded, gold, 1},
		{"mirrored", flipped, gold, 0},
		{"shorter", shorter, gold, 0},
		{"past 100 frames", long2, long1, 1},
		{"missing result", filepath.Join(dir, "none.mp4"), gold, 0},
		{"corrupt result", corrupt, gold, 0},
		// OpenCV reads no frame from either: both "ended" together.
		{"both unreadable", corrupt, filepath.Join(dir, "none.mp4"), 1},
		{"nil", nil, gold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricCompareVideos(context.Background(), tt.result, tt.exp, true, nil)
			if err != nil || got != tt.want {
				t.Errorf("compare_videos got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// FuzzReadPPM feeds arbitrary bytes to the frame reader.
func FuzzReadPPM(f *testing.F) {
	f.Add([]byte("P6\n2 1\n255\n\x00\x01\x02\x03\x04\x05"))
	f.Add([]byte("P6 99999999 99999999 255 "))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for range 4 {
			img, err := readPPM(r)
			if err != nil {
				return
			}
			if len(img.pix) != img.w*img.h*3 {
				t.Fatalf("frame of %dx%d has %d bytes", img.w, img.h, len(img.pix))
			}
		}
	})
}
