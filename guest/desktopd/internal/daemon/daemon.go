// Package daemon wires desktopd together: the HTTP API, the X display
// (its own Xvfb and window manager in local mode, or an existing display,
// or none), the command runner, the recorder and the AT-SPI reader, and
// stops them all in order.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/a11y"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/api"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/command"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/recording"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/xserver"
)

// DisplayNone runs without any X server.
const DisplayNone = "none"

// Config is desktopd's configuration, filled from flags by main.
type Config struct {
	Addr          string
	Display       string // ":N", "" (Xvfb picks one, with Xvfb) or DisplayNone
	Xvfb          bool   // start and own Xvfb and the window manager
	Width, Height int    // screen size with Xvfb
	WindowManager string
	SessionBus    bool // with Xvfb: start a private D-Bus session bus for AT-SPI
	Token         string
	Home          string // home and working directory of commands; "" keeps desktopd's
	MaxUpload     int64
	// A11yTimeout bounds one /accessibility walk (api.Config.A11yTimeout).
	A11yTimeout time.Duration
	// StartTimeout bounds each start-up wait: Xvfb taking its display,
	// the display answering, the window manager managing the probe
	// window (0: 30 s). A guest under software emulation on a busy host
	// needs minutes.
	StartTimeout time.Duration
	// Ready, if set, is called with the listening address once the API
	// serves every endpoint (tests and benchmarks use it).
	Ready func(addr string)
}

// Run serves until ctx ends (a clean stop, nil error) or the desktop
// fails.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	if cfg.Display == DisplayNone && cfg.Xvfb {
		return errors.New("--display none and --xvfb exclude each other")
	}
	if !cfg.Xvfb && cfg.Display == "" {
		cfg.Display = os.Getenv("DISPLAY")
		if cfg.Display == "" {
			return errors.New("no display: pass --display :N, --xvfb, or --display none")
		}
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Home != "" {
		if err := os.MkdirAll(cfg.Home, 0o755); err != nil {
			return fmt.Errorf("create home %s: %w", cfg.Home, err)
		}
	}
	state, err := os.MkdirTemp("", "desktopd-")
	if err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	defer os.RemoveAll(state)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	runner := &command.Runner{Home: cfg.Home, Dir: cfg.Home}
	at := &a11y.ATSPI{SessionBus: os.Getenv("DBUS_SESSION_BUS_ADDRESS")}
	defer at.Close()
	rec := &recording.Recorder{Dir: state}
	defer rec.Close()
	defer runner.StopAll()
	srv := api.New(api.Config{Token: cfg.Token, MaxUpload: cfg.MaxUpload, Headless: cfg.Display == DisplayNone,
		A11yTimeout: cfg.A11yTimeout},
		log, runner, rec, at)
	httpSrv := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := httpSrv.Shutdown(sctx); err != nil {
			httpSrv.Close()
		}
	}()
	log.Info("listening", zap.String("addr", ln.Addr().String()), zap.String("display", cfg.Display), zap.Bool("xvfb", cfg.Xvfb))

	var xdone <-chan struct{} // Xvfb exited
	var disp *x11.Display
	switch {
	case cfg.Display == DisplayNone:
	case cfg.Xvfb:
		// The window manager is started below, once the probe window
		// is mapped.
		xs, err := xserver.Start(ctx, xserver.Config{
			Display: cfg.Display, Width: cfg.Width, Height: cfg.Height,
			SessionBus: cfg.SessionBus, Dir: state, Home: cfg.Home, ReadyTimeout: cfg.StartTimeout,
		}, log)
		if err != nil {
			return err
		}
		defer xs.Stop()
		xdone = xs.Exited()
		runner.Env = xs.Env()
		at.SessionBus = xs.BusAddress()
		disp, err = openDisplay(ctx, xs.Display(), cfg.StartTimeout, log)
		if err != nil {
			return err
		}
		defer disp.Close()
		if cfg.WindowManager != "" {
			if err := startWindowManager(ctx, xs, disp, cfg.WindowManager, cfg.StartTimeout, log); err != nil {
				return fmt.Errorf("window manager %s (start timeout %v): %w", cfg.WindowManager, cfg.StartTimeout, err)
			}
		}
	default:
		runner.Env = []string{"DISPLAY=" + cfg.Display}
		disp, err = openDisplay(ctx, cfg.Display, cfg.StartTimeout, log)
		if err != nil {
			return err
		}
		defer disp.Close()
		// A window opened before the window manager is up maps slowly;
		// report ready only once it announced itself. An external
		// display may have none: then wait a little and go on.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := disp.WaitForWM(wctx)
		cancel()
		switch {
		case err == nil:
			log.Info("window manager announced")
		case ctx.Err() != nil:
			return err
		default:
			log.Info("no EWMH window manager on the display; continuing without")
		}
	}
	var ddone <-chan struct{}
	if disp != nil {
		w, h := disp.Size()
		rec.Display, rec.Width, rec.Height = disp.Name(), w, h
		srv.SetDisplay(disp)
		if at.SessionBus != "" {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go srv.WatchWallpaper(wctx, at.SessionBus)
		}
		ddone = disp.Done()
		log.Info("display ready", zap.String("display", disp.Name()), zap.Int("width", w), zap.Int("height", h))
	}
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}

	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-xdone:
		srv.DisplayLost(errors.New("Xvfb exited"))
		return errors.New("Xvfb exited unexpectedly")
	case <-ddone:
		srv.DisplayLost(errors.New("connection to the X server closed"))
		return errors.New("connection to the X server closed")
	}
}

// startWindowManager starts desktopd's own window manager and waits until
// it manages a window opened now (see x11.ProbeManaged): the probe window
// is mapped before the window manager starts, so that the window manager
// takes it over in the pass over existing windows it makes right after it
// announces itself; a window mapped after the announcement but before the
// window manager reads its events is lost until mapped again.
func startWindowManager(ctx context.Context, xs *xserver.Server, disp *x11.Display, wm string, timeout time.Duration, log *zap.Logger) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	probe, err := disp.MapProbe()
	if err != nil {
		return err
	}
	if err := xs.StartWindowManager(wm); err != nil {
		probe.Close()
		return err
	}
	if err := disp.WaitForWM(wctx); err != nil {
		probe.Close()
		return err
	}
	log.Info("window manager announced")
	if err := probe.WaitManaged(wctx); err != nil {
		return err
	}
	log.Info("probe window managed")
	return nil
}

// openDisplay connects, retrying for a while: the X server may still be
// starting.
func openDisplay(ctx context.Context, name string, timeout time.Duration, log *zap.Logger) (*x11.Display, error) {
	deadline := time.Now().Add(timeout)
	for {
		d, err := x11.Open(ctx, name, log)
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
