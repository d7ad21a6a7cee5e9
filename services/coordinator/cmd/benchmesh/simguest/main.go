// Command simguest is a light stand-in for N desktop guests: one process
// listening on N loopback ports, each answering the parts of OSWorld's
// in-VM HTTP API a runner uses for a screenshot-only episode. There is no X
// server: /screenshot returns a fixed 1280×720 PNG of a busy desktop,
// generated once from a fixed seed, with a tEXt chunk naming the guest and
// its frame. The frame changes with every action the guest runs, so every
// step's screenshot has distinct bytes (storage deduplicates by hash, and
// real screenshots differ step to step), while two screenshots with no
// action between them are equal, as a desktop at rest gives. Actions are
// accepted and do nothing else.
//
//	simguest -n 1024 -endpoints /tmp/endpoints.txt
//
// The endpoints file gets one http://127.0.0.1:PORT per line once every
// port listens. `simguest -write-png FILE` writes the screenshot and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 64, "guests (ports) to serve")
	endpoints := flag.String("endpoints", "", "file to write the guests' base URLs to, one a line")
	width := flag.Int("width", 1280, "screen width")
	height := flag.Int("height", 720, "screen height")
	writePNG := flag.String("write-png", "", "write the screenshot to this file and exit")
	flag.Parse()
	if *n <= 0 || *n > 16384 {
		log.Fatalf("-n %d: want 1..16384", *n)
	}
	if *width <= 0 || *width > 8192 || *height <= 0 || *height > 8192 {
		log.Fatalf("-width/-height %dx%d: want 1..8192", *width, *height)
	}
	shot, err := newScreenshot(*width, *height, 1)
	if err != nil {
		log.Fatal(err)
	}
	if *writePNG != "" {
		if err := os.WriteFile(*writePNG, shot.frame(0, 0), 0o644); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *endpoints, *width, *height, shot); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, n int, endpoints string, w, h int, shot *screenshot) error {
	var urls []string
	srvs := make([]*http.Server, 0, n)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, srv := range srvs {
			_ = srv.Shutdown(sctx)
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen %d: %w", i, err)
		}
		g := &guest{id: i, shot: shot, width: w, height: h}
		srv := &http.Server{Handler: g.routes(), ReadHeaderTimeout: 10 * time.Second}
		srvs = append(srvs, srv)
		urls = append(urls, "http://"+l.Addr().String())
		go srv.Serve(l) //nolint:errcheck // ends with Shutdown
	}
	if endpoints != "" {
		tmp := endpoints + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		// Renamed into place, so a reader never sees half the list.
		if err := os.Rename(tmp, endpoints); err != nil {
			return err
		}
	}
	log.Printf("simguest: %d guests, screenshot %d bytes", n, len(shot.frame(0, 0)))
	<-ctx.Done()
	return nil
}
