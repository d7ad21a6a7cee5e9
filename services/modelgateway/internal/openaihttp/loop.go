package openaihttp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopboot"
)

// The event-loop front serves the same API as Serve, with the same
// handler code, on one event loop per CPU (gnet): no goroutine per
// connection. A chat request that goes to a plain-HTTP backend is sent on
// a kept-alive backend connection registered on the loop that read the
// request, and its answer read there, so a request and its answer never
// leave that loop and wake no other thread. On a goroutine per
// connection, the front's cost per request at a thousand requests a
// second was twice nginx's, most of it the wake-ups of those goroutines
// (docs/benchmarks.md, session 46).
//
// Streamed answers are relayed on the loop too. What a loop cannot do
// without blocking runs on a goroutine with the other front's code: TLS
// backends, and a request that must wait (retry backoff, a weight update)
// or whose first attempt failed. Such a goroutine writes its answer to a
// copy of the client's socket (slowWriter).

// LoopOptions configure the event-loop front.
type LoopOptions struct {
	// Addr is the address to listen on (host:port).
	Addr string
	// MaxHead bounds a request's head (431 over it).
	MaxHead int
	// ReadTimeout bounds the arrival of a request, head and body, once
	// its first byte came; IdleTimeout the wait for the next request on
	// a kept-alive connection.
	ReadTimeout, IdleTimeout time.Duration
	// DrainWait bounds the reading of a body refused before it was read
	// (401, 413), so that its client reads the answer rather than a
	// reset.
	DrainWait time.Duration
	// Logger takes gnet's own messages.
	Logger *zap.Logger
}

// LoopServer is the event-loop front.
type LoopServer struct {
	gnet.BuiltinEventEngine
	h    *Handler
	opts LoopOptions

	addr    net.Addr
	eng     gnet.Engine
	booted  chan error    // nil from OnBoot, or why the engine did not start
	stopped chan struct{} // closed when the engine stopped
	tick    *time.Ticker

	mu    sync.Mutex
	loops map[gnet.EventLoop]*loopState

	// inflight counts chat requests between their check and their
	// answer's end; slow counts the goroutines of the requests that left
	// their loop.
	inflight atomic.Int64
	slow     sync.WaitGroup
	draining atomic.Bool
	// ended is set once the handler closed: requests are ended as they
	// come.
	ended    atomic.Bool
	stopOnce sync.Once
}

// loopState is one loop's: its connections and kept-alive backend
// connections, and scratch buffers. Only its loop touches it.
type loopState struct {
	loop    gnet.EventLoop
	clients map[*client]struct{}
	idle    map[*backend.Wire][]*upstream
	br      *bufio.Reader
	rd      bytes.Reader
	aw      appendWriter
	bw      *bufio.Writer
	head    []byte
	pieces  [][]byte
	answer  []byte // where bodies in chunks are decoded (keepScratch)
}

// ServeLoop starts the event-loop front; it listens once it returns.
func ServeLoop(h *Handler, opts LoopOptions) (*LoopServer, error) {
	s := &LoopServer{
		h: h, opts: opts, booted: make(chan error, 1),
		stopped: make(chan struct{}), loops: map[gnet.EventLoop]*loopState{},
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	go func() {
		err := gnet.Run(s, "tcp://"+opts.Addr,
			gnet.WithMulticore(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTCPKeepAlive(30*time.Second),
			gnet.WithLogger(loopboot.Logger(log)))
		close(s.stopped)
		// Only OnBoot says nil: a Run that ended before it failed.
		if err == nil {
			err = errors.New("event loop stopped at start")
		}
		select {
		case s.booted <- err:
		default: // booted, and OnBoot's nil taken
		}
	}()
	if err := <-s.booted; err != nil {
		return nil, err
	}
	s.tick = time.NewTicker(sweepInterval(h.opts.Timeout))
	go s.sweepEvery()
	h.onClose = s.endAll
	return s, nil
}

// Addr is the address the front listens on.
func (s *LoopServer) Addr() net.Addr { return s.addr }

func (s *LoopServer) OnBoot(eng gnet.Engine) gnet.Action {
	addr, err := loopboot.Addr(eng)
	if err != nil {
		s.booted <- err
		return gnet.Shutdown
	}
	s.addr, s.eng = addr, eng
	s.booted <- nil
	return gnet.None
}

// state returns the state of c's loop.
func (s *LoopServer) state(c gnet.Conn) *loopState {
	el := c.EventLoop()
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.loops[el]
	if ls == nil {
		ls = &loopState{loop: el, clients: map[*client]struct{}{}, idle: map[*backend.Wire][]*upstream{}}
		ls.br = bufio.NewReaderSize(&ls.rd, s.opts.MaxHead+4096)
		ls.bw = bufio.NewWriterSize(&ls.aw, 16<<10)
		s.loops[el] = ls
	}
	return ls
}

func (s *LoopServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if up, ok := c.Context().(*upstream); ok {
		up.opened(c)
		return nil, gnet.None
	}
	if s.draining.Load() {
		return nil, gnet.Close
	}
	cl := &client{s: s, c: c, ls: s.state(c), last: time.Now()}
	cl.chatFn = cl.chat
	cl.rc.Init2(addrConn{local: c.LocalAddr(), remote: c.RemoteAddr()}, FastHTTPLogger{s.opts.Logger}, false)
	cl.ls.clients[cl] = struct{}{}
	c.SetContext(cl)
	return nil, gnet.None
}

func (s *LoopServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch x := c.Context().(type) {
	case *client:
		x.gone = true
		delete(x.ls.clients, x)
		if x.ex != nil {
			x.ex.clientGone()
		}
	case *upstream:
		x.closed()
	}
	return gnet.None
}

func (s *LoopServer) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *client:
		return x.serve()
	case *upstream:
		return x.read()
	}
	return gnet.Close
}

// sweepInterval is how often the loops look for requests past their
// deadline and connections idle too long: a tenth of the request
// timeout, between 10 ms and a second.
func sweepInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 10*time.Millisecond), time.Second)
}

// sweepEvery ends, every sweepInterval, the requests past their deadline
// and the connections whose request is late or that idled too long.
func (s *LoopServer) sweepEvery() {
	for {
		select {
		case <-s.stopped:
			return
		case now := <-s.tick.C:
			s.eachLoop(func(ls *loopState) { ls.sweep(s, now) })
		}
	}
}

// eachLoop runs f on every loop's state, on its loop.
func (s *LoopServer) eachLoop(f func(*loopState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for el, ls := range s.loops {
		el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			f(ls)
			return nil
		}))
	}
}

func (ls *loopState) sweep(s *LoopServer, now time.Time) {
	ls.sweepIdle(now)
	timeout := s.h.opts.Timeout
	for cl := range ls.clients {
		switch {
		case cl.ex != nil:
			if timeout > 0 && now.Sub(cl.ex.cc.start) > timeout {
				cl.ex.timedOut()
			}
		case cl.draining:
			if now.Sub(cl.last) > s.opts.DrainWait {
				cl.c.Close()
			}
		case cl.c.InboundBuffered() > 0 || cl.chunks.on:
			if s.opts.ReadTimeout > 0 && now.Sub(cl.last) > s.opts.ReadTimeout {
				// As the other front does: no answer, for a client that
				// is most often gone.
				cl.c.Close()
			}
		case s.draining.Load(), s.opts.IdleTimeout > 0 && now.Sub(cl.last) > s.opts.IdleTimeout:
			cl.c.Close()
		}
	}
}

// Drain stops taking connections and requests and waits, within ctx, for
// the requests in flight to be answered.
func (s *LoopServer) Drain(ctx context.Context) error {
	s.draining.Store(true)
	s.eachLoop(func(ls *loopState) { ls.sweep(s, time.Now()) })
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Close ends the requests in flight and stops the front.
func (s *LoopServer) Close(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		s.tick.Stop()
		// Stopping closes every connection, which ends its request.
		// gnet's Stop looks twice a second for the end; Run's return
		// says it at once.
		go s.eng.Stop(context.Background())
		select {
		case <-s.stopped:
			s.slow.Wait()
		case <-ctx.Done():
			err = ctx.Err()
		}
	})
	return err
}

// endAll ends the requests in flight, as the other front's watch list does
// when the handler closes, and every request after them.
func (s *LoopServer) endAll() {
	s.ended.Store(true)
	s.eachLoop(func(ls *loopState) {
		for cl := range ls.clients {
			if cl.ex != nil {
				cl.ex.abandon(context.Canceled)
			}
		}
	})
}

// client is a connection of a caller's.
type client struct {
	s  *LoopServer
	c  gnet.Conn
	ls *loopState
	rc fasthttp.RequestCtx
	// chatFn is chat as a func value, made once.
	chatFn func(*fasthttp.RequestCtx)
	// ex is the chat request in flight: the next request waits in the
	// buffer until it is answered.
	ex *exchange
	// last is when the connection last finished a request or, with bytes
	// buffered, when its next request began to arrive.
	last    time.Time
	partial bool // the buffer holds the start of a request
	// need is how many bytes the request being read takes, once its head
	// gave its length: until they are buffered, nothing is looked at
	// again (gnet copies what it holds into one slice on every look).
	need     int
	draining bool // refused: read and drop until the client closes
	gone     bool
	// continued is set once 100 Continue was sent for the request
	// waiting for its body.
	continued bool
	// chunks is a request with a body in chunks, while it arrives.
	chunks chunkedBody
}

// serve answers the requests that have arrived whole.
func (cl *client) serve() gnet.Action {
	for cl.ex == nil && !cl.gone {
		if cl.chunks.on && !cl.draining {
			buf, _ := cl.c.Next(-1)
			if len(buf) == 0 {
				return gnet.None
			}
			cl.chunks.buf = append(cl.chunks.buf, buf...)
			if act := cl.moreChunks(); act != gnet.None || cl.chunks.on {
				return act
			}
			continue
		}
		if cl.need > 0 && cl.c.InboundBuffered() < cl.need && !cl.draining {
			return gnet.None
		}
		buf, _ := cl.c.Peek(-1)
		if len(buf) == 0 {
			cl.partial = false
			return gnet.None
		}
		if cl.draining {
			cl.c.Discard(len(buf))
			return gnet.None
		}
		if !cl.partial {
			cl.partial, cl.last = true, time.Now()
		}
		act, used := cl.request(buf)
		if act != gnet.None || used == 0 {
			return act
		}
	}
	return gnet.None
}

// request reads the request at the start of buf when it is whole and
// hands it to the handler, returning how many bytes it used (0: it waits
// for more).
func (cl *client) request(buf []byte) (gnet.Action, int) {
	s, h := cl.s, cl.s.h
	end := h1.HeadEnd(buf)
	if end < 0 || end > s.opts.MaxHead {
		if end > s.opts.MaxHead || len(buf) > s.opts.MaxHead {
			return cl.refuse(fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large", "invalid_request"), 0
		}
		return gnet.None, 0
	}
	head, ok := h1.ScanHead(buf[:end])
	if !ok {
		return cl.refuse(fasthttp.StatusBadRequest, "read request: malformed head", "invalid_request"), 0
	}
	rc := &cl.rc
	rc.Request.Reset()
	rc.Response.Reset()
	cl.ls.rd.Reset(buf[:end])
	cl.ls.br.Reset(&cl.ls.rd)
	if err := rc.Request.Header.Read(cl.ls.br); err != nil {
		return cl.refuse(fasthttp.StatusBadRequest, "read request: "+err.Error(), "invalid_request"), 0
	}
	limit := h.opts.MaxRequestBytes
	authorized := h.authorized(&rc.Request.Header)
	if !authorized {
		limit = unauthBodyBytes
	}
	if head.Chunked {
		cl.chunks = chunkedBody{on: true, headEnd: end, limit: limit, authorized: authorized}
		cl.chunks.buf = append(cl.chunks.buf[:0], buf...)
		cl.c.Discard(len(buf))
		return cl.moreChunks(), 0
	}
	if limit > 0 && head.Length > limit {
		return cl.tooLarge(authorized), 0
	}
	if int64(len(buf)-end) < head.Length {
		cl.need = end + int(head.Length)
		return cl.waitBody(), 0
	}
	used := end + int(head.Length)
	return cl.dispatch(buf[end:used], used), used
}

// chunkedBody is a request whose body comes in chunks, moved out of
// gnet's buffer as it arrives: gnet copies all it holds into one slice on
// every look, which over a body of megabytes in 64 KiB reads would copy
// it thousands of times.
type chunkedBody struct {
	on         bool
	buf        []byte   // the request from its head on
	frame      h1.Frame // where the framing of buf stands
	framed     int
	headEnd    int
	limit      int64
	authorized bool
}

// moreChunks frames what has come of a chunked request and serves it once
// whole. What a client pipelined after such a request is not read: the
// connection closes after the answer.
func (cl *client) moreChunks() gnet.Action {
	ch := &cl.chunks
	n, ended, err := ch.frame.Consume(ch.buf[ch.framed:])
	ch.framed += n
	if err != nil {
		ch.on = false
		return cl.refuse(fasthttp.StatusBadRequest, "read request: body not framed in chunks", "invalid_request")
	}
	if !ended {
		if ch.limit > 0 && int64(ch.framed-ch.headEnd) > 2*ch.limit+h1.MaxChunkLine {
			ch.on = false
			return cl.tooLarge(ch.authorized)
		}
		return cl.waitBody()
	}
	ch.on = false
	body, err := h1.Dechunk(cl.ls.answer[:0], ch.buf[ch.headEnd:ch.framed], ch.limit)
	cl.ls.answer = keepScratch(body)
	switch {
	case errors.Is(err, h1.ErrTooLong):
		return cl.tooLarge(ch.authorized)
	case err != nil:
		return cl.refuse(fasthttp.StatusBadRequest, "read request: body not framed in chunks", "invalid_request")
	}
	if len(ch.buf) > ch.framed {
		cl.rc.Request.Header.SetConnectionClose()
	}
	return cl.dispatch(body, 0)
}

// tooLarge refuses a body over the limit: 401 for a caller without the
// token, whose limit is a few kilobytes, 413 for one with it.
func (cl *client) tooLarge(authorized bool) gnet.Action {
	if !authorized {
		return cl.refuseUnauthorized()
	}
	return cl.refuse(fasthttp.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", cl.s.h.opts.MaxRequestBytes), "request_too_large")
}

// dispatch hands a whole request (its head parsed into rc) with body to
// the handler, after dropping the used bytes from gnet's buffer.
func (cl *client) dispatch(body []byte, used int) gnet.Action {
	rc := &cl.rc
	rc.Request.SetBody(body)
	if used > 0 {
		cl.c.Discard(used)
	}
	cl.partial, cl.continued, cl.need = false, false, 0
	if rc.Request.Header.IsHead() {
		rc.Response.SkipBody = true
	}
	cl.s.h.route(rc, cl.chatFn)
	if cl.ex != nil {
		return gnet.None // answered later
	}
	return cl.reply()
}

// waitBody waits for the rest of a body, telling a client that asked for
// it to send it.
func (cl *client) waitBody() gnet.Action {
	if !cl.continued && cl.rc.Request.MayContinue() {
		cl.continued = true
		if _, err := cl.c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			return gnet.Close
		}
	}
	return gnet.None
}

// refuse answers a request that cannot be read and closes the connection.
// A body left unread is drained (bounded by DrainWait) so that its client
// reads the answer.
func (cl *client) refuse(code int, msg, typ string) gnet.Action {
	cl.rc.Response.Reset()
	writeError(&cl.rc, code, msg, "", typ)
	return cl.closeAfter()
}

func (cl *client) refuseUnauthorized() gnet.Action {
	cl.rc.Response.Reset()
	cl.s.h.unauthorized(&cl.rc)
	return cl.closeAfter()
}

// closeAfter writes the answer in rc and closes the connection.
func (cl *client) closeAfter() gnet.Action {
	cl.rc.Response.SetConnectionClose()
	if cl.write() != nil {
		return gnet.Close
	}
	// Half-closed: the client reads the answer and its end, and what it
	// still sends is dropped until it closes or DrainWait passes.
	if err := unix.Shutdown(cl.c.Fd(), unix.SHUT_WR); err != nil {
		return gnet.Close
	}
	cl.draining, cl.last = true, time.Now()
	cl.c.Discard(cl.c.InboundBuffered())
	return gnet.None
}

// reply writes the answer in rc, and closes the connection when the
// request or the answer asked for it or the front is draining.
func (cl *client) reply() gnet.Action {
	rc := &cl.rc
	if rc.Request.Header.ConnectionClose() || cl.s.draining.Load() {
		rc.Response.SetConnectionClose()
	}
	cl.last = time.Now()
	if cl.write() != nil || rc.Response.ConnectionClose() {
		return gnet.Close
	}
	return gnet.None
}

// write writes the answer in rc.
func (cl *client) write() error {
	ls := cl.ls
	ls.aw.b = ls.aw.b[:0]
	ls.bw.Reset(&ls.aw)
	if err := cl.rc.Response.Write(ls.bw); err != nil {
		return err
	}
	if err := ls.bw.Flush(); err != nil {
		return err
	}
	_, err := cl.c.Write(ls.aw.b)
	return err
}

// appendWriter collects what is written to it.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// addrConn gives a RequestCtx its connection's addresses, all it asks of
// a net.Conn here.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (a addrConn) LocalAddr() net.Addr  { return a.local }
func (a addrConn) RemoteAddr() net.Addr { return a.remote }

// FastHTTPLogger passes fasthttp's messages (connection errors) to log at
// debug level: a client that drops its connection is not the gateway's
// error. Both engines use it.
type FastHTTPLogger struct{ Log *zap.Logger }

func (l FastHTTPLogger) Printf(format string, args ...any) {
	if l.Log == nil {
		return
	}
	if ce := l.Log.Check(zap.DebugLevel, "openai http connection"); ce != nil {
		ce.Write(zap.String("detail", fmt.Sprintf(format, args...)))
	}
}

// loopWriter writes to a client connection from a goroutine, through its
// loop, one write at a time: a write returns once the loop has taken it.
type loopWriter struct {
	c       gnet.Conn
	stopped <-chan struct{}
	done    chan error
}

func (w *loopWriter) Write(p []byte) (int, error) {
	err := w.c.AsyncWrite(p, func(_ gnet.Conn, err error) error {
		w.done <- err
		return nil
	})
	if err == nil {
		select {
		case err = <-w.done:
		case <-w.stopped:
			err = net.ErrClosed
		}
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *loopWriter) Close() error { return nil }

// appendContentLength appends the Content-Length line and the head's end.
func appendContentLength(dst []byte, n int) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n\r\n"...)
}

// maxKeptScratch bounds the buffer a loop keeps for decoding bodies in
// chunks: a body of up to max_response_bytes would otherwise stay held by
// its loop for good after the largest one.
const maxKeptScratch = 1 << 20

// keepScratch returns b emptied to be used again, or nil when it grew
// past maxKeptScratch.
func keepScratch(b []byte) []byte {
	if cap(b) > maxKeptScratch {
		return nil
	}
	return b[:0]
}
