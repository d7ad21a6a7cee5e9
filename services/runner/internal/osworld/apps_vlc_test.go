package osworld

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// localExec runs the guest's commands on this machine, as a guest server
// would run them in the VM.
func localExec(command any, shell bool) guest.ExecResult {
	var argv []string
	switch c := command.(type) {
	case string:
		argv = []string{"/bin/sh", "-c", c}
	case []any:
		for _, a := range c {
			argv = append(argv, fmt.Sprint(a))
		}
	}
	if len(argv) == 0 {
		return guest.ExecResult{Status: "error", ReturnCode: -1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	rc := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rc = ee.ExitCode()
	} else if err != nil {
		rc = -1
	}
	return guest.ExecResult{Status: "success", Output: out.String(), Error: errb.String(), ReturnCode: rc}
}

// TestVLCPlayingInfo plays a video in a real VLC with its HTTP interface,
// as OSWorld's VM runs it, reads status.xml through the guest, and scores
// it with is_vlc_playing; with VLC gone the getter answers nil.
func TestVLCPlayingInfo(t *testing.T) {
	vlc := needProgram(t, "vlc")
	ffmpeg := needProgram(t, "ffmpeg")
	needProgram(t, "python3")
	dir := t.TempDir()
	// VLC runs as nobody when the test runs as root: it must reach the
	// video (t.TempDir's parent is private).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	video := filepath.Join(dir, "Never Gonna Give You Up.mp4")
	if out, err := exec.Command(ffmpeg, "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=s=64x48:d=60", "-pix_fmt", "yuv420p", video).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	if err := os.Chmod(video, 0o644); err != nil {
		t.Fatal(err)
	}
	port := proctest.FreePort(t)
	defer func(p int) { vlcPort = p }(vlcPort)
	vlcPort = port
	cmd := exec.Command(vlc, "-I", "dummy", "--extraintf", "http", "--http-host", "127.0.0.1", "--http-port", fmt.Sprint(port),
		"--http-password", "password", "--no-audio", "--vout", "dummy", video)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if os.Geteuid() == 0 {
		// VLC refuses to run as root.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var vlcLog bytes.Buffer
	cmd.Stdout, cmd.Stderr = &vlcLog, &vlcLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	defer stop()
	ready := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/requests/status.xml", port), nil)
		req.SetBasicAuth("", "password")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if strings.Contains(b.String(), "<state>playing</state>") {
				ready = true
				break
			}
		}
	}
	if !ready {
		t.Fatalf("VLC did not play within 20s: %s", vlcLog.String())
	}
	g, gc := newTestGuest(t)
	g.exec = localExec
	s := &Session{Guest: gc, CacheDir: t.TempDir()}
	cfg := map[string]any{"type": "vlc_playing_info", "dest": "status.xml"}
	got, err := s.get(context.Background(), "result", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(s.CacheDir, "status.xml") {
		t.Fatalf("vlc_playing_info = %v, want cache/status.xml", got)
	}
	rules := map[string]any{"type": "file_name", "file_name": filepath.Base(video)}
	score, err := metrics["is_vlc_playing"].Fn(context.Background(), got, rules, true, nil)
	if err != nil || score != 1 {
		b, _ := os.ReadFile(got.(string))
		t.Errorf("is_vlc_playing = %v, %v on %.300s", score, err, b)
	}
	stop()
	ctx, notes := metric.WithNotes(context.Background())
	got, err = s.get(ctx, "result", map[string]any{"type": "vlc_playing_info", "dest": "status2.xml"})
	const why = `the result getter "vlc_playing_info" gave None: VLC's HTTP interface did not answer: `
	if n := notes.List(); err != nil || got != nil || len(n) != 1 || !strings.HasPrefix(n[0], why) {
		t.Errorf("vlc_playing_info without VLC = %v, %v, notes %q; want nil, noting %q", got, err, n, why)
	}
}
