package openaihttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
)

// loopDialTimeout bounds connecting to a backend, as the other client's.
const loopDialTimeout = 5 * time.Second

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
	// resp is set once a streamed answer's head was relayed: its body
	// follows as it comes. streamed counts its bytes, tail keeps its end
	// (where the usage chunk is), gotData is set at its first byte.
	resp     *gateway.Response
	streamed int64
	tail     []byte
	gotData  bool
	// streamHeadBytes is the head of a streamed answer until its first
	// data goes with it.
	streamHeadBytes []byte
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
		head = h1.AppendHeaderValue(head, key)
		head = append(head, "\r\n"...)
	}
	head = appendContentLength(head, len(body))
	ls.head = head
	ls.pieces = append(ls.pieces[:0], head, body)
	// gnet keeps what the socket does not take at once.
	if _, err := up.c.Writev(ls.pieces); err != nil {
		up.detach()
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
	if ex.done || ex.slow {
		return
	}
	if ex.resp != nil {
		ex.abortStream()
		return
	}
	if ex.b == nil {
		return
	}
	ex.dropAttempt()
	ex.cl.s.h.fail(&ex.cl.rc, context.DeadlineExceeded)
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
	if ex.resp != nil {
		ex.dropUpstream()
		ex.resp.FinishCanceled()
		ex.end()
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
	if ex.resp != nil {
		ex.abortStream()
		return
	}
	ex.dropAttempt()
	ex.cl.s.h.fail(&ex.cl.rc, err)
	ex.finish()
}

// dropAttempt gives up the attempt on the loop (the client left, the
// deadline passed): not the backend's fault.
func (ex *exchange) dropAttempt() {
	ex.dropUpstream()
	if ex.b != nil {
		gateway.Abandon(ex.b)
		ex.b = nil
	}
}

// dropUpstream closes the backend connection of an attempt abandoned
// midway: the backend sees the caller go away and stops generating.
func (ex *exchange) dropUpstream() {
	if up := ex.up; up != nil {
		up.detach()
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
	body := raw
	if chunked {
		var err error
		body, err = h1.Dechunk(ls.answer[:0], raw, limit)
		ls.answer = keepScratch(body)
		switch {
		case errors.Is(err, h1.ErrTooLong):
			ex.answeredTooLong(status, contentType, body, gateway.TooLong(-1, limit))
			return
		case err != nil:
			ex.failed(err) // the framer let it through: not expected
			return
		}
	} else if limit > 0 && int64(len(body)) > limit {
		ex.answeredTooLong(status, contentType, body, gateway.TooLong(int64(len(body)), limit))
		return
	}
	b := ex.b
	ex.b = nil
	if h.g.Answered(&ex.a, b, ex.sent, status, body[:min(len(body), 4096)]) {
		ex.goSlow()
		return
	}
	resp := gateway.NewResponse(&ex.a, b, ex.sent, ex.epoch)
	h.answerHead(rc, resp, status, contentType)
	h.answerBody(rc, resp, body, ex.cc.start)
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
// as the other front does and writes the answer itself (slowWriter).
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
	loop := cl.ls.loop
	out := cl.slowWriter()
	s.slow.Add(1)
	go func() {
		defer s.slow.Done()
		defer out.Close()
		rc := &cl.rc
		s.h.relay(rc, &ex.cc, ex.call, &ex.a)
		if closeConn || s.draining.Load() {
			rc.Response.SetConnectionClose()
		}
		bw := bufio.NewWriterSize(out, 16<<10)
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

// slowWriter is how a request's goroutine writes its answer: to a copy of
// the client's socket, through Go's poller, as the other front writes;
// or, when the loop still holds bytes of an earlier answer to write first
// (or the copy cannot be made), through the loop. A write through the
// loop costs each streamed chunk two more thread wake-ups (the loop's,
// then the goroutine's), which added milliseconds to a streamed answer
// of tokens.
func (cl *client) slowWriter() io.WriteCloser {
	if cl.c.OutboundBuffered() == 0 {
		if fd, err := cl.c.Dup(); err == nil {
			f := os.NewFile(uintptr(fd), "client")
			nc, err := net.FileConn(f)
			f.Close()
			if err == nil {
				return nc
			}
		}
	}
	return &loopWriter{c: cl.c, stopped: cl.s.stopped, done: make(chan error, 1)}
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
	// A streamed answer's body is relayed as it comes: decoded by dech
	// when chunked, else bodyLeft bytes of it (-1: up to the close).
	chunked  bool
	dech     h1.Dechunker
	bodyLeft int64
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

// detach ends up's hold on its exchange, which it returns.
func (up *upstream) detach() *exchange {
	ex := up.ex
	up.ex, ex.up = nil, nil
	return ex
}

// maxAnswerHead bounds the head of a backend's answer.
const maxAnswerHead = 64 << 10

func (up *upstream) dialFailed(err error) {
	if ex := up.ex; ex != nil && ex.up == up {
		up.detach().failed(err)
	}
}

// closed is the connection's end: an idle one leaves the pool, and an
// answer cut short fails its attempt.
func (up *upstream) closed() {
	if up.ex == nil {
		up.ls.dropIdle(up)
		return
	}
	ex := up.detach()
	if ex.resp != nil {
		if !up.chunked && up.bodyLeft < 0 {
			ex.streamEnd(nil) // the close is the body's end
		} else {
			ex.streamEnd(errBackendClosed)
		}
		return
	}
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
	if ex.resp != nil {
		return up.relay()
	}
	limit := ex.cl.s.h.opts.MaxResponseBytes
	for {
		if up.need > 0 && up.c.InboundBuffered() < up.need {
			return gnet.None
		}
		up.need = 0
		buf, _ := up.c.Peek(-1)
		if ex.cc.stream && up.framed == 0 {
			// A streamed answer's head decides: a 2xx one with a body
			// is relayed as it comes; any other is read whole, as when
			// not streamed.
			end := h1.HeadEnd(buf)
			if end < 0 {
				if len(buf) > maxAnswerHead {
					up.detach().failed(h1.ErrFraming)
					return gnet.Close
				}
				return gnet.None
			}
			hd, ok := h1.ScanHead(buf[:end])
			if !ok || hd.Status == 0 { // 0: a request line, not a status line
				up.detach().failed(h1.ErrFraming)
				return gnet.Close
			}
			if hd.Status < 200 {
				up.c.Discard(end)
				continue
			}
			// A 204 has no body to relay, whatever its head says.
			if hd.Status/100 == 2 && hd.Status != 204 {
				ex.streamHead(hd, buf[hd.ContentType.Start:hd.ContentType.End])
				up.c.Discard(end)
				up.chunked, up.dech, up.bodyLeft = hd.Chunked, h1.NewDechunker(), hd.Length
				if !hd.Chunked && !hd.HasLength {
					up.bodyLeft = -1
				}
				return up.relay()
			}
		}
		n, ended, err := up.frame.Consume(buf[up.framed:])
		up.framed += n
		if err != nil {
			up.detach().failed(err)
			return gnet.Close
		}
		if !ended {
			// A body that cannot fit is refused as soon as its length
			// (or, in chunks, its size so far) says so.
			if !up.frame.InHead() && limit > 0 {
				hd := up.frame.Head
				if (!hd.Chunked && hd.Length > limit) || (hd.Chunked && int64(up.framed) > 2*limit+maxAnswerHead) {
					length := hd.Length
					if hd.Chunked {
						length = -1
					}
					up.detach().answeredTooLong(hd.Status, buf[hd.ContentType.Start:hd.ContentType.End], nil, gateway.TooLong(length, limit))
					return gnet.Close
				}
			}
			if left := up.frame.BodyLeft(); left > 0 {
				up.need = up.framed + int(left)
			}
			return gnet.None
		}
		hd := up.frame.Head
		if hd.Status == 0 {
			// A request line where a status line belongs: the framer
			// reads both.
			up.detach().failed(h1.ErrFraming)
			return gnet.Close
		}
		if hd.Status < 200 {
			// 100 Continue and its kind: the answer follows.
			up.c.Discard(up.framed)
			up.framed = 0
			continue
		}
		if !hd.HasLength && !hd.Chunked && hd.Status != 204 && hd.Status != 304 {
			// A body that runs to the connection's end (HTTP/1.0's
			// way): the other client reads those; the loop does not.
			up.detach().failed(errNoLength)
			return gnet.Close
		}
		msg := buf[:up.framed]
		up.detach().answered(hd.Status, msg[hd.ContentType.Start:hd.ContentType.End], msg[up.frame.HeadLen:], hd.Chunked)
		up.c.Discard(up.framed)
		up.framed = 0
		if hd.Close || ex.cl.s.draining.Load() {
			return gnet.Close
		}
		up.ls.putIdle(up)
		return gnet.None
	}
}

// relay passes a streamed answer's body to the client as it comes.
func (up *upstream) relay() gnet.Action {
	ex := up.ex
	buf, _ := up.c.Peek(-1)
	used := 0
	for {
		rest := buf[used:]
		var (
			data []byte
			n    int
			done bool
			err  error
		)
		switch {
		case up.chunked:
			data, n, done, err = up.dech.Next(rest)
		case up.bodyLeft >= 0:
			n = int(min(int64(len(rest)), up.bodyLeft))
			data, up.bodyLeft = rest[:n], up.bodyLeft-int64(n)
			done = up.bodyLeft == 0
		default:
			data, n = rest, len(rest)
		}
		used += n
		if err != nil {
			up.c.Discard(used)
			up.detach().streamEnd(err)
			return gnet.Close
		}
		if len(data) > 0 && !ex.streamData(data) {
			// streamData ended the answer and dropped this connection.
			up.c.Discard(used)
			return gnet.Close
		}
		if done {
			up.c.Discard(used)
			up.detach().streamEnd(nil)
			if ex.cl.s.draining.Load() {
				return gnet.Close
			}
			up.ls.putIdle(up)
			return gnet.None
		}
		if n == 0 || used == len(buf) {
			break
		}
	}
	up.c.Discard(used)
	return gnet.None
}

// streamHead relays the head of a streamed 2xx answer.
func (ex *exchange) streamHead(hd h1.Head, contentType []byte) {
	h, cl := ex.cl.s.h, ex.cl
	b := ex.b
	ex.b = nil
	h.g.Answered(&ex.a, b, ex.sent, hd.Status, nil) // a 2xx: never retried
	ex.resp = gateway.NewResponse(&ex.a, b, ex.sent, ex.epoch)
	h.answerHead(&cl.rc, ex.resp, hd.Status, contentType)
	hdr := &cl.rc.Response.Header
	h.streamHeaders(hdr, ex.resp)
	hdr.SetContentLength(-1) // chunked
	if cl.rc.Request.Header.ConnectionClose() || cl.s.draining.Load() {
		hdr.SetConnectionClose()
	}
	// Written with the first data, as the other front does: a client
	// reads the status once the answer has begun.
	ex.streamHeadBytes = hdr.AppendBytes(ex.streamHeadBytes[:0])
}

// streamData relays a piece of a streamed answer's body as a chunk. It
// reports false when the answer went over MaxResponseBytes: the client
// has what came so far, without [DONE], as when a backend breaks off.
func (ex *exchange) streamData(data []byte) bool {
	h, cl, ls := ex.cl.s.h, ex.cl, ex.cl.ls
	if !ex.gotData {
		ex.gotData = true
		h.front.TTFT.Observe(time.Since(ex.cc.start).Seconds())
	}
	ex.tail = keepTail(ex.tail, data)
	ls.head = strconv.AppendInt(ls.head[:0], int64(len(data)), 16)
	ls.head = append(ls.head, "\r\n"...)
	ls.pieces = append(ls.pieces[:0], ex.streamHeadBytes, ls.head, data, []byte("\r\n"))
	ex.streamHeadBytes = ex.streamHeadBytes[:0]
	if _, err := cl.c.Writev(ls.pieces); err != nil {
		cl.c.Close()
	}
	ex.streamed += int64(len(data))
	if limit := h.opts.MaxResponseBytes; limit > 0 && ex.streamed > limit {
		ex.dropUpstream()
		ex.streamEnd(fmt.Errorf("streamed answer exceeds the %d-byte limit", limit))
		return false
	}
	return true
}

// streamEnd ends a streamed answer the backend ended (readErr nil) or
// broke off: the last chunk and the trailers, which carry the version at
// the end.
func (ex *exchange) streamEnd(readErr error) {
	h, cl, ls := ex.cl.s.h, ex.cl, ex.cl.ls
	errText := ""
	if readErr != nil {
		errText = readErr.Error()
	}
	changed := ex.resp.Finish(readErr == nil, errText)
	if readErr == nil {
		h.front.Latency.Observe(time.Since(ex.cc.start).Seconds())
		h.countTokens(ex.resp.Backend, ex.tail)
	}
	t := append(ls.head[:0], "0\r\nX-Model-Version-End: "...)
	t = strconv.AppendInt(t, ex.resp.Backend.Version(), 10)
	t = append(t, "\r\nX-Version-Changed: "...)
	t = strconv.AppendBool(t, changed)
	ls.head = append(t, "\r\n\r\n"...)
	ex.end()
	if cl.gone {
		return
	}
	ls.pieces = append(ls.pieces[:0], ex.streamHeadBytes, ls.head)
	if _, err := cl.c.Writev(ls.pieces); err != nil || cl.rc.Response.ConnectionClose() {
		cl.c.Close()
		return
	}
	cl.last = time.Now()
	if cl.c.InboundBuffered() > 0 {
		cl.c.Wake(nil)
	}
}

// abortStream ends a streamed answer the front gives up (its deadline
// passed, or the front closed): the backend stops, and the client's
// connection closes, since the answer cannot end cleanly.
func (ex *exchange) abortStream() {
	ex.dropUpstream()
	ex.resp.FinishCanceled()
	ex.end()
	if !ex.cl.gone {
		ex.cl.c.Close()
	}
}

// answeredTooLong answers a request whose backend answer is over the
// limit (why): 502, or another attempt when the status asks for one
// (start is what came of the answer, kept as its message).
func (ex *exchange) answeredTooLong(status int, contentType, start []byte, why string) {
	h, rc := ex.cl.s.h, &ex.cl.rc
	b := ex.b
	ex.b = nil
	if h.g.Answered(&ex.a, b, ex.sent, status, start[:min(len(start), 4096)]) {
		ex.goSlow()
		return
	}
	resp := gateway.NewResponse(&ex.a, b, ex.sent, ex.epoch)
	h.answerHead(rc, resp, status, contentType)
	resp.Finish(false, why)
	writeError(rc, fasthttp.StatusBadGateway, "backend "+b.ID()+": read answer: "+why, "", "bad_gateway")
	ex.finish()
}

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
