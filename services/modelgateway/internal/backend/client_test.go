package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer answers each request on a connection with answer, then closes
// the connection when closeAfter is set, without saying so in a header, as
// a backend dropping idle keep-alive connections does. hang makes it read
// the request and never answer.
type rawServer struct {
	ln         net.Listener
	closeAfter bool
	hang       bool
	conns      atomic.Int32
	closed     chan struct{} // a connection was closed by the client
}

func startRaw(t *testing.T, closeAfter, hang bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, closeAfter: closeAfter, hang: hang, closed: make(chan struct{}, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(c)
		}
	}()
	return s
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if s.hang {
			// Wait for the client to go away.
			var b [1]byte
			c.Read(b[:])
			s.closed <- struct{}{}
			return
		}
		body := `{"ok":true,"key":"` + req.Header.Get("X-Routing-Key") + `"}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if s.closeAfter {
			return
		}
	}
}

func newTestBackend(t *testing.T, url string) *Backend {
	t.Helper()
	b, err := New(Config{ID: "b", BaseURL: url, Model: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t *testing.T, a *Answer) string {
	t.Helper()
	defer a.Close()
	b, err := io.ReadAll(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSendReusesConnections(t *testing.T) {
	s := startRaw(t, false, false)
	b := newTestBackend(t, "http://"+s.ln.Addr().String())
	for i := range 5 {
		a, err := b.Send(context.Background(), "/v1/chat/completions", []byte(`{}`), fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		if a.StatusCode != 200 || a.ContentLength <= 0 || string(a.ContentType()) != "application/json" {
			t.Errorf("answer status %d length %d type %q", a.StatusCode, a.ContentLength, a.ContentType())
		}
		if got, want := readAll(t, a), fmt.Sprintf(`"key":"k%d"`, i); !strings.Contains(got, want) {
			t.Errorf("body %s, want the routing key %s echoed", got, want)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}
}

// TestSendSkipsConnectionsTheBackendClosed: a pooled connection the
// backend dropped must not fail the next request.
func TestSendSkipsConnectionsTheBackendClosed(t *testing.T) {
	s := startRaw(t, true, false)
	b := newTestBackend(t, "http://"+s.ln.Addr().String())
	for range 3 {
		a, err := b.Send(context.Background(), "/v1/chat/completions", []byte(`{}`), "")
		if err != nil {
			t.Fatalf("send after the backend closed the previous connection: %v", err)
		}
		readAll(t, a)
		time.Sleep(2 * reuseCheckAfter)
	}
}

func TestSendCancellationClosesTheConnection(t *testing.T) {
	s := startRaw(t, false, true)
	b := newTestBackend(t, "http://"+s.ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		a, err := b.Send(ctx, "/v1/chat/completions", []byte(`{}`), "")
		if err == nil {
			a.Close()
		}
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	select {
	case <-s.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the backend did not see the connection close")
	}
}

// TestAnswerSeesACut wants a body the backend broke off read as an error,
// and one it ended read whole, whether or not it closed the connection
// after: fasthttp alone reads a chunked body cut between two chunks as
// ended.
func TestAnswerSeesACut(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	chunked := head + "Transfer-Encoding: chunked\r\n\r\n"
	for _, tc := range []struct {
		name, answer, want string
		wantErr            error
	}{
		{"chunked, cut between chunks", chunked + "6\r\ndata:1\r\n", "data:1", io.ErrUnexpectedEOF},
		{"chunked, cut inside a chunk", chunked + "6\r\ndata:1\r\n6\r\nda", "data:1da", io.ErrUnexpectedEOF},
		{"chunked, cut after a size", chunked + "6\r\ndata:1\r\n6\r\n", "data:1", io.ErrUnexpectedEOF},
		{"chunked, ended, closed", chunked + "6\r\ndata:1\r\n0\r\n\r\n", "data:1", nil},
		{"chunked with a trailer, ended, closed", chunked + "6\r\ndata:1\r\n0\r\nX-End: 1\r\n\r\n", "data:1", nil},
		{"no length, closed", head + "Connection: close\r\n\r\ndata:1", "data:1", nil},
		{"a length, closed", head + "Content-Length: 6\r\n\r\ndata:1", "data:1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					io.WriteString(c, tc.answer)
				}
			}()
			b := newTestBackend(t, "http://"+ln.Addr().String())
			a, err := b.Send(context.Background(), "/v1/chat/completions", []byte(`{}`), "")
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			got, err := io.ReadAll(a)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
