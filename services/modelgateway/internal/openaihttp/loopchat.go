package openaihttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
)

// backendWire keys a loop's idle backend connections.
type backendWire = backend.Wire

// loopDialTimeout bounds connecting to a backend, as the other client's.
const loopDialTimeout = 5 * time.Second

// Contexts already over, for the gateway's accounting of an attempt the
// front abandoned: the client went away, or the deadline passed.
var (
	canceledCtx, deadlineCtx context.Context
)

func init() {
	var cancel context.CancelFunc
	canceledCtx, cancel = context.WithCancel(context.Background())
	cancel()
	deadlineCtx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
}

// exchange is a chat request on the event-loop front, from its check to
// its answer. Until it goes slow, only its loop touches it.
type exchange struct {
	cl *client
	cc chatCall
	a  gateway.Attempts
	// b is the backend of the attempt on the loop, up its connection,
	// sent when the attempt began, epoch the backend's then.
	b     *backend.Backend
	up    *upstream
	sent  time.Time
	epoch int64
	done  bool
	// slow is set once the request went to a goroutine, which has call.
	slow bool
	call *loopCall
}

// hasWire is the backends a loop can send to: plain HTTP.
func hasWire(b *backend.Backend) bool { return b.Wire() != nil }

// chat routes a checked request: on the loop when it can, otherwise on a
// goroutine.
func (cl *client) chat(rc *fasthttp.RequestCtx) {
	h := cl.s.h
	ex := &exchange{cl: cl}
	if !h.checkChat(rc, &ex.cc) {
		return
	}
	if cl.s.ended.Load() {
		h.fail(rc, context.Canceled)
		return
	}
	cl.ex = ex
	cl.s.inflight.Add(1)
	if ex.cc.stream {
		ex.goSlow()
		return
	}
	b, _, epoch := h.g.First(&ex.cc.req, &ex.a, hasWire)
	if b == nil {
		ex.goSlow()
		return
	}
	ex.b, ex.epoch, ex.sent = b, epoch, time.Now()
	w := b.Wire()
	if up := cl.ls.takeIdle(w); up != nil {
		ex.write(up)
		return
	}
	ex.dial(w)
}

// write sends the request on up.
func (ex *exchange) write(up *upstream) {
	ls := ex.cl.ls
	up.ex, ex.up = ex, up
	body := ex.cc.req.Body
	head := append(ls.head[:0], up.w.Head...)
	if key := ex.cc.req.RoutingKey; key != "" {
		head = append(head, "X-Routing-Key: "...)
		head = appendHeaderValue(head, key)
		head = append(head, "\r\n"...)
	}
	head = appendContentLength(head, len(body))
	ls.head = head
	ls.pieces = append(ls.pieces[:0], head, body)
	// gnet keeps what the socket does not take at once.
	if _, err := up.c.Writev(ls.pieces); err != nil {
		up.ex, ex.up = nil, nil
		up.c.Close()
		ex.failed(err)
	}
}

// dial connects to a backend for ex, off the loop; the connection is
// registered on ex's loop, which opens it (upstream.opened).
func (ex *exchange) dial(w *backend.Wire) {
	ls := ex.cl.ls
	up := &upstream{w: w, ls: ls, ex: ex}
	ex.up = up
	timeout := loopDialTimeout
	if t := ex.cl.s.h.opts.Timeout; t > 0 {
		timeout = min(timeout, t-time.Since(ex.cc.start))
	}
	go func() {
		conn, err := net.DialTimeout("tcp", w.Addr, timeout)
		if err == nil {
			var res <-chan gnet.RegisteredResult
			if res, err = ls.loop.Enroll(gnet.NewContext(context.Background(), up), conn); err != nil {
				conn.Close()
			} else if r := <-res; r.Err != nil {
				err = r.Err
			}
		}
		if err != nil {
			ls.loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				up.dialFailed(err)
				return nil
			}))
		}
	}()
}

// timedOut ends a request on the loop past its deadline; the loop's sweep
// calls it. (A timer per request, as time.AfterFunc makes, would cost
// each request a wake-up of another thread: the runtime gets a thread
// ready to run a new timer.)
func (ex *exchange) timedOut() {
	if ex.done || ex.slow || ex.b == nil {
		return
	}
	ex.dropUpstream()
	err := ex.cl.s.h.g.Failed(deadlineCtx, &ex.a, ex.b, ex.sent, context.DeadlineExceeded)
	ex.b = nil
	ex.cl.s.h.fail(&ex.cl.rc, err)
	ex.finish()
}

// clientGone ends the request of a client that closed its connection.
func (ex *exchange) clientGone() {
	if ex.done {
		return
	}
	if ex.slow {
		ex.call.cancel(context.Canceled) // the goroutine ends it
		return
	}
	ex.dropAttempt()
	ex.end()
}

// abandon ends a request the front gives up (err: context.Canceled), at
// its backend too, and answers it as the other front does.
func (ex *exchange) abandon(err error) {
	if ex.done {
		return
	}
	if ex.slow {
		ex.call.cancel(err)
		return
	}
	ex.dropAttempt()
	ex.cl.s.h.fail(&ex.cl.rc, err)
	ex.finish()
}

// dropAttempt gives up the attempt on the loop: not the backend's fault.
func (ex *exchange) dropAttempt() {
	ex.dropUpstream()
	if ex.b != nil {
		ex.cl.s.h.g.Failed(canceledCtx, &ex.a, ex.b, ex.sent, context.Canceled)
		ex.b = nil
	}
}

// dropUpstream closes the backend connection of an attempt abandoned
// midway: the backend sees the caller go away and stops generating.
func (ex *exchange) dropUpstream() {
	if up := ex.up; up != nil {
		up.ex, ex.up = nil, nil
		if up.c != nil {
			up.c.Close()
		} else {
			up.abandoned = true
		}
	}
}

// failed takes an attempt on the loop that got no answer to the gateway,
// which tries again on a goroutine.
func (ex *exchange) failed(err error) {
	if ex.done || ex.slow || ex.b == nil {
		return
	}
	g := ex.cl.s.h.g
	g.Failed(context.Background(), &ex.a, ex.b, ex.sent, fmt.Errorf("post %s%s: %w", ex.b.BaseURL(), chatPath, err))
	ex.b = nil
	ex.goSlow()
}

// chatPath is the backend path of chat completions, for messages.
const chatPath = "/v1/chat/completions"

// answered takes the answer the backend sent on the loop: status, content
// type, and body as sent (chunked or not).
func (ex *exchange) answered(status int, contentType, raw []byte, chunked bool) {
	h, rc, ls := ex.cl.s.h, &ex.cl.rc, ex.cl.ls
	limit := h.opts.MaxResponseBytes
	body, tooLong := raw, error(nil)
	if chunked {
		var err error
		body, err = h1.Dechunk(ls.answer[:0], raw, limit)
		ls.answer = body[:0]
		if err != nil {
			tooLong = fmt.Errorf("answer exceeds the %d-byte limit", limit)
		}
	} else if limit > 0 && int64(len(body)) > limit {
		tooLong = fmt.Errorf("answer of %d bytes exceeds the %d-byte limit", len(body), limit)
	}
	b := ex.b
	ex.b = nil
	if h.g.Answered(&ex.a, b, ex.sent, status, body[:min(len(body), 4096)]) {
		ex.goSlow()
		return
	}
	resp := gateway.NewResponse(&ex.a, b, ex.sent, ex.epoch)
	h.answerHead(rc, resp, status, contentType)
	if tooLong != nil {
		resp.Finish(false, tooLong.Error())
		writeError(rc, fasthttp.StatusBadGateway, "backend "+b.ID()+": read answer: "+tooLong.Error(), "", "bad_gateway")
	} else {
		h.answerBody(rc, resp, body, ex.cc.start)
	}
	ex.finish()
}

// end ends the exchange's hold on its client.
func (ex *exchange) end() {
	ex.done = true
	ex.cl.ex = nil
	ex.cl.s.inflight.Add(-1)
}

// finish writes the answer in rc, on the loop, and has the client's next
// request served.
func (ex *exchange) finish() {
	ex.end()
	cl := ex.cl
	if cl.gone {
		return
	}
	if cl.reply() != gnet.None {
		cl.c.Close()
		return
	}
	if cl.c.InboundBuffered() > 0 {
		// A pipelined request: served once the caller (the backend
		// connection's read) has put its connection back in the pool.
		cl.c.Wake(nil)
	}
}

// loopCall is the context of a request that went to a goroutine: ended
// by its deadline, or by its loop when the client goes away.
type loopCall struct {
	context.Context
	stop context.CancelCauseFunc
}

func (c *loopCall) leave()           {}
func (c *loopCall) cancel(err error) { c.stop(err) }

// goSlow hands the request to a goroutine, which makes the attempts left
// as the other front does and writes the answer through the loop.
func (ex *exchange) goSlow() {
	s, cl := ex.cl.s, ex.cl
	ex.slow = true
	ctx := context.Background()
	var cancelDeadline context.CancelFunc = func() {}
	if t := s.h.opts.Timeout; t > 0 {
		ctx, cancelDeadline = context.WithDeadline(ctx, ex.cc.start.Add(t))
	}
	cctx, stop := context.WithCancelCause(ctx)
	ex.call = &loopCall{Context: cctx, stop: stop}
	closeConn := cl.rc.Request.Header.ConnectionClose()
	c, loop := cl.c, cl.ls.loop
	s.slow.Add(1)
	go func() {
		defer s.slow.Done()
		rc := &cl.rc
		s.h.relay(rc, &ex.cc, ex.call, &ex.a)
		if closeConn || s.draining.Load() {
			rc.Response.SetConnectionClose()
		}
		bw := bufio.NewWriterSize(&loopWriter{c: c, stopped: s.stopped, done: make(chan error, 1)}, 16<<10)
		err := rc.Response.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		closeAfter := err != nil || rc.Response.ConnectionClose()
		stop(nil)
		cancelDeadline()
		loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			ex.slowDone(closeAfter)
			return nil
		}))
	}()
}

// slowDone takes the client back on its loop.
func (ex *exchange) slowDone(closeAfter bool) {
	ex.end()
	cl := ex.cl
	if cl.gone {
		return
	}
	cl.last = time.Now()
	if closeAfter || cl.serve() != gnet.None {
		cl.c.Close()
	}
}

// upstream is a backend connection on a loop.
type upstream struct {
	w  *backend.Wire
	ls *loopState
	c  gnet.Conn
	// ex is the exchange waiting for the answer; nil when idle.
	ex    *exchange
	frame h1.Frame
	// framed counts the bytes of the answer framed so far; need, when
	// set, is how many the answer takes (its head gave the length).
	framed, need int
	// abandoned is set when its exchange gave it up while it was dialled.
	abandoned bool
	idleSince time.Time
}

// opened starts the exchange that dialled c, or keeps c for the next
// one when that exchange is gone.
func (up *upstream) opened(c gnet.Conn) {
	up.c = c
	up.frame.MaxHead = maxAnswerHead
	if up.abandoned || up.ex == nil {
		up.ls.putIdle(up)
		return
	}
	up.ex.write(up)
}

// maxAnswerHead bounds the head of a backend's answer.
const maxAnswerHead = 64 << 10

func (up *upstream) dialFailed(err error) {
	if ex := up.ex; ex != nil && ex.up == up {
		up.ex, ex.up = nil, nil
		ex.failed(err)
	}
}

// closed is the connection's end: an idle one leaves the pool, and an
// answer cut short fails its attempt.
func (up *upstream) closed() {
	ex := up.ex
	if ex == nil {
		up.ls.dropIdle(up)
		return
	}
	up.ex, ex.up = nil, nil
	ex.failed(errBackendClosed)
}

var (
	errBackendClosed = errors.New("backend closed the connection before its answer was whole")
	errNoLength      = errors.New("answer without a length, ending with the connection")
)

// read frames the answer as it arrives and takes it to its exchange once
// whole.
func (up *upstream) read() gnet.Action {
	ex := up.ex
	if ex == nil {
		return gnet.Close // bytes nobody asked for
	}
	limit := ex.cl.s.h.opts.MaxResponseBytes
	for {
		if up.need > 0 && up.c.InboundBuffered() < up.need {
			return gnet.None
		}
		up.need = 0
		buf, _ := up.c.Peek(-1)
		n, ended, err := up.frame.Consume(buf[up.framed:])
		up.framed += n
		if err != nil {
			up.ex, ex.up = nil, nil
			ex.failed(err)
			return gnet.Close
		}
		if !ended {
			// A body that cannot fit is refused as soon as its length
			// (or, in chunks, its size so far) says so.
			if !up.frame.InHead() && limit > 0 {
				hd := up.frame.Head
				if (!hd.Chunked && hd.Length > limit) || (hd.Chunked && int64(up.framed) > 2*limit+maxAnswerHead) {
					up.ex, ex.up = nil, nil
					ex.answeredTooLong(hd.Status, buf[hd.ContentType.Start:hd.ContentType.End], hd.Length)
					return gnet.Close
				}
			}
			if left := up.frame.BodyLeft(); left > 0 {
				up.need = up.framed + int(left)
			}
			return gnet.None
		}
		hd := up.frame.Head
		if hd.Status < 200 {
			// 100 Continue and its kind: the answer follows.
			up.c.Discard(up.framed)
			up.framed = 0
			continue
		}
		if !hd.HasLength && !hd.Chunked && hd.Status != 204 && hd.Status != 304 {
			// A body that runs to the connection's end (HTTP/1.0's
			// way): the other client reads those; the loop does not.
			up.ex, ex.up = nil, nil
			ex.failed(errNoLength)
			return gnet.Close
		}
		msg := buf[:up.framed]
		up.ex, ex.up = nil, nil
		ex.answered(hd.Status, msg[hd.ContentType.Start:hd.ContentType.End], msg[up.frame.HeadLen:], hd.Chunked)
		up.c.Discard(up.framed)
		up.framed = 0
		if hd.Close || up.ls.closing(ex.cl.s) {
			return gnet.Close
		}
		up.ls.putIdle(up)
		return gnet.None
	}
}

// answeredTooLong answers a request whose backend answer is over the
// limit, as a whole answer over it is answered.
func (ex *exchange) answeredTooLong(status int, contentType []byte, length int64) {
	h, rc := ex.cl.s.h, &ex.cl.rc
	limit := h.opts.MaxResponseBytes
	b := ex.b
	ex.b = nil
	if h.g.Answered(&ex.a, b, ex.sent, status, nil) {
		ex.goSlow()
		return
	}
	msg := fmt.Sprintf("answer exceeds the %d-byte limit", limit)
	if length > 0 {
		msg = fmt.Sprintf("answer of %d bytes exceeds the %d-byte limit", length, limit)
	}
	resp := gateway.NewResponse(&ex.a, b, ex.sent, ex.epoch)
	h.answerHead(rc, resp, status, contentType)
	resp.Finish(false, msg)
	writeError(rc, fasthttp.StatusBadGateway, "backend "+b.ID()+": read answer: "+msg, "", "bad_gateway")
	ex.finish()
}

// closing reports whether backend connections should close once idle.
func (ls *loopState) closing(s *LoopServer) bool { return s.draining.Load() }

// upstreamIdleTimeout closes a backend connection idle this long: servers
// close theirs after a few seconds anyway.
const upstreamIdleTimeout = 90 * time.Second

func (ls *loopState) takeIdle(w *backend.Wire) *upstream {
	list := ls.idle[w]
	if len(list) == 0 {
		return nil
	}
	up := list[len(list)-1]
	ls.idle[w] = list[:len(list)-1]
	return up
}

func (ls *loopState) putIdle(up *upstream) {
	up.abandoned, up.ex, up.framed, up.need = false, nil, 0, 0
	up.idleSince = time.Now()
	ls.idle[up.w] = append(ls.idle[up.w], up)
}

func (ls *loopState) dropIdle(up *upstream) {
	list := ls.idle[up.w]
	for i, x := range list {
		if x == up {
			ls.idle[up.w] = append(list[:i], list[i+1:]...)
			return
		}
	}
}

// sweepIdle closes the backend connections idle too long.
func (ls *loopState) sweepIdle(now time.Time) {
	for _, list := range ls.idle {
		for _, up := range list {
			if now.Sub(up.idleSince) > upstreamIdleTimeout {
				up.c.Close() // closed() takes it out of the pool
			}
		}
	}
}
