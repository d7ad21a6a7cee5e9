package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopboot"
)

// The event-loop proxy asks whether the HTTP floor is Go's or that of
// Go's goroutine per connection: nginx's job done the way nginx does it,
// on one event loop per CPU (gnet: a goroutine each, blocked in
// epoll_wait), with no goroutine per connection, so no hand-off from the
// goroutine that reads a request to one that writes it upstream and back.
// Each client connection is paired with a kept-alive upstream connection
// registered on the same loop, so a request and its answer never leave
// the loop that read them. It frames HTTP/1.1 as a proxy must: a
// request's head is read whole (its Connection header, which is for this
// hop, dropped) and its body counted by Content-Length; a response's head
// is read and its body counted by Content-Length or its chunks. Request
// bodies in chunks are refused (501): every client here sends a length.

// eventMaxHead bounds a request's or a response's head.
const eventMaxHead = 64 << 10

// eventPair is the state two paired connections share; only their loop
// touches it.
type eventPair struct {
	down, up gnet.Conn
	downGone bool     // the client left before its upstream half opened
	reqBody  int64    // bytes of the current request's body still to forward
	resp     h1.Frame // where the upstream's byte stream stands
	pieces   [][]byte // a request head, cut around its Connection header
}

type eventProxy struct {
	gnet.BuiltinEventEngine
	upstream net.Addr
	out      io.Writer
	engine   chan gnet.Engine
}

func (p *eventProxy) OnBoot(eng gnet.Engine) gnet.Action {
	port, err := listenPort(eng)
	if err != nil {
		fmt.Fprintf(os.Stderr, "event proxy: %v\n", err)
		return gnet.Shutdown
	}
	p.engine <- eng
	fmt.Fprintf(p.out, "ADDR http://127.0.0.1:%d\n", port)
	return gnet.None
}

// listenPort is the port of eng's listener.
func listenPort(eng gnet.Engine) (int, error) {
	addr, err := loopboot.Addr(eng)
	if err != nil {
		return 0, err
	}
	return addr.(*net.TCPAddr).Port, nil
}

func (p *eventProxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if pair, ok := c.Context().(*eventPair); ok {
		// The upstream half, registered below: requests the client sent
		// while it was dialled wait in the client's buffer.
		pair.up = c
		if pair.downGone {
			return nil, gnet.Close
		}
		if pair.down.InboundBuffered() > 0 {
			if p.request(pair) != gnet.None {
				pair.down.Close()
				return nil, gnet.Close
			}
		}
		return nil, gnet.None
	}
	pair := &eventPair{down: c, resp: h1.Frame{MaxHead: eventMaxHead}}
	c.SetContext(pair)
	registered, err := c.EventLoop().Register(gnet.NewContext(context.Background(), pair), p.upstream)
	if err != nil {
		return nil, gnet.Close
	}
	// A goroutine of the connection's, but only until its upstream is
	// dialled, off every request's path.
	go func() {
		// Only a dial that failed is news: the client then gets nginx's
		// answer to an upstream it cannot reach instead of waiting. The
		// write must go through the loop (AsyncWrite), which then closes.
		if res := <-registered; res.Err != nil {
			c.AsyncWrite([]byte(badGateway), func(c gnet.Conn, _ error) error { return c.Close() })
		}
	}()
	return nil, gnet.None
}

const badGateway = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

func (p *eventProxy) OnClose(c gnet.Conn, _ error) gnet.Action {
	pair, _ := c.Context().(*eventPair)
	if pair == nil {
		return gnet.None
	}
	// Either half gone ends the other: a request in flight has no answer,
	// an answer no one to take it.
	if c == pair.down {
		pair.downGone = true
		if pair.up != nil {
			pair.up.Close()
		}
	} else if c == pair.up {
		pair.down.Close()
	}
	return gnet.None
}

func (p *eventProxy) OnTraffic(c gnet.Conn) gnet.Action {
	pair := c.Context().(*eventPair)
	if c == pair.down {
		if pair.up == nil {
			return gnet.None // OnOpen of the upstream half reads it
		}
		return p.request(pair)
	}
	return p.response(pair)
}

// request forwards what the client sent: whole heads, less their
// Connection header, and bodies as they come.
func (p *eventProxy) request(pair *eventPair) gnet.Action {
	c := pair.down
	buf, _ := c.Peek(-1)
	used := 0
	pair.pieces = pair.pieces[:0]
	for used < len(buf) {
		if pair.reqBody > 0 {
			n := int(min(int64(len(buf)-used), pair.reqBody))
			pair.pieces = append(pair.pieces, buf[used:used+n])
			pair.reqBody -= int64(n)
			used += n
			continue
		}
		end := bytes.Index(buf[used:], []byte("\r\n\r\n"))
		if end < 0 {
			if len(buf)-used > eventMaxHead {
				return p.refuse(pair, "431 Request Header Fields Too Large")
			}
			break
		}
		head := buf[used : used+end+4]
		h, ok := h1.ScanHead(head)
		if !ok {
			return p.refuse(pair, "400 Bad Request")
		}
		if h.Chunked {
			return p.refuse(pair, "501 Not Implemented")
		}
		if h.Conn.End > h.Conn.Start {
			pair.pieces = append(pair.pieces, head[:h.Conn.Start], head[h.Conn.End:])
		} else {
			pair.pieces = append(pair.pieces, head)
		}
		pair.reqBody = h.Length
		used += len(head)
	}
	if len(pair.pieces) > 0 {
		if _, err := pair.up.Writev(pair.pieces); err != nil {
			return gnet.Close
		}
	}
	if used > 0 {
		// Not Discard(0): gnet reads a count of 0 or less as all of it.
		c.Discard(used)
	}
	return gnet.None
}

// refuse answers the client and closes both halves: what follows a
// request the proxy cannot frame cannot be framed either.
func (p *eventProxy) refuse(pair *eventPair, status string) gnet.Action {
	pair.down.Write([]byte("HTTP/1.1 " + status + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	return gnet.Close
}

// response forwards what the upstream answered once it has framed it.
func (p *eventProxy) response(pair *eventPair) gnet.Action {
	c := pair.up
	buf, _ := c.Peek(-1)
	used := 0
	for used < len(buf) {
		n, _, err := pair.resp.Consume(buf[used:])
		if err != nil {
			return gnet.Close
		}
		if n == 0 {
			break
		}
		used += n
	}
	if used > 0 {
		if _, err := pair.down.Write(buf[:used]); err != nil {
			return gnet.Close
		}
		c.Discard(used)
	}
	return gnet.None
}

// serveEventProxy proxies every connection to backend (a base URL) until
// ctx ends, printing "ADDR <url>" on out once it listens.
func serveEventProxy(ctx context.Context, backend string, out io.Writer) error {
	up, err := net.ResolveTCPAddr("tcp", hostPort(backend))
	if err != nil {
		return err
	}
	p := &eventProxy{upstream: up, out: out, engine: make(chan gnet.Engine, 1)}
	return runLoops(ctx, p, p.engine)
}

// runLoops runs h on one gnet event loop per CPU, listening on a port of
// 127.0.0.1, until ctx ends; h hands its engine over on engine at boot.
func runLoops(ctx context.Context, h gnet.EventHandler, engine <-chan gnet.Engine) error {
	// gnet logs to standard output, which the parent reads for ADDR.
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel)).Sugar()
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(h, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay), gnet.WithLogger(logger))
	}()
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	// The engine is handed over at boot; a Run that failed before it
	// never hands one over.
	select {
	case eng := <-engine:
		return eng.Stop(context.Background())
	case err := <-done:
		return err
	}
}
