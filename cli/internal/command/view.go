package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/serverkit/zaplog"
	"github.com/rolloutmesh/rolloutmesh/services/storage"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
)

// cmdView shows the trajectory viewer. With --remote it prints the address
// of a running mesh's viewer (storage serves it under /ui/ on its HTTP
// address). Otherwise it serves the viewer itself over the embedded mesh's
// data directory (what `rollout run` left), read-only, until Ctrl+C.
func cmdView(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout view", flag.ContinueOnError)
	remote := fs.Bool("remote", false, "view a running mesh (rollout up, compose): its storage's HTTP address serves the viewer")
	storageHTTP := fs.String("storage-http", envOr("ROLLOUTMESH_STORAGE_HTTP", "localhost:9105"), "storage's HTTP address with --remote")
	dataDir := fs.String("data-dir", ".rolloutmesh", "the embedded mesh's data directory (as given to rollout run)")
	listen := fs.String("listen", "127.0.0.1:9180", "where the viewer of the embedded data listens; 127.0.0.1 keeps it to this machine")
	open := fs.Bool("open", false, "open the viewer in a browser (xdg-open)")
	var client clientFlags
	client.register(fs, "bearer token the embedded viewer requires (a remote mesh's viewer asks for its own on a login page)")
	if err := parse(fs, normalizeArgs(fs, args), stderr); err != nil {
		return err
	}
	if err := client.resolve(fs); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError{fmt.Errorf("unexpected argument %q: rollout view takes one rollout id at most", fs.Arg(1))}
	}
	path := "/ui/"
	if id := fs.Arg(0); id != "" {
		path = "/ui/rollouts/" + url.PathEscape(id)
	}
	if *remote {
		host, port, err := net.SplitHostPort(*storageHTTP)
		if err != nil || port == "" {
			return usageError{fmt.Errorf("--storage-http %q is not host:port", *storageHTTP)}
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "localhost"
		}
		u := "http://" + net.JoinHostPort(host, port) + path
		fmt.Fprintln(stdout, u)
		if *open {
			return openBrowser(u, stderr)
		}
		return nil
	}

	dir := filepath.Join(*dataDir, mesh.Storage)
	if _, err := os.Stat(filepath.Join(dir, "index.db")); err != nil {
		return usageError{fmt.Errorf("no embedded mesh data in %s (run `rollout run` first, give --data-dir, or --remote for a running mesh)", dir)}
	}
	logger, err := zaplog.New(zaplog.Config{Level: "error", Format: "console"})
	if err != nil {
		return err
	}
	v, err := storage.OpenViewer(ctx, storage.Config{}, dir, client.token, logger)
	if err != nil {
		return err
	}
	defer v.Close()
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	u := "http://" + l.Addr().String() + path
	fmt.Fprintln(stdout, u)
	fmt.Fprintf(stderr, "serving the viewer of %s; Ctrl+C stops it\n", dir)
	if *open {
		if err := openBrowser(u, stderr); err != nil {
			logger.Warn("open browser failed", zap.Error(err))
		}
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve viewer: %w", err)
		}
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

// openBrowser starts the desktop's browser on u and does not wait for it.
func openBrowser(u string, stderr io.Writer) error {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("not opening %q: not an http URL", u)
	}
	bin, err := exec.LookPath("xdg-open")
	if err != nil {
		return fmt.Errorf("--open needs xdg-open (apt-get install xdg-utils); open %s yourself", u)
	}
	cmd := exec.Command(bin, u)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("xdg-open: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
