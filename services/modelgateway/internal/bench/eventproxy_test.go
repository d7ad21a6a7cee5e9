package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestEventProxyFraming drives the proxy over a raw socket against a
// backend that answers in chunks and says what it was sent: pipelined
// requests, a request written a byte at a time, the hop's Connection
// header, and the requests it must refuse.
func TestEventProxyFraming(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// Two flushes make net/http send chunks.
		fmt.Fprintf(w, "%s %s connection=%q ", r.Method, r.URL.Path, r.Header.Get("Connection"))
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "body=%s", body)
	}))
	defer backend.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := serveAt(t, ctx, serveEventProxy, backend.URL)
	addr := strings.TrimPrefix(url, "http://")

	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	read := func(br *bufio.Reader) (int, string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	req := func(path, body string, headers ...string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s", path, strings.Join(headers, ""), len(body), body)
	}

	t.Run("pipelined", func(t *testing.T) {
		c, br := dial()
		io.WriteString(c, req("/a", "one", "Connection: keep-alive\r\n")+req("/b", "")+req("/c", "three"))
		for _, want := range []string{`POST /a connection="" body=one`, `POST /b connection="" body=`, `POST /c connection="" body=three`} {
			if code, got := read(br); code != 200 || got != want {
				t.Errorf("got %d %q, want 200 %q", code, got, want)
			}
		}
	})
	t.Run("a byte at a time", func(t *testing.T) {
		c, br := dial()
		for _, b := range []byte(req("/slow", "0123456789")) {
			if _, err := c.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
		}
		if code, got := read(br); code != 200 || got != `POST /slow connection="" body=0123456789` {
			t.Errorf("got %d %q", code, got)
		}
	})
	for _, tt := range []struct {
		name, req string
		want      int
	}{
		{"chunked request", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501},
		{"two lengths", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nab", 400},
		{"bare LF", "GET / HTTP/1.1\nHost: x\r\n\r\n", 400},
		{"head over the bound", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", eventMaxHead) + "\r\n", 431},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, br := dial()
			io.WriteString(c, tt.req)
			if code, _ := read(br); code != tt.want {
				t.Errorf("status %d, want %d", code, tt.want)
			}
			// The connection is closed: what follows cannot be framed.
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("after the refusal: %v, want EOF", err)
			}
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveEventProxy: %v", err)
	}
}

// TestEventProxyUpstreamDown wants a client whose upstream cannot be
// dialled answered 502, not left waiting.
func TestEventProxyUpstreamDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := serveAt(t, ctx, serveEventProxy, downURL(t))
	// A raw socket: the answer may come before the request is read, and
	// net/http's client may report the write's error instead.
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveEventProxy: %v", err)
	}
}
