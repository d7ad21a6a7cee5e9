package api

import (
	"context"
	"fmt"
	"image"
	_ "image/gif" // wallpaper formats
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/command"
)

// The GNOME key OSWorld's server reads and writes for the wallpaper.
const (
	bgSchema = "org.gnome.desktop.background"
	bgKey    = "picture-uri"
)

// gsettingsTimeout bounds one gsettings run: with dconf it answers in
// milliseconds, but a wedged session bus must not hold a request.
const gsettingsTimeout = 5 * time.Second

// changeWallpaper sets the root window background from an image file
// (PNG, JPEG or GIF), which is what a plain X desktop shows, and, where
// gsettings is installed, GNOME's picture-uri as OSWorld's server does, so
// that the tasks' own gsettings commands read the same wallpaper back.
func (s *Server) changeWallpaper(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path string `json:"path"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return badRequest("Path not supplied!")
	}
	p := s.run.ExpandPath(req.Path)
	img, err := loadImage(p)
	if err != nil {
		return err
	}
	d, err := s.display()
	if err != nil {
		return err
	}
	if err := d.d.SetBackground(r.Context(), img); err != nil {
		return err
	}
	// OSWorld writes "file://" + path unescaped, and its getter strips
	// the prefix again: keep that exact form.
	if err := s.setGSettings(r.Context(), bgSchema, bgKey, "file://"+p); err != nil {
		s.log.Warn("gsettings set of the wallpaper failed", zap.Error(err))
	}
	gs, _ := s.gsettingsWallpaper(r.Context())
	s.wallMu.Lock()
	s.wallpaper, s.wallGS = p, gs
	s.wallMu.Unlock()
	writeText(w, http.StatusOK, "Wallpaper changed successfully")
	return nil
}

// loadImage decodes a PNG, JPEG or GIF file of at most 64 Mpixels.
func loadImage(p string) (image.Image, error) {
	f, _, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return nil, badRequest("not a PNG, JPEG or GIF image: %v", err)
	}
	if cfg.Width*cfg.Height > 64<<20 {
		return nil, badRequest("image of %dx%d pixels is too large", cfg.Width, cfg.Height)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, badRequest("decode image: %v", err)
	}
	return img, nil
}

// dconf announces every write on the session bus with this signal: the
// path prefix written and the keys under it.
const (
	dconfWriter = "ca.desrt.dconf.Writer"
	bgKeyPath   = "/org/gnome/desktop/background/picture-uri"
)

// WatchWallpaper shows on the root window the image GNOME's picture-uri
// names whenever a gsettings or dconf write changes it, as GNOME's desktop
// would: openbox has no desktop shell to do it, and an agent that sets the
// wallpaper with gsettings should see it change. It returns when ctx ends,
// at once when gsettings is not installed.
func (s *Server) WatchWallpaper(ctx context.Context, busAddr string) {
	if _, err := exec.LookPath("gsettings"); err != nil || busAddr == "" {
		return
	}
	conn, err := dbus.Connect(busAddr, dbus.WithContext(ctx))
	if err != nil {
		s.log.Warn("wallpaper watch: connect to the session bus", zap.Error(err))
		return
	}
	defer conn.Close()
	if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(dconfWriter), dbus.WithMatchMember("Notify")); err != nil {
		s.log.Warn("wallpaper watch: subscribe to dconf", zap.Error(err))
		return
	}
	ch := make(chan *dbus.Signal, 64)
	conn.Signal(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-ch:
			if !ok {
				return
			}
			if !touchesWallpaper(sig) {
				continue
			}
			if err := s.showGSettingsWallpaper(ctx); err != nil {
				s.log.Info("wallpaper watch: not shown", zap.Error(err))
			}
		}
	}
}

// touchesWallpaper says whether a dconf Notify (prefix, keys, tag) covers
// picture-uri: the key itself, or a directory above it (dconf reset -f).
func touchesWallpaper(sig *dbus.Signal) bool {
	if sig.Name != dconfWriter+".Notify" || len(sig.Body) < 2 {
		return false
	}
	prefix, _ := sig.Body[0].(string)
	keys, _ := sig.Body[1].([]string)
	if len(keys) == 0 {
		keys = []string{""}
	}
	for _, k := range keys {
		p := prefix + k
		if p == bgKeyPath || strings.HasSuffix(p, "/") && strings.HasPrefix(bgKeyPath, p) {
			return true
		}
	}
	return false
}

func (s *Server) showGSettingsWallpaper(ctx context.Context) error {
	gs, err := s.gsettingsWallpaper(ctx)
	if err != nil {
		return err
	}
	// /setup/change_wallpaper's own write lands here too: painted twice,
	// which is cheaper than tracking what the screen shows.
	p := existingPath(gs)
	if p == "" {
		return fmt.Errorf("picture-uri names no file: %q", gs)
	}
	img, err := loadImage(p)
	if err != nil {
		return err
	}
	d, err := s.display()
	if err != nil {
		return err
	}
	return d.d.SetBackground(ctx, img)
}

// getWallpaper returns the wallpaper file, as OSWorld's server does from
// gsettings' picture-uri: a wallpaper a task or the agent set with
// gsettings (org.gnome.desktop.background picture-uri) counts, not only
// one set with /setup/change_wallpaper. The one set here is served while
// picture-uri still holds what it held right after it was set; a later
// change of picture-uri naming a file wins. Without gsettings (the small
// image) it is the image last set with /setup/change_wallpaper.
func (s *Server) getWallpaper(w http.ResponseWriter, r *http.Request) error {
	gs, gsErr := s.gsettingsWallpaper(r.Context())
	s.wallMu.Lock()
	own, ownGS := s.wallpaper, s.wallGS
	s.wallMu.Unlock()
	if own != "" && (gsErr != nil || gs == ownGS) {
		return sendFile(w, r, own, "")
	}
	if gsErr == nil && gs != "" {
		if p := existingPath(gs); p != "" {
			return sendFile(w, r, p, "")
		}
	}
	if own != "" {
		return sendFile(w, r, own, "")
	}
	if gsErr == nil && gs != "" {
		return errorf(http.StatusNotFound, "Wallpaper file not found: %s", gs)
	}
	return errorf(http.StatusNotFound, "Wallpaper not set")
}

// existingPath is the regular file a picture-uri path names: the path as
// OSWorld's getter takes it (the prefix stripped, nothing unescaped), or,
// when that does not exist, percent-decoded, since GNOME's own settings
// panel writes escaped URIs (file:///home/user/My%20Pictures/a.png).
func existingPath(p string) string {
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	if u, err := url.PathUnescape(p); err == nil && u != p {
		if st, err := os.Stat(u); err == nil && st.Mode().IsRegular() {
			return u
		}
	}
	return ""
}

// gsettingsWallpaper returns picture-uri as OSWorld's server turns it into
// a path: without "file://" and without quotes. gsettings runs with the
// environment of every command desktopd runs (the session bus, HOME), so
// it reads the dconf database the tasks' and the agent's gsettings
// commands write.
func (s *Server) gsettingsWallpaper(ctx context.Context) (string, error) {
	v, err := s.getGSettings(ctx, bgSchema, bgKey)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(v, "file://"), nil
}

// errNoGSettings means gsettings is not installed.
var errNoGSettings = errorf(http.StatusNotFound, "gsettings is not installed")

func (s *Server) getGSettings(ctx context.Context, schema, key string) (string, error) {
	if _, err := exec.LookPath("gsettings"); err != nil {
		return "", errNoGSettings
	}
	res, err := s.run.Run(ctx, command.Spec{Argv: []string{"gsettings", "get", schema, key}, Timeout: gsettingsTimeout})
	if err != nil {
		return "", err
	}
	if res.Code != 0 {
		return "", errorf(http.StatusInternalServerError, "gsettings get %s %s: exit %d: %s", schema, key, res.Code, strings.TrimSpace(res.Stderr))
	}
	return parseGVariantString(res.Stdout), nil
}

func (s *Server) setGSettings(ctx context.Context, schema, key, value string) error {
	if _, err := exec.LookPath("gsettings"); err != nil {
		return errNoGSettings
	}
	res, err := s.run.Run(ctx, command.Spec{Argv: []string{"gsettings", "set", schema, key, value}, Timeout: gsettingsTimeout})
	if err != nil {
		return err
	}
	if res.Code != 0 {
		return errorf(http.StatusInternalServerError, "gsettings set %s %s: exit %d: %s", schema, key, res.Code, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// parseGVariantString reads gsettings' printing of a string value:
// 'text' with \' and \\ escaped, or "text" when the text holds a quote.
// Anything else is returned trimmed, as OSWorld's replace-based parse
// would leave it but without stray quotes.
func parseGVariantString(out string) string {
	v := strings.TrimSpace(out)
	if len(v) < 2 || (v[0] != '\'' && v[0] != '"') || v[len(v)-1] != v[0] {
		return strings.ReplaceAll(v, "'", "")
	}
	var b strings.Builder
	body := v[1 : len(v)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\\' && i+1 < len(body) {
			i++
			switch body[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(body[i])
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
