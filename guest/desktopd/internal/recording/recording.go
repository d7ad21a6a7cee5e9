// Package recording records the screen to an MP4 with ffmpeg's x11grab, as
// OSWorld's /start_recording and /end_recording do: one recording at a
// time, stopped with SIGINT so that ffmpeg writes the MP4 index.
package recording

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors callers map to HTTP statuses.
var (
	ErrAlreadyRecording = errors.New("recording already in progress")
	ErrNotRecording     = errors.New("no recording in progress")
)

// startTimeout bounds how long Start waits for ffmpeg's first progress
// report.
const startTimeout = 30 * time.Second

// Recorder owns at most one ffmpeg process.
type Recorder struct {
	Display string // ":N"
	Width   int
	Height  int
	Dir     string // where the MP4 goes; private to this desktopd

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	path string
	log  *tailBuffer
}

// Start begins a recording.
func (r *Recorder) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return ErrAlreadyRecording
	}
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return fmt.Errorf("ffmpeg not found: %w", err)
	}
	path := filepath.Join(r.Dir, "recording.mp4")
	_ = os.Remove(path)
	log := &tailBuffer{max: 8 << 10}
	progress := &firstLine{prefix: []byte("progress="), seen: make(chan struct{})}
	// yuv420p keeps the file playable everywhere; ultrafast keeps the
	// encoder from competing with the desktop for the CPU. The progress
	// reports on stdout tell Start when frames are being encoded.
	cmd := exec.Command(bin, "-y", "-nostdin", "-loglevel", "error", "-progress", "pipe:1",
		"-f", "x11grab", "-draw_mouse", "1", "-framerate", "30",
		"-video_size", fmt.Sprintf("%dx%d", r.Width, r.Height), "-i", r.Display+".0",
		"-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-r", "30", path)
	cmd.Stdout = progress
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start ffmpeg: %w", err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.path, r.log, r.err = cmd, done, path, log, nil
	go func() {
		r.err = cmd.Wait()
		close(done)
	}()
	// OSWorld counts ffmpeg as started once it has lived 2 s. That is not
	// enough: on a loaded machine ffmpeg can still be loading its libraries
	// then, and a SIGINT before its handler is in place kills it without an
	// MP4. Its first progress report comes after the handler is installed
	// and the first frame is encoded.
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-progress.seen:
		return nil
	case <-done:
		r.cmd = nil
		return fmt.Errorf("ffmpeg exited at start: %v: %s", r.err, strings.TrimSpace(log.String()))
	case <-timer.C:
		r.stopLocked(5 * time.Second)
		r.cmd = nil
		return fmt.Errorf("ffmpeg reported no progress within %s: %s", startTimeout, strings.TrimSpace(log.String()))
	case <-ctx.Done():
		r.stopLocked(5 * time.Second)
		r.cmd = nil
		return ctx.Err()
	}
}

func (r *Recorder) stopLocked(grace time.Duration) (forced bool) {
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.done:
		return false
	case <-time.After(grace):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		return true
	}
}

// Stop ends the recording and returns the path of the finished MP4. The
// caller owns the file until the next Start.
func (r *Recorder) Stop(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return "", ErrNotRecording
	}
	// OSWorld allows ffmpeg 15 s to write the file.
	forced := r.stopLocked(15 * time.Second)
	r.cmd = nil
	if forced {
		return "", fmt.Errorf("ffmpeg did not finish within 15s: %s", strings.TrimSpace(r.log.String()))
	}
	st, err := os.Stat(r.path)
	if err != nil || st.Size() == 0 {
		return "", fmt.Errorf("recording file missing or empty (ffmpeg: %v: %s)", r.err, strings.TrimSpace(r.log.String()))
	}
	return r.path, nil
}

// Close stops a running recording.
func (r *Recorder) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.stopLocked(5 * time.Second)
		r.cmd = nil
	}
}

// firstLine closes seen once a line starting with prefix has been written
// to it, and discards everything.
type firstLine struct {
	prefix []byte
	seen   chan struct{}
	line   []byte // the start of the current line, up to len(prefix)
	done   bool
}

// Write is called from one goroutine only (exec copies a pipe with one).
func (f *firstLine) Write(p []byte) (int, error) {
	if f.done {
		return len(p), nil
	}
	for _, c := range p {
		if c == '\n' {
			f.line = f.line[:0]
			continue
		}
		if len(f.line) < len(f.prefix) {
			f.line = append(f.line, c)
			if bytes.Equal(f.line, f.prefix) {
				f.done = true
				close(f.seen)
				break
			}
		}
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
