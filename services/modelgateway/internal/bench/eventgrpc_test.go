package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEventGRPCProxy drives the event-loop gRPC proxy with grpc-go's
// client, dialled as runners dial, in front of a backend that echoes what
// it was sent (in chunks when it is long): calls in parallel on one
// connection, messages larger than a stream's flow-control window each
// way, a call the client gives up on, and the calls it must refuse.
func TestEventGRPCProxy(t *testing.T) {
	var seen sync.Map // the Host and Content-Type the backend saw
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Host+" "+r.Header.Get("Content-Type"), true)
		body, _ := io.ReadAll(r.Body)
		switch {
		case string(body) == "slow":
			time.Sleep(300 * time.Millisecond)
		case string(body) == "refuse":
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Write(body)
	}))
	defer backend.Close()
	// A bound on every call: a window never given back stalls one.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, done := serveAt(t, ctx, serveEventGRPCProxy, backend.URL)
	conn, err := runnerConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(ctx context.Context, body []byte) ([]byte, error) {
		var got []byte
		err := conn.Invoke(ctx, bareGRPCMethod, &body, &got, grpc.ForceCodecV2(rawCodec{}))
		return got, err
	}

	t.Run("parallel calls on one connection", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf(`{"call":%d}`, i)
				got, err := call(ctx, []byte(want))
				if err != nil || string(got) != want {
					errs <- fmt.Errorf("call %d: %q, %v; want %q", i, got, err, want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	t.Run("messages over a stream's window each way", func(t *testing.T) {
		// 3 MiB: three times the mesh's stream window, and chunked by
		// the backend on the way back.
		want := bytes.Repeat([]byte("0123456789abcdef"), 3<<16)
		got, err := call(ctx, want)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("3 MiB echo: %d bytes, %v; want the %d sent", len(got), err, len(want))
		}
	})
	t.Run("a call the client gives up on", func(t *testing.T) {
		short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		defer stop()
		if _, err := call(short, []byte("slow")); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("call past its deadline: %v, want DeadlineExceeded", err)
		}
		// The answer that comes later goes nowhere, and the connection
		// serves on.
		time.Sleep(400 * time.Millisecond)
		if got, err := call(ctx, []byte("after")); err != nil || string(got) != "after" {
			t.Errorf("call after one given up: %q, %v", got, err)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		if _, err := call(ctx, []byte("refuse")); status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "upstream status 400") {
			t.Errorf("backend's 400: %v, want Unknown naming the status", err)
		}
		var got []byte
		body := []byte("x")
		if err := conn.Invoke(ctx, "/rolloutmesh.bench.BareProxy/Other", &body, &got, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Unimplemented {
			t.Errorf("unknown method: %v, want Unimplemented", err)
		}
		big := make([]byte, egMaxMessage+1)
		if _, err := call(ctx, big); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("message over the limit: %v, want ResourceExhausted", err)
		}
		if got, err := call(ctx, []byte("still")); err != nil || string(got) != "still" {
			t.Errorf("call after the refusals: %q, %v", got, err)
		}
	})
	host := strings.TrimPrefix(backend.URL, "http://")
	if _, ok := seen.Load(host + " application/json"); !ok {
		t.Errorf("the backend never saw Host %s with Content-Type application/json", host)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveEventGRPCProxy: %v", err)
	}
}

// TestEventGRPCProxyUpstreamDown wants a call whose upstream cannot be
// dialled failed Unavailable, not left waiting.
func TestEventGRPCProxyUpstreamDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done := serveAt(t, ctx, serveEventGRPCProxy, downURL(t))
	conn, err := runnerConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	body, got := []byte("{}"), []byte(nil)
	if err := conn.Invoke(call, bareGRPCMethod, &body, &got, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Unavailable {
		t.Errorf("call with the upstream down: %v, want Unavailable", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveEventGRPCProxy: %v", err)
	}
}

// TestEventGRPCProxyRefusesNonHTTP2 wants a client that does not open
// with HTTP/2's preface disconnected.
func TestEventGRPCProxyRefusesNonHTTP2(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done := serveAt(t, ctx, serveEventGRPCProxy, "http://127.0.0.1:1")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// The server's settings may come first; then the close.
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("after an HTTP/1.1 request: %v, want the connection closed", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveEventGRPCProxy: %v", err)
	}
}
