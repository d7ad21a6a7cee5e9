package chrome

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Opcodes of RFC 6455 section 5.2, for the frames the test server writes.
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opPing         = 0x9
	opPong         = 0xa
)

// wsServer accepts one websocket connection on loopback, runs the
// handshake, and hands the raw connection to serve, which writes frames
// as a browser would (or would not). It returns the ws:// address.
func wsServer(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Errorf("handshake request: %v", err)
			return
		}
		if req.Header.Get("Origin") != "" {
			t.Errorf("the handshake sent Origin %q, which Chrome refuses", req.Header.Get("Origin"))
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		serve(conn, br)
	}()
	return "ws://" + l.Addr().String() + "/devtools/browser/x"
}

// frame is a server frame: unmasked, with fin and opcode, declaring
// length n (the payload may be shorter, as a lying peer's is).
func frame(fin bool, op byte, n uint64, payload []byte) []byte {
	b := op
	if fin {
		b |= 0x80
	}
	out := []byte{b}
	switch {
	case n <= 125:
		out = append(out, byte(n))
	case n <= 0xffff:
		out = append(out, 126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 127)
		out = binary.BigEndian.AppendUint64(out, n)
	}
	return append(out, payload...)
}

// readClientFrame reads one masked client frame.
func readClientFrame(br *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 == 0 {
		return 0, nil, errors.New("client frame not masked")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	var key [4]byte
	if _, err := io.ReadFull(br, key[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		return 0, nil, err
	}
	for i := range payload {
		payload[i] ^= key[i%4]
	}
	return h[0] & 0x0f, payload, nil
}

func dialTest(t *testing.T, addr string, max int64) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dialWS(ctx, addr, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWSMessages: messages within the bound arrive whole, fragmented or
// not, with pings answered on the way.
func TestWSMessages(t *testing.T) {
	pong := make(chan string, 1)
	addr := wsServer(t, func(conn net.Conn, br *bufio.Reader) {
		conn.Write(frame(true, opText, 2, []byte("{}")))
		conn.Write(frame(true, opPing, 3, []byte("abc")))
		conn.Write(frame(false, opText, 5, []byte(`{"id"`)))
		conn.Write(frame(true, opPing, 0, nil))
		conn.Write(frame(true, opContinuation, 3, []byte(`:1}`)))
		big := `{"x":"` + strings.Repeat("y", 70_000) + `"}`
		conn.Write(frame(true, opText, uint64(len(big)), []byte(big)))
		op, p, err := readClientFrame(br)
		if err != nil || op != opPong {
			pong <- fmt.Sprintf("op %#x, %v", op, err)
			return
		}
		pong <- string(p)
		io.Copy(io.Discard, br)
	})
	c := dialTest(t, addr, 1<<20)
	for _, want := range []string{"{}", `{"id":1}`} {
		got, err := c.readMessage()
		if err != nil || string(got) != want {
			t.Fatalf("readMessage = %q, %v; want %q", got, err, want)
		}
	}
	if got, err := c.readMessage(); err != nil || len(got) != 70_008 {
		t.Fatalf("readMessage of a 70 KB message = %d bytes, %v", len(got), err)
	}
	if p := <-pong; p != "abc" {
		t.Errorf("the ping was answered with %q, want a pong carrying abc", p)
	}
}

// TestWSBounds: what a hostile DevTools endpoint sends is refused before
// it is held: a declared length past the bound (with no bytes behind it),
// fragments adding up past it, endless empty fragments, and frames that
// break the protocol.
func TestWSBounds(t *testing.T) {
	tests := []struct {
		name string
		send func(conn net.Conn)
		want string
	}{
		{"a length of 2^40 declared", func(conn net.Conn) {
			conn.Write(frame(true, opText, 1<<40, nil))
		}, "over the 1048576-byte bound"},
		{"fragments over the bound", func(conn net.Conn) {
			chunk := []byte(strings.Repeat("x", 400_000))
			conn.Write(frame(false, opText, uint64(len(chunk)), chunk))
			conn.Write(frame(false, opContinuation, uint64(len(chunk)), chunk))
			conn.Write(frame(true, opContinuation, uint64(len(chunk)), chunk))
		}, "over the 1048576-byte bound"},
		{"a masked frame", func(conn net.Conn) {
			conn.Write([]byte{0x81, 0x82, 1, 2, 3, 4, 'a', 'b'})
		}, "bad MASK"},
		{"a long ping", func(conn net.Conn) {
			conn.Write(frame(true, opPing, 200, make([]byte, 200)))
		}, "len > 125 for control"},
		{"a binary message", func(conn net.Conn) {
			conn.Write(frame(true, opBinary, 1, []byte{0}))
		}, "protocol error"},
		{"a stray continuation", func(conn net.Conn) {
			conn.Write(frame(true, opContinuation, 1, []byte{'x'}))
		}, "continuation after FIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan struct{})
			addr := wsServer(t, func(conn net.Conn, br *bufio.Reader) {
				defer close(closed)
				tt.send(conn)
				// The client closes the connection after it refused.
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				io.Copy(io.Discard, br)
			})
			c := dialTest(t, addr, 1<<20)
			start := time.Now()
			_, err := c.readMessage()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("readMessage = %v, want an error with %q", err, tt.want)
			}
			if c.dropped() == nil {
				t.Errorf("the connection does not say why it was dropped")
			}
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				t.Error("the connection stayed open after the refusal")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the refusal took %s", d)
			}
		})
	}
}

// TestWSHandshakeRefusals: an endpoint that does not upgrade, or answers
// the wrong accept key, or never stops sending headers, fails the dial.
func TestWSHandshakeRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, answer string
	}{
		{"not 101", "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"},
		{"wrong accept", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n"},
		{"endless headers", "HTTP/1.1 101 Switching Protocols\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 100)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				http.ReadRequest(bufio.NewReader(conn))
				io.WriteString(conn, tt.answer)
				time.Sleep(time.Second)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c, err := dialWS(ctx, "ws://"+l.Addr().String()+"/devtools/browser/x", 1<<20); err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
		})
	}
}
