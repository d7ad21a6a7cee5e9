package daemon

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writePNG(t *testing.T, path string, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWallpaperFollowsGSettings: a wallpaper set the way OSWorld's tasks
// and agents set it, with gsettings in a command, is what /wallpaper
// returns, as OSWorld's server reads it back from gsettings; one set with
// /setup/change_wallpaper is readable by gsettings too.
func TestWallpaperFollowsGSettings(t *testing.T) {
	requireTools(t, "Xvfb", "openbox", "dbus-daemon", "gsettings")
	if _, err := os.Stat("/usr/share/glib-2.0/schemas/org.gnome.desktop.background.gschema.xml"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("gsettings-desktop-schemas is required when CI is set: %v", err)
		}
		t.Skip("gsettings-desktop-schemas not installed")
	}
	c := start(t, Config{Xvfb: true, Width: 320, Height: 240, WindowManager: "openbox", SessionBus: true})
	red := writePNG(t, filepath.Join(c.home, "red.png"), color.RGBA{255, 0, 0, 255})
	blue := writePNG(t, filepath.Join(c.home, "blue.png"), color.RGBA{0, 0, 255, 255})
	green := writePNG(t, filepath.Join(c.home, "my pics.png"), color.RGBA{0, 255, 0, 255})

	wallpaper := func() (int, []byte) {
		code, _, body := c.do(http.MethodPost, "/wallpaper", "", nil)
		return code, body
	}
	gset := func(uri string) {
		t.Helper()
		code, body := c.postJSON("/execute", map[string]any{
			"command": []string{"gsettings", "set", "org.gnome.desktop.background", "picture-uri", uri}})
		if code != 200 || !bytes.Contains(body, []byte(`"returncode":0`)) {
			t.Fatalf("gsettings set: %d %s", code, body)
		}
	}

	if code, body := c.postJSON("/setup/change_wallpaper", map[string]any{"path": "~/red.png"}); code != 200 {
		t.Fatalf("change_wallpaper: %d %s", code, body)
	}
	if code, body := wallpaper(); code != 200 || !bytes.Equal(body, red) {
		t.Fatalf("after change_wallpaper: /wallpaper = %d (%d bytes), want red.png", code, len(body))
	}
	code, body := c.postJSON("/execute", map[string]any{
		"command": []string{"gsettings", "get", "org.gnome.desktop.background", "picture-uri"}})
	if want := "'file://" + filepath.Join(c.home, "red.png") + "'"; code != 200 || !bytes.Contains(body, []byte(want)) {
		t.Errorf("gsettings get after change_wallpaper = %d %s, want %s", code, body, want)
	}

	// The screen shows what picture-uri names, as GNOME's desktop would.
	shows := func(want color.RGBA) {
		t.Helper()
		var got color.Color
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			got = c.screenshot().At(5, 5)
			r, g, b, _ := got.RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B {
				return
			}
		}
		t.Errorf("the screen shows %v at (5, 5), want %v", got, want)
	}
	shows(color.RGBA{255, 0, 0, 255})
	gset("file://" + filepath.Join(c.home, "blue.png"))
	shows(color.RGBA{0, 0, 255, 255})

	for _, tc := range []struct {
		name, uri string
		want      []byte
	}{
		{"plain uri", "file://" + filepath.Join(c.home, "blue.png"), blue},
		{"escaped uri", "file://" + filepath.Join(c.home, "my%20pics.png"), green},
		{"back to the first file", "file://" + filepath.Join(c.home, "red.png"), red},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gset(tc.uri)
			if tc.name == "back to the first file" {
				shows(color.RGBA{255, 0, 0, 255})
			}
			if code, body := wallpaper(); code != 200 || !bytes.Equal(body, tc.want) {
				t.Errorf("/wallpaper = %d %q, want the file of %s", code, truncate(body), tc.uri)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		gset("file:///nonexistent/x.png")
		// The file set through desktopd is still on the root window, but
		// the settings name another: OSWorld's server answers 404 here;
		// we serve the file desktopd showed last rather than nothing.
		if code, body := wallpaper(); code != 200 || !bytes.Equal(body, red) {
			t.Errorf("/wallpaper = %d %q, want red.png (the last one shown)", code, truncate(body))
		}
	})
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
