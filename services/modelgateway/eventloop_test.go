package modelgateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// The HTTP front's tests run against both engines (make test sets
// MODELGATEWAY_TEST_HTTP_ENGINE); these are about what only the event
// loop does itself: HTTP/1.1 framing on both sides and its backend
// connections.

// wireBackend is a chat backend that records what reached it: the
// connections chat requests came on, and each request's routing key.
type wireBackend struct {
	srv *httptest.Server
	mu  sync.Mutex
	// conns are the remote addresses chat requests came from.
	conns map[string]int
	keys  []string
	// sizes are the chat bodies' lengths.
	sizes []int
	// answer writes the answer of the n-th chat request (from 1).
	answer func(n int, w http.ResponseWriter)
	n      int
}

func startWireBackend(t *testing.T, answer func(n int, w http.ResponseWriter)) *wireBackend {
	t.Helper()
	b := &wireBackend{conns: map[string]int{}, answer: answer}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
			return
		}
		size, _ := io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.sizes = append(b.sizes, int(size))
		b.conns[r.RemoteAddr]++
		b.keys = append(b.keys, r.Header.Get("X-Routing-Key")+"|"+strings.Join(r.Header.Values("X-Injected"), ","))
		b.n++
		n := b.n
		b.mu.Unlock()
		b.answer(n, w)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

const wireAnswer = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

func startLoopGateway(t *testing.T, b *wireBackend, limits Limits) *harness {
	t.Helper()
	return startEngineGateway(t, b, limits, EngineEventLoop)
}

func startEngineGateway(t *testing.T, b *wireBackend, limits Limits, engine string) *harness {
	t.Helper()
	return startGateway(t, &FileConfig{
		Backends:  []BackendConfig{{ID: "w", BaseURL: b.srv.URL, Model: "fake-model"}},
		Limits:    limits,
		HTTPFront: HTTPFrontConfig{Engine: engine},
	}, nil)
}

// rawConn is a client connection written and read by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, h *harness) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.http, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) write(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) read() (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp, string(b)
}

func chatRequest(body string, headers ...string) string {
	return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s",
		strings.Join(headers, ""), len(body), body)
}

const wireChat = `{"model":"fake-model","messages":[{"role":"user","content":"x"}]}`

// chunkedOnEven answers wireAnswer, in chunks to every second request
// (net/http sends flushed halves so) and with its length to the others.
func chunkedOnEven(n int, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	if n%2 == 0 {
		io.WriteString(w, wireAnswer[:20])
		w.(http.Flusher).Flush()
		io.WriteString(w, wireAnswer[20:])
		return
	}
	io.WriteString(w, wireAnswer)
}

// TestEventLoopKeepsBackendConnection wants requests answered in order,
// pipelined ones too, over one kept-alive backend connection, with
// answers the backend sent in chunks given a length.
func TestEventLoopKeepsBackendConnection(t *testing.T) {
	b := startWireBackend(t, chunkedOnEven)
	h := startLoopGateway(t, b, Limits{})
	c := dialRaw(t, h)
	for round := 0; round < 3; round++ {
		c.write(chatRequest(wireChat))
		resp, body := c.read()
		if resp.StatusCode != 200 || body != wireAnswer || resp.ContentLength != int64(len(wireAnswer)) || resp.Header.Get("X-Backend") != "w" {
			t.Fatalf("round %d: %d %q (length %d, backend %q)", round, resp.StatusCode, body, resp.ContentLength, resp.Header.Get("X-Backend"))
		}
	}
	// Three at once, the second with the client's Connection: close,
	// which ends the connection after its answer.
	c.write(chatRequest(wireChat) + chatRequest(wireChat, "Connection: close\r\n") + chatRequest(wireChat))
	for i := 0; i < 2; i++ {
		if resp, body := c.read(); resp.StatusCode != 200 || body != wireAnswer {
			t.Fatalf("pipelined %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if _, err := http.ReadResponse(c.br, nil); err == nil {
		t.Error("an answer after the request with Connection: close")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n != 5 || len(b.conns) != 1 {
		t.Errorf("backend got %d requests on %d connections (%v), want 5 on 1", b.n, len(b.conns), b.conns)
	}
}

// TestEventLoopRequestFraming wants what the event loop frames itself
// read as fasthttp reads it: a body in chunks, a client that waits for
// 100 Continue, a request cut into bytes; and the refusals.
func TestEventLoopRequestFraming(t *testing.T) {
	b := startWireBackend(t, func(_ int, w http.ResponseWriter) { io.WriteString(w, wireAnswer) })
	h := startLoopGateway(t, b, Limits{MaxRequestBytes: 4 << 10})

	c := dialRaw(t, h)
	chunked := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\n\r\n", 10, wireChat[:10], len(wireChat)-10, wireChat[10:])
	c.write(chunked)
	if resp, body := c.read(); resp.StatusCode != 200 || body != wireAnswer {
		t.Errorf("chunked body: %d %q", resp.StatusCode, body)
	}
	for i := 0; i < len(chunked); i++ {
		c.write(chunked[i : i+1])
	}
	if resp, body := c.read(); resp.StatusCode != 200 || body != wireAnswer {
		t.Errorf("chunked body a byte at a time: %d %q", resp.StatusCode, body)
	}

	// A body of megabytes in small chunks, written in pieces: it is
	// moved out of gnet's buffer as it comes, and must arrive whole.
	big := `{"model":"fake-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 3<<20) + `"}]}`
	hBig := startLoopGateway(t, b, Limits{})
	c = dialRaw(t, hBig)
	var chunks strings.Builder
	for rest := big; rest != ""; {
		n := min(len(rest), 1000)
		fmt.Fprintf(&chunks, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	chunks.WriteString("0\r\n\r\n")
	all := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks.String()
	for len(all) > 0 {
		n := min(len(all), 100<<10)
		c.write(all[:n])
		all = all[n:]
	}
	if resp, body := c.read(); resp.StatusCode != 200 || body != wireAnswer {
		t.Errorf("3 MiB body in 1,000-byte chunks: %d %q", resp.StatusCode, body)
	}
	b.mu.Lock()
	if got := b.sizes[len(b.sizes)-1]; got != len(big) {
		t.Errorf("backend got a body of %d bytes, want %d", got, len(big))
	}
	b.mu.Unlock()

	c = dialRaw(t, h)
	req := chatRequest(wireChat, "Expect: 100-continue\r\n")
	head := req[:strings.Index(req, "\r\n\r\n")+4]
	c.write(head)
	if resp, _ := c.read(); resp.StatusCode != 100 {
		t.Fatalf("Expect: 100-continue answered %d first", resp.StatusCode)
	}
	c.write(req[len(head):])
	if resp, body := c.read(); resp.StatusCode != 200 || body != wireAnswer {
		t.Errorf("after 100 Continue: %d %q", resp.StatusCode, body)
	}

	for _, tt := range []struct {
		name, req string
		want      int
	}{
		{"head over 16 KiB", "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 17<<10) + "\r\n\r\n", 431},
		{"body over the limit", chatRequest(strings.Repeat(" ", 5<<10) + wireChat), 413},
		{"chunked body over the limit", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			strings.Repeat("400\r\n"+strings.Repeat(" ", 1024)+"\r\n", 5) + "0\r\n\r\n", 413},
		{"bare LF", "GET /v1/models HTTP/1.1\nHost: x\n\n\r\n\r\n", 400},
		{"two lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"bad chunk size", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
	} {
		c := dialRaw(t, h)
		c.write(tt.req)
		resp, _ := c.read()
		if resp.StatusCode != tt.want || !resp.Close {
			t.Errorf("%s: %d (close %v), want %d and the connection's end", tt.name, resp.StatusCode, resp.Close, tt.want)
		}
	}
}

// TestEventLoopRoutingKeyHeaderSafe wants a user member with line breaks,
// which becomes the routing key, unable to add a header of its own.
func TestEventLoopRoutingKeyHeaderSafe(t *testing.T) {
	b := startWireBackend(t, func(_ int, w http.ResponseWriter) { io.WriteString(w, wireAnswer) })
	h := startLoopGateway(t, b, Limits{})
	c := dialRaw(t, h)
	c.write(chatRequest(`{"model":"fake-model","user":"u1\r\nX-Injected: yes","messages":[{"role":"user","content":"x"}]}`))
	if resp, _ := c.read(); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.keys) != 1 || b.keys[0] != "u1  X-Injected: yes|" {
		t.Errorf("backend saw routing key and injected header %q", b.keys)
	}
}

// TestEventLoopBackendClosesConnection wants a backend that closes its
// connection after each answer, drops one midway or ends one with its
// connection (no length) cost no request: the next is sent on a new
// connection, and the answer the loop cannot take is tried again.
func TestEventLoopBackendClosesConnection(t *testing.T) {
	b := startWireBackend(t, func(n int, w http.ResponseWriter) {
		if n == 3 {
			// Cut short: the connection is taken and closed.
			w.Header().Set("Content-Length", "500")
			w.WriteHeader(200)
			io.WriteString(w, wireAnswer[:10])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if n == 5 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"+wireAnswer)
			conn.Close()
			return
		}
		w.Header().Set("Connection", "close")
		io.WriteString(w, wireAnswer)
	})
	h := startLoopGateway(t, b, Limits{})
	c := dialRaw(t, h)
	for i := 0; i < 5; i++ {
		c.write(chatRequest(wireChat))
		resp, body := c.read()
		if resp.StatusCode != 200 || body != wireAnswer {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if want := map[bool]string{true: "2", false: "1"}[i == 2 || i == 3]; resp.Header.Get("X-Gateway-Attempts") != want {
			t.Errorf("request %d: %s attempts, want %s", i, resp.Header.Get("X-Gateway-Attempts"), want)
		}
	}
}

// TestDrainAnswersInFlight wants a drain to let the request in flight be
// answered, to wait for it, and to take no new request meanwhile.
func TestDrainAnswersInFlight(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: 400 * time.Millisecond})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f)}, nil)
	answered := make(chan int, 1)
	go func() {
		resp, err := postJSON(t, ctxT(t, 10*time.Second), h.http+"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x"}}}, nil)
		if err != nil {
			answered <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	waitFor(t, "request in flight", func() bool { return f.Stats().InFlight == 1 })
	start := time.Now()
	if err := h.svc.Drain(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Drain returned after %v, before the request in flight was answered", d)
	}
	if code := <-answered; code != http.StatusOK {
		t.Errorf("request in flight during the drain answered %d, want 200", code)
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(h.http, "http://"), time.Second)
	if err == nil {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, chatRequest(wireChat))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			t.Errorf("a request after the drain answered %d", resp.StatusCode)
		}
	}
}

// TestEventLoopRelaysStreams wants streamed answers passed on as they
// come, each ended with the version trailers: one the backend sends in
// chunks, one with a length, and one it breaks off midway, which the
// client gets without [DONE] and with the trailers all the same; and a
// 204, which has no body to wait for. Both engines must do the same.
func TestEventLoopRelaysStreams(t *testing.T) {
	for _, engine := range []string{EngineEventLoop, EngineGoroutines} {
		t.Run(engine, func(t *testing.T) { testRelaysStreams(t, engine) })
	}
}

func testRelaysStreams(t *testing.T, engine string) {
	const first, last = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "data: [DONE]\n\n"
	b := startWireBackend(t, func(n int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1:
			io.WriteString(w, first)
			w.(http.Flusher).Flush()
			io.WriteString(w, last)
		case 2:
			w.Header().Set("Content-Length", fmt.Sprint(len(first+last)))
			io.WriteString(w, first+last)
		case 3:
			io.WriteString(w, first)
			w.(http.Flusher).Flush()
			conn, buf, _ := w.(http.Hijacker).Hijack()
			buf.Flush()
			conn.Close()
		case 4:
			// No body, and no length or chunks to say so, on a
			// connection kept alive: the status alone ends it.
			w.WriteHeader(http.StatusNoContent)
		}
	})
	h := startEngineGateway(t, b, Limits{}, engine)
	stream := `{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"x"}]}`
	for i, want := range []string{first + last, first + last, first} {
		c := dialRaw(t, h)
		c.write(chatRequest(stream))
		resp, body := c.read()
		if resp.StatusCode != 200 || body != want || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("stream %d: %d %q (%s), want 200 %q", i+1, resp.StatusCode, body, resp.Header.Get("Content-Type"), want)
		}
		if resp.Trailer.Get("X-Model-Version-End") != "0" || resp.Trailer.Get("X-Version-Changed") != "false" {
			t.Errorf("stream %d: trailers %v", i+1, resp.Trailer)
		}
	}
	c := dialRaw(t, h)
	c.write(chatRequest(stream))
	if resp, body := c.read(); resp.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("stream answered 204: %d %q, want 204 and no body", resp.StatusCode, body)
	}
	// The stream broken off between two chunks is the backend's failure
	// on both engines (fasthttp alone reads it as ended).
	if got := listBackend(t, h, "w"); got.GetFailures() != 1 || got.GetInFlight() != 0 {
		t.Errorf("backend after two whole streams and one broken off: %d failures, %d in flight; want 1, 0", got.GetFailures(), got.GetInFlight())
	}
}

// TestEventLoopRefusesTLS wants engine event_loop with TLS refused at
// start, and TLS without an engine served by goroutines.
func TestEventLoopRefusesTLS(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	_, err := New(context.Background(), Config{File: &FileConfig{Backends: backends("vllm", f), HTTPFront: HTTPFrontConfig{Engine: EngineEventLoop}},
		OpenAIAddr: "127.0.0.1:0", TLS: tlsCfg}, daemontest.Env(t))
	if err == nil || !strings.Contains(err.Error(), "http_front.engine") {
		t.Errorf("event_loop with TLS: %v, want an error naming http_front.engine", err)
	}
}

// TestEventLoopBackendNotHTTP wants an answer that is not HTTP (a request
// line where the status line belongs, which the framer reads as a head)
// to fail the attempt at once on both fronts' loops, not to hold the
// request until its deadline.
func TestEventLoopBackendNotHTTP(t *testing.T) {
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	b := startWireBackend(t, func(_ int, w http.ResponseWriter) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		io.WriteString(conn, "SSH-2.0-OpenSSH_9.2\r\n\r\n")
		mu.Lock()
		held = append(held, conn) // kept open: only the framing can end it
		mu.Unlock()
	})
	fc := &FileConfig{
		Backends:  []BackendConfig{{ID: "w", BaseURL: b.srv.URL, Model: "fake-model"}},
		Limits:    Limits{RequestTimeout: 20 * time.Second},
		HTTPFront: HTTPFrontConfig{Engine: EngineEventLoop},
	}
	fc.GRPCFront.Engine = EngineEventLoop
	h := startGateway(t, fc, nil)
	waitFor(t, "the loops to serve the gRPC listener", func() bool { return h.svc.grpcLoop.Load() != nil })

	c := dialRaw(t, h)
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	c.write(chatRequest(wireChat))
	if resp, body := c.read(); resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("HTTP front: %d %q, want 502 or 503 (504: it waited for the deadline)", resp.StatusCode, body)
	}
	noDeadline, stop := context.WithCancel(context.Background())
	defer time.AfterFunc(30*time.Second, stop).Stop()
	if _, err := h.cli.Chat(noDeadline, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}}); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC front: %v, want Unavailable (DeadlineExceeded: it waited for the deadline)", err)
	}
}
