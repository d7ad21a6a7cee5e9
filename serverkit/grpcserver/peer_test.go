package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tapListener keeps a copy of every byte its connections read: what
// clients sent to the server.
type tapListener struct {
	net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, l: l}, nil
}

func (l *tapListener) sent() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.got.Bytes())
}

type tapConn struct {
	net.Conn
	l *tapListener
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.got.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// pingsIn counts the PING frames (not acks) in a client's side of an
// HTTP/2 connection.
func pingsIn(t *testing.T, b []byte) int {
	t.Helper()
	if !bytes.HasPrefix(b, []byte(http2.ClientPreface)) {
		t.Fatalf("client bytes start %q, want the HTTP/2 preface", b[:min(len(b), 24)])
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(b[len(http2.ClientPreface):]))
	fr.SetMaxReadFrameSize(1 << 24)
	pings := 0
	for {
		f, err := fr.ReadFrame()
		// The server may stop reading inside the client's last frame.
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return pings
		}
		if err != nil {
			t.Fatalf("read client frames: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
}

// TestPeerDialOptionsSendNoPings makes calls spaced out the way a runner's
// are and counts the PINGs the server had to answer.
func TestPeerDialOptionsSendNoPings(t *testing.T) {
	tests := []struct {
		name      string
		opts      []grpc.DialOption
		wantPings bool
	}{
		// The reference: proves the tap sees the pings this is about.
		{name: "adaptive windows (gRPC's default)", wantPings: true},
		{name: "PeerDialOptions", opts: PeerDialOptions(), wantPings: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &tapListener{Listener: inner}
			s, conn, _, _ := serveEcho(t, ln, tt.opts...)
			for i := 0; i < 10; i++ {
				in := wrapperspb.String("hello")
				out := new(wrapperspb.StringValue)
				if err := conn.Invoke(context.Background(), "/test.Echo/Echo", in, out); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				// Let any ping and its ack cross before the next call.
				time.Sleep(5 * time.Millisecond)
			}
			conn.Close()
			s.GRPC.Stop()
			got := pingsIn(t, ln.sent())
			t.Logf("%d PINGs over 10 calls", got)
			if (got > 0) != tt.wantPings {
				t.Errorf("client sent %d PINGs over 10 calls; want pings: %v", got, tt.wantPings)
			}
		})
	}
}
