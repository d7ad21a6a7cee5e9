package x11

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"
	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/xserver"
)

// startDesktop starts a private Xvfb with openbox and connects to it. The
// tools are required when CI is set; elsewhere the test is skipped.
func startDesktop(t *testing.T, w, h int) *Display {
	t.Helper()
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI: %v", bin, err)
			}
			t.Skipf("%s not installed (apt-get install xvfb openbox): %v", bin, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	srv, err := xserver.Start(ctx, xserver.Config{Width: w, Height: h, WindowManager: "openbox", Dir: t.TempDir()}, log)
	if err != nil {
		t.Fatalf("start X: %v", err)
	}
	t.Cleanup(srv.Stop)
	d, err := Open(ctx, srv.Display(), log)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(d.Close)
	if err := d.WaitForWM(ctx); err != nil {
		t.Fatalf("WaitForWM: %v", err)
	}
	return d
}

func TestScreenshotAndPointer(t *testing.T) {
	d := startDesktop(t, 320, 200)
	ctx := context.Background()
	d.Move(100, 50)
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	x, y, err := d.Pointer(ctx)
	if err != nil || x != 100 || y != 50 {
		t.Fatalf("Pointer got (%d,%d,%v), want (100,50,nil)", x, y, err)
	}
	var buf bytes.Buffer
	if err := d.Screenshot(ctx, &buf); err != nil {
		t.Fatalf("Screenshot: %v", err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got := img.Bounds().Size(); got.X != 320 || got.Y != 200 {
		t.Fatalf("size got %v, want 320x200", got)
	}
	// The cursor is drawn: the pixels around the hot spot differ from the
	// flat background far from it.
	bg := img.At(300, 190)
	differs := false
	for dy := -8; dy <= 8; dy++ {
		for dx := -8; dx <= 8; dx++ {
			if img.At(100+dx, 50+dy) != bg {
				differs = true
			}
		}
	}
	if !differs {
		t.Errorf("no cursor drawn near (100,50)")
	}
}

func TestResolveRemapsMissingKeysyms(t *testing.T) {
	d := startDesktop(t, 320, 200)
	ctx := context.Background()
	const euro = 0x010020ac // Unicode keysym for U+20AC
	strokes, err := d.Resolve(ctx, []uint32{'a', 'A', euro, euro})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if strokes[0].Shift || !strokes[1].Shift || strokes[0].Code != strokes[1].Code {
		t.Errorf("a/A got %+v %+v, want same code, shift only for A", strokes[0], strokes[1])
	}
	if strokes[2] != strokes[3] || strokes[2].Shift {
		t.Errorf("euro strokes got %+v %+v, want one unshifted code", strokes[2], strokes[3])
	}
	r, err := xproto.GetKeyboardMapping(d.conn, strokes[2].Code, 1).Reply()
	if err != nil || len(r.Keysyms) == 0 || r.Keysyms[0] != euro {
		t.Fatalf("server keymap for code %d got %v (%v), want %#x", strokes[2].Code, r, err, euro)
	}
}

func TestClipboardServesOtherClients(t *testing.T) {
	d := startDesktop(t, 320, 200)
	ctx := context.Background()
	const want = "héllo clipboard"
	if err := d.SetClipboard(want); err != nil {
		t.Fatalf("SetClipboard: %v", err)
	}
	other, err := Open(ctx, d.Name(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got, err := other.readSelection(ctx, "CLIPBOARD")
	if err != nil {
		t.Fatalf("read selection: %v", err)
	}
	if got != want {
		t.Errorf("clipboard got %q, want %q", got, want)
	}
}

// TestProbeManaged: the probe returns once openbox manages a new window, and
// leaves no window behind.
func TestProbeManaged(t *testing.T) {
	d := startDesktop(t, 640, 480)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.ProbeManaged(ctx); err != nil {
		t.Fatalf("ProbeManaged: %v", err)
	}
	// The probe window is gone from the client list once destroyed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		wins, err := d.Windows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(wins) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("windows left after the probe: %+v", wins)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMapProbeBeforeWM: a probe mapped before openbox starts is managed in
// openbox's first pass, without a re-map (desktopd's start-up path), and
// a window mapped once right after that is managed too: a task's first
// window does not wait.
func TestMapProbeBeforeWM(t *testing.T) {
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI: %v", bin, err)
			}
			t.Skipf("%s not installed (apt-get install xvfb openbox): %v", bin, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	srv, err := xserver.Start(ctx, xserver.Config{Width: 320, Height: 240, Dir: t.TempDir()}, log)
	if err != nil {
		t.Fatalf("start X: %v", err)
	}
	t.Cleanup(srv.Stop)
	d, err := Open(ctx, srv.Display(), log)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(d.Close)
	probe, err := d.MapProbe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.StartWindowManager("openbox"); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitForWM(ctx); err != nil {
		t.Fatalf("WaitForWM: %v", err)
	}
	announced := time.Now()
	if err := probe.WaitManaged(ctx); err != nil {
		t.Fatalf("WaitManaged: %v", err)
	}
	if took := time.Since(announced); took >= premappedRemap {
		t.Errorf("probe managed %v after openbox announced itself: it needed a re-map", took)
	} else {
		t.Logf("probe managed %v after openbox announced itself", took)
	}

	// A second window, mapped once.
	next, err := d.mapProbe(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := next.WaitManaged(wctx); err != nil {
		t.Fatalf("a window mapped once after the probe was managed: %v", err)
	}
}
