package recording

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/xserver"
)

func TestFirstLine(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   bool
	}{
		{"block in one write", []string{"frame=1\nfps=0.0\nprogress=continue\n"}, true},
		{"prefix split across writes", []string{"frame=1\nprog", "ress=continue\n"}, true},
		{"prefix at the very start", []string{"progress=end\n"}, true},
		{"no progress line yet", []string{"frame=1\nfps=0.0\n"}, false},
		{"prefix inside a line", []string{"out_progress=1\n"}, false},
		{"prefix broken by a newline", []string{"progr\ness=continue\n"}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &firstLine{prefix: []byte("progress="), seen: make(chan struct{})}
			for _, w := range tt.writes {
				if n, err := f.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := isClosed(f.seen); got != tt.want {
				t.Errorf("seen closed = %v, want %v", got, tt.want)
			}
			// Later reports must neither panic (closing twice) nor be lost.
			for range 2 {
				_, _ = f.Write([]byte("progress=continue\n"))
			}
			if !isClosed(f.seen) {
				t.Error("seen not closed after a progress line")
			}
		})
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestRecorderSlowStart records from a real Xvfb through an ffmpeg that
// takes 3 s to get going, as on a loaded machine: Start must not return
// before ffmpeg can take SIGINT, or Stop would kill it without an MP4.
func TestRecorderSlowStart(t *testing.T) {
	for _, tool := range []string{"Xvfb", "ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required when CI is set: %v", tool, err)
			}
			t.Skipf("%s not installed (apt-get install xvfb ffmpeg): %v", tool, err)
		}
	}
	ffmpeg, _ := exec.LookPath("ffmpeg")
	bin := t.TempDir()
	script := "#!/bin/sh\nsleep 3\nexec " + ffmpeg + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	ctx := context.Background()
	x, err := xserver.Start(ctx, xserver.Config{Width: 320, Height: 240}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Stop()
	r := &Recorder{Display: x.Display(), Width: 320, Height: 240, Dir: t.TempDir()}
	defer r.Close()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := r.Start(ctx); !errors.Is(err, ErrAlreadyRecording) {
		t.Errorf("second Start = %v, want ErrAlreadyRecording", err)
	}
	path, err := r.Stop(ctx)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	if dur, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err != nil || dur <= 0 {
		t.Errorf("recording duration %q, want > 0", out)
	}
	if _, err := r.Stop(ctx); !errors.Is(err, ErrNotRecording) {
		t.Errorf("second Stop = %v, want ErrNotRecording", err)
	}
}
