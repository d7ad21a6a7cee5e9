// Command desktopd is rolloutmesh's guest server: OSWorld's in-VM HTTP API
// over a real X display. See guest/desktopd/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/api"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/daemon"
)

func main() {
	var cfg daemon.Config
	var screen, level string
	var lvl zapcore.Level
	flag.StringVar(&cfg.Addr, "addr", ":5000", "listen address")
	flag.StringVar(&cfg.Display, "display", "", `X display (":N"); "none" runs without X; with --xvfb, empty picks a free one`)
	flag.BoolVar(&cfg.Xvfb, "xvfb", false, "start and own an Xvfb and a window manager on --display")
	flag.StringVar(&screen, "screen", "1920x1080", "screen size with --xvfb, WxH")
	flag.StringVar(&cfg.WindowManager, "wm", "openbox", `window manager started with --xvfb ("" for none)`)
	flag.BoolVar(&cfg.SessionBus, "dbus", true, "with --xvfb, start a private D-Bus session bus (for the AT-SPI accessibility tree)")
	flag.StringVar(&cfg.Token, "token", "", "require Authorization: Bearer TOKEN; visible in ps, so prefer $DESKTOPD_TOKEN or --token-file")
	tokenFile := flag.String("token-file", "", "read the bearer token from this file (default $DESKTOPD_TOKEN)")
	flag.StringVar(&cfg.Home, "home", "", "home and working directory for commands and ~ expansion")
	flag.Int64Var(&cfg.MaxUpload, "max-upload", 2<<30, "largest accepted upload or download, in bytes")
	flag.DurationVar(&cfg.A11yTimeout, "a11y-timeout", api.DefaultA11yTimeout, "bound of one /accessibility request; a longer walk answers with the part it read")
	flag.DurationVar(&cfg.StartTimeout, "start-timeout", 30*time.Second, "bound of each start-up wait (Xvfb, the display, the window manager); raise it for guests under software emulation")
	flag.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	readyFD := flag.Int("ready-fd", -1, "once every endpoint serves (the display ready), write \"ready\\n\" to this inherited file descriptor and close it, so a supervisor need not poll /healthz")
	flag.Parse()
	token, err := daemon.ResolveToken(cfg.Token, *tokenFile, os.Getenv(daemon.TokenEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "desktopd: %v\n", err)
		os.Exit(2)
	}
	cfg.Token = token
	// The commands desktopd runs for callers (and Xvfb, the window manager)
	// inherit its environment; they have no use for the token.
	os.Unsetenv(daemon.TokenEnv)
	if _, err := fmt.Sscanf(screen, "%dx%d", &cfg.Width, &cfg.Height); err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		fmt.Fprintf(os.Stderr, "desktopd: bad --screen %q, want WxH\n", screen)
		os.Exit(2)
	}
	lvl, err = zapcore.ParseLevel(level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "desktopd: bad --log-level: %v\n", err)
		os.Exit(2)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	log, err := zc.Build()
	if err != nil {
		fmt.Fprintf(os.Stderr, "desktopd: logger: %v\n", err)
		os.Exit(1)
	}
	defer log.Sync()

	if *readyFD >= 0 {
		if *readyFD <= 2 {
			fmt.Fprintf(os.Stderr, "desktopd: --ready-fd %d is stdin, stdout or stderr; want an inherited descriptor >= 3\n", *readyFD)
			os.Exit(2)
		}
		// Not for the processes desktopd starts: they would hold the
		// pipe open after desktopd is gone.
		syscall.CloseOnExec(*readyFD)
		f := os.NewFile(uintptr(*readyFD), "ready-fd")
		cfg.Ready = func(string) {
			_, _ = f.WriteString("ready\n")
			_ = f.Close()
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := daemon.Run(ctx, cfg, log); err != nil {
		log.Error("desktopd failed", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
}
