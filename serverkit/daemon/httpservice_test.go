package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// pagesService is an echoService that also serves pages on the HTTP
// address, as storage serves its viewer.
type pagesService struct{ *echoService }

func (pagesService) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "page "+r.URL.Path)
	})
}

// TestHTTPServiceBesideAdmin: a service's own HTTP handler gets every path
// but /metrics and /healthz, which stay the admin handler's.
func TestHTTPServiceBesideAdmin(t *testing.T) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{
			GRPCListener: gl, HTTPListener: hl, Logger: zaptest.NewLogger(t), Registry: NewRegistry(),
			DrainTimeout: 2 * time.Second,
		}, pagesService{newEcho()})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}()
	base := "http://" + hl.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		var resp *http.Response
		for i := 0; i < 100; i++ {
			if resp, err = http.Get(base + path); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path     string
		wantCode int
		want     string // prefix of the body
	}{
		{"/ui/rollouts", 200, "page /ui/rollouts"},
		{"/", 200, "page /"},
		{"/healthz", 200, ""},
		{"/metrics", 200, "# HELP"},
	} {
		code, body := get(tc.path)
		if code != tc.wantCode || len(body) < len(tc.want) || body[:len(tc.want)] != tc.want {
			t.Errorf("GET %s = %d %.40q, want %d %q...", tc.path, code, body, tc.wantCode, tc.want)
		}
		if (tc.path == "/healthz" || tc.path == "/metrics") && len(body) >= 5 && body[:5] == "page " {
			t.Errorf("GET %s went to the service's handler", tc.path)
		}
	}
}
