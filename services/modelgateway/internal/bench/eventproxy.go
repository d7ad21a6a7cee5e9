package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
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

const (
	// eventMaxHead bounds a request's or a response's head.
	eventMaxHead = 64 << 10
	// eventMaxChunkLine bounds a chunk's size line, and a trailer line.
	eventMaxChunkLine = 4 << 10
)

// errFraming is an upstream answer the proxy cannot frame.
var errFraming = errors.New("event proxy: response not framed as HTTP/1.1")

// eventPair is the state two paired connections share; only their loop
// touches it.
type eventPair struct {
	down, up gnet.Conn
	downGone bool          // the client left before its upstream half opened
	reqBody  int64         // bytes of the current request's body still to forward
	resp     responseFrame // where the upstream's byte stream stands
	pieces   [][]byte      // a request head, cut around its Connection header
}

type eventProxy struct {
	gnet.BuiltinEventEngine
	upstream net.Addr
	out      io.Writer
	engine   chan gnet.Engine
}

func (p *eventProxy) OnBoot(eng gnet.Engine) gnet.Action {
	fd, err := eng.Dup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "event proxy: listener: %v\n", err)
		return gnet.Shutdown
	}
	sa, err := unix.Getsockname(fd)
	unix.Close(fd)
	in4, ok := sa.(*unix.SockaddrInet4)
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "event proxy: listener address: %v %T\n", err, sa)
		return gnet.Shutdown
	}
	p.engine <- eng
	fmt.Fprintf(p.out, "ADDR http://127.0.0.1:%d\n", in4.Port)
	return gnet.None
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
	pair := &eventPair{down: c}
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
		length, chunked, conn, ok := scanHead(head)
		if !ok {
			return p.refuse(pair, "400 Bad Request")
		}
		if chunked {
			return p.refuse(pair, "501 Not Implemented")
		}
		if conn.end > conn.start {
			pair.pieces = append(pair.pieces, head[:conn.start], head[conn.end:])
		} else {
			pair.pieces = append(pair.pieces, head)
		}
		pair.reqBody = length
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
	used, err := pair.resp.consume(buf)
	if err != nil {
		return gnet.Close
	}
	if used > 0 {
		if _, err := pair.down.Write(buf[:used]); err != nil {
			return gnet.Close
		}
		c.Discard(used)
	}
	return gnet.None
}

// span is a part of a head: [start, end).
type span struct{ start, end int }

// scanHead reads what framing needs from a head that ends in CRLF CRLF:
// its body's length, whether the body comes in chunks, and where its
// Connection header line is (to drop it). ok is false for a head that is
// not HTTP/1.1's: a bare LF, a line without a colon, a length given twice
// or not a number.
func scanHead(head []byte) (length int64, chunked bool, conn span, ok bool) {
	line := bytes.IndexByte(head, '\n')
	if line < 1 || head[line-1] != '\r' {
		return 0, false, span{}, false
	}
	seenLength := false
	for i := line + 1; i < len(head)-2; {
		n := bytes.IndexByte(head[i:], '\n')
		if n < 1 || head[i+n-1] != '\r' {
			return 0, false, span{}, false
		}
		field := head[i : i+n-1]
		colon := bytes.IndexByte(field, ':')
		if colon < 1 {
			return 0, false, span{}, false
		}
		name, value := field[:colon], bytes.TrimSpace(field[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, err := strconv.ParseInt(string(value), 10, 63)
			if seenLength || err != nil || len(value) == 0 || value[0] < '0' || value[0] > '9' {
				return 0, false, span{}, false
			}
			seenLength, length = true, v
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			conn = span{i, i + n + 1}
		}
		i += n + 1
	}
	if chunked && seenLength {
		return 0, false, span{}, false
	}
	return length, chunked, conn, true
}

// responseFrame follows an upstream's byte stream answer by answer, so
// that the proxy knows where each ends.
type responseFrame struct {
	state  frameState
	remain int64 // body or chunk bytes still to come
}

type frameState int

const (
	frameHead      frameState = iota // reading a head
	frameBody                        // remain bytes of a body with a length
	frameChunkSize                   // reading a chunk's size line
	frameChunkData                   // remain bytes of a chunk
	frameChunkEnd                    // the CRLF after a chunk, remain bytes of it to come
	frameTrailer                     // reading trailer lines to the empty one
)

// consume frames as much of buf as has arrived whole enough, returning
// how many bytes it framed; the rest waits for more.
func (f *responseFrame) consume(buf []byte) (int, error) {
	used := 0
	for used < len(buf) {
		rest := buf[used:]
		switch f.state {
		case frameHead:
			end := bytes.Index(rest, []byte("\r\n\r\n"))
			if end < 0 {
				if len(rest) > eventMaxHead {
					return used, errFraming
				}
				return used, nil
			}
			length, chunked, _, ok := scanHead(rest[:end+4])
			if !ok {
				return used, errFraming
			}
			used += end + 4
			switch {
			case chunked:
				f.state = frameChunkSize
			case length > 0:
				f.state, f.remain = frameBody, length
			}
		case frameBody:
			n := min(int64(len(rest)), f.remain)
			used += int(n)
			if f.remain -= n; f.remain == 0 {
				f.state = frameHead
			}
		case frameChunkSize, frameTrailer:
			end := bytes.Index(rest, []byte("\r\n"))
			if end < 0 {
				if len(rest) > eventMaxChunkLine {
					return used, errFraming
				}
				return used, nil
			}
			line := rest[:end]
			used += end + 2
			if f.state == frameTrailer {
				if end == 0 {
					f.state = frameHead
				}
				continue
			}
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i]
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 63)
			if err != nil || size < 0 {
				return used, errFraming
			}
			if size == 0 {
				f.state = frameTrailer
			} else {
				f.state, f.remain = frameChunkData, size
			}
		case frameChunkData:
			n := min(int64(len(rest)), f.remain)
			used += int(n)
			if f.remain -= n; f.remain == 0 {
				f.state, f.remain = frameChunkEnd, 2
			}
		case frameChunkEnd:
			if rest[0] != "\r\n"[2-f.remain] {
				return used, errFraming
			}
			used++
			if f.remain--; f.remain == 0 {
				f.state = frameChunkSize
			}
		}
	}
	return used, nil
}

// serveEventProxy proxies every connection to backend (a base URL) until
// ctx ends, printing "ADDR <url>" on out once it listens.
func serveEventProxy(ctx context.Context, backend string, out io.Writer) error {
	up, err := net.ResolveTCPAddr("tcp", hostPort(backend))
	if err != nil {
		return err
	}
	p := &eventProxy{upstream: up, out: out, engine: make(chan gnet.Engine, 1)}
	// gnet logs to standard output, which the parent reads for ADDR.
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel)).Sugar()
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(p, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay), gnet.WithLogger(logger))
	}()
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	// The engine is handed over at boot; a Run that failed before it
	// never hands one over.
	select {
	case eng := <-p.engine:
		return eng.Stop(context.Background())
	case err := <-done:
		return err
	}
}
