package bench

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/grpcloop"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
)

// The event-loop gRPC proxy asks of the gRPC front what the event-loop
// proxy asks of the HTTP one: is the gRPC floor gRPC's, or grpc-go's? It
// does the bare grpc-go proxy's job (bareGRPCMethod: the backend's JSON
// body in as raw bytes, posted to the upstream, the answer's bytes back)
// the way nginx works: on one gnet event loop per CPU, with no goroutine
// per connection or per call. Its HTTP/2 is the gateway's event-loop gRPC
// front's (package grpcloop), and it serves its one method on the loop
// (grpcloop.HandleOnLoop): the call's body goes to the upstream over a
// kept-alive HTTP/1.1 connection registered on the loop that read the
// call, so a call and its answer never leave it. It runs none of the
// gateway's code: no interceptors, no protobuf.

const (
	// egMaxMessage bounds a call's message, as grpc-go's default
	// receive limit does.
	egMaxMessage = 4 << 20
	// egMaxAnswer bounds an upstream's answer.
	egMaxAnswer = 16 << 20
)

type egProxy struct {
	upstream net.Addr
	host     string

	mu    sync.Mutex
	loops map[gnet.EventLoop]*egLoop
}

// egLoop is one loop's: its idle upstream connections. Only its loop
// touches it.
type egLoop struct {
	loop gnet.EventLoop
	idle []*egUpstream
	// scratch buffers for request heads and dechunked answers
	head, body []byte
	pieces     [][]byte
}

// egUpstream is a kept-alive connection to the upstream.
type egUpstream struct {
	c     gnet.Conn
	l     *egLoop
	call  *grpcloop.LoopCall // the call whose answer it carries; nil when idle
	frame h1.Frame
	seen  int    // bytes of the answer framed so far
	req   []byte // a request waiting for the connection to open
}

var _ grpcloop.LoopConn = (*egUpstream)(nil)

func (p *egProxy) loopOf(el gnet.EventLoop) *egLoop {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.loops[el]
	if l == nil {
		l = &egLoop{loop: el}
		p.loops[el] = l
	}
	return l
}

// handle sends a call's message to the upstream, on the call's loop.
func (p *egProxy) handle(call *grpcloop.LoopCall) {
	msg := call.Message()
	l := p.loopOf(call.Loop())
	head := append(l.head[:0], "POST /v1/chat/completions HTTP/1.1\r\nHost: "...)
	head = append(head, p.host...)
	head = append(head, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	head = strconv.AppendInt(head, int64(len(msg)), 10)
	head = append(head, "\r\n\r\n"...)
	l.head = head
	if n := len(l.idle); n > 0 {
		up := l.idle[n-1]
		l.idle = l.idle[:n-1]
		up.call = call
		// gnet keeps what the socket does not take at once.
		l.pieces = append(l.pieces[:0], head, msg)
		if _, err := up.c.Writev(l.pieces); err != nil {
			up.call = nil
			up.c.Close()
			call.Fail(codes.Unavailable, "write to upstream: "+err.Error())
		}
		return
	}
	up := &egUpstream{l: l, call: call, frame: h1.Frame{MaxHead: eventMaxHead}, req: append(append([]byte(nil), head...), msg...)}
	res, err := l.loop.Register(gnet.NewContext(context.Background(), up), p.upstream)
	if err != nil {
		up.call = nil
		call.Fail(codes.Unavailable, "dial upstream: "+err.Error())
		return
	}
	// Only a dial that failed is news; the loop then fails the call.
	go func() {
		if r := <-res; r.Err != nil {
			l.loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				if c := up.call; c != nil {
					up.call = nil
					c.Fail(codes.Unavailable, "dial upstream: "+r.Err.Error())
				}
				return nil
			}))
		}
	}()
}

func (up *egUpstream) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	up.c = c
	if up.call == nil || up.call.Ended() {
		// The call went away while the connection was dialled.
		up.call = nil
		up.l.idle = append(up.l.idle, up)
		return nil, gnet.None
	}
	req := up.req
	up.req = nil
	return req, gnet.None
}

func (up *egUpstream) OnClose(gnet.Conn, error) gnet.Action {
	for i, x := range up.l.idle {
		if x == up {
			up.l.idle = append(up.l.idle[:i], up.l.idle[i+1:]...)
			break
		}
	}
	if c := up.call; c != nil {
		up.call = nil
		c.Fail(codes.Unavailable, "upstream closed the connection")
	}
	return gnet.None
}

// OnTraffic reads the upstream's answer once it is whole and hands it to
// the call it carries.
func (up *egUpstream) OnTraffic(gnet.Conn) gnet.Action {
	buf, _ := up.c.Peek(-1)
	ended := false
	for up.seen < len(buf) && !ended {
		n, e, err := up.frame.Consume(buf[up.seen:])
		if err != nil || up.seen+n > egMaxAnswer {
			return up.broken("unframed answer")
		}
		if n == 0 {
			break
		}
		up.seen += n
		ended = e
	}
	if !ended {
		return gnet.None
	}
	if up.seen != len(buf) || up.call == nil {
		// Bytes past the answer, or an answer to nothing: the
		// connection's framing cannot be trusted.
		return up.broken("unasked bytes")
	}
	answer := buf[:up.seen]
	headEnd := h1.HeadEnd(answer)
	h, ok := h1.ScanHead(answer[:headEnd])
	body := answer[headEnd:]
	var err error
	if ok && h.Chunked {
		up.l.body, err = h1.Dechunk(up.l.body[:0], body, egMaxAnswer)
		body = up.l.body
	}
	call := up.call
	up.call = nil
	switch {
	case !ok || err != nil:
		call.Fail(codes.Unavailable, "unreadable upstream answer")
	case h.Status != 200:
		call.Fail(codes.Unknown, "upstream status "+strconv.Itoa(h.Status))
	default:
		call.Answer(body)
	}
	up.c.Discard(up.seen)
	up.seen = 0
	up.frame = h1.Frame{MaxHead: eventMaxHead}
	if h.Close || !ok {
		return gnet.Close
	}
	up.l.idle = append(up.l.idle, up)
	return gnet.None
}

// broken fails the call an upstream connection carries and closes it.
func (up *egUpstream) broken(why string) gnet.Action {
	if c := up.call; c != nil {
		up.call = nil
		c.Fail(codes.Unavailable, why)
	}
	return gnet.Close
}

// serveEventGRPCProxy serves bareGRPCMethod in front of backend (a base
// URL) until ctx ends, printing "ADDR <host:port>" on out once it listens.
// Other methods go to an empty grpc-go server: Unimplemented.
func serveEventGRPCProxy(ctx context.Context, backend string, out io.Writer) error {
	up, err := net.ResolveTCPAddr("tcp", hostPort(backend))
	if err != nil {
		return err
	}
	p := &egProxy{upstream: up, host: hostPort(backend), loops: map[gnet.EventLoop]*egLoop{}}
	s, err := grpcloop.New(grpcloop.Options{
		Addr: "127.0.0.1:0", Fallback: grpc.NewServer(), Codec: rawCodec{},
		MaxMsgBytes: egMaxMessage, MinPingInterval: grpcserver.MinPingInterval, Logger: zap.NewNop(),
	})
	if err != nil {
		return err
	}
	s.HandleOnLoop(bareGRPCMethod, p.handle)
	if err := s.Start(); err != nil {
		return err
	}
	if _, err := io.WriteString(out, "ADDR "+s.Addr().String()+"\n"); err != nil {
		return err
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Close(cctx)
}
