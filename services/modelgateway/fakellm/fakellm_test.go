package fakellm

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// TestBodyReadDeadline: a client that announces a body and never sends it
// is cut off, rather than holding a connection and a handler for ever.
func TestBodyReadDeadline(t *testing.T) {
	defer func(d time.Duration) { readTimeout = d }(readTimeout)
	readTimeout = 200 * time.Millisecond
	in, err := Start(context.Background(), "127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	conn, err := net.Dial("tcp", in.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: f\r\nContent-Length: 1000\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v, want it closed after the read deadline", time.Since(start))
	}
}
