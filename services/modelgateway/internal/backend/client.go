package backend

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/peerclosed"
)

// The hot path (every chat request) goes through fasthttp's HostClient
// rather than net/http's Transport: the caller's goroutine writes the
// request and reads the answer on a pooled connection itself, with pooled
// request, response and buffers, where net/http hands every request to a
// connection's writeLoop and readLoop goroutines and allocates headers
// maps. Probes and weight-update calls are rare and stay on net/http.

// inlineAnswer is the answer size read in one go when the backend sends a
// Content-Length (every non-streamed answer); longer ones and chunked
// streams are read as the caller reads Body.
const inlineAnswer = 64 << 10

// dialTimeout bounds connecting to a backend.
const dialTimeout = 5 * time.Second

// reuseCheckAfter: a pooled connection idle longer than this is checked
// for a close by the backend (servers drop idle keep-alive connections
// after a few seconds) before a request is written to it; a write to a
// dead connection would otherwise fail the request.
const reuseCheckAfter = 10 * time.Millisecond

func newHostClient(base string) (*fasthttp.HostClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	return &fasthttp.HostClient{
		Addr:  addr,
		IsTLS: u.Scheme == "https",
		Name:  "rolloutmesh-modelgateway",
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			return (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).Dial("tcp", addr)
		},
		// No limit but the backend's max_concurrent, as with net/http.
		MaxConns:               1 << 20,
		MaxIdleConnDuration:    90 * time.Second,
		ConnPoolStrategy:       fasthttp.LIFO,
		StreamResponseBody:     true,
		DisablePathNormalizing: true,
		Transport:              ctxTransport{},
	}, nil
}

// callKey carries the answer being read, as an *answerRef, through
// fasthttp.Request.UserValue to ctxTransport, which has no other way to see
// the caller's context.
type callKey struct{}

// answerRef is an *Answer without its methods: fasthttp closes user values
// that are io.Closers when it resets a request, and Answer is one.
type answerRef Answer

// aLongTimeAgo is a deadline in the past: setting it interrupts any read or
// write in progress on a connection.
var aLongTimeAgo = time.Unix(1, 0)

// ctxTransport is fasthttp's default transport (pool, codec, streamed
// body) plus what it lacks: the caller's context. When the context ends,
// the connection's deadline is moved to the past, which interrupts the
// request wherever it is (writing, waiting for headers, streaming) and
// closes the connection, so the backend sees the caller go away. It also
// skips pooled connections the backend has closed.
type ctxTransport struct{}

func (ctxTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	ref, _ := req.UserValue(callKey{}).(*answerRef)
	a := (*Answer)(ref)
	if a == nil {
		return false, errors.New("backend: request without a call")
	}
	timeout := dialTimeout
	if dl, ok := a.ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	var conn net.Conn
	for conn == nil {
		cc, err := hc.AcquireConn(timeout, false)
		if err != nil {
			return false, err
		}
		if used := cc.LastUseTime(); !used.IsZero() && time.Since(used) > reuseCheckAfter && peerclosed.Closed(cc.Conn()) {
			hc.CloseConn(cc)
			continue
		}
		conn = cc.Conn()
		a.release = func(reuse bool) {
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		}
	}
	if in, ok := a.ctx.(interrupter); ok {
		in.InterruptConn(conn)
		a.in, a.conn = in, conn
	} else if a.ctx.Done() != nil {
		a.stop = context.AfterFunc(a.ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	}
	bw := hc.AcquireWriter(conn)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		a.finishConn(false)
		return false, a.ctxErr(err)
	}
	a.wire.Conn = conn
	br := hc.AcquireReader(&a.wire)
	a.br, a.hc = br, hc
	if err := resp.ReadLimitBody(br, inlineAnswer); err != nil {
		a.finishConn(false)
		return false, a.ctxErr(err)
	}
	a.reusable = !req.ConnectionClose() && !resp.ConnectionClose()
	return false, nil
}

// An interrupter is a context that interrupts a connection itself when it
// ends, as context.AfterFunc does here for any context, but without its
// allocations (the HTTP front's requests are interrupters).
type interrupter interface {
	// InterruptConn moves conn's deadline to the past when the context
	// ends, or now if it has.
	InterruptConn(conn net.Conn)
	// ReleaseConn undoes InterruptConn, and reports whether conn was left
	// alone.
	ReleaseConn(conn net.Conn) bool
}

// Answer is a backend's answer: status and headers are read, Read streams
// the body. The caller must Close it exactly once; until then it holds a
// connection.
type Answer struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// ContentLength is the body length, or -1 when the backend did not
	// say (chunked streams).
	ContentLength int64

	ctx      context.Context
	req      *fasthttp.Request
	resp     *fasthttp.Response
	body     io.Reader
	stop     func() bool
	in       interrupter // with conn, instead of stop
	conn     net.Conn
	release  func(reuse bool)
	hc       *fasthttp.HostClient
	br       *bufio.Reader
	wire     endSeen // what br reads from
	reusable bool    // the exchange allows keep-alive
	eof      bool    // the body was read to its end
	inline   bool    // the body was read with the headers
	closed   bool
	// raw is the body when inline.
	raw []byte
}

// Inline returns the body when it was read whole with the headers (the
// backend sent its length and it is at most 64 KiB): the bytes fasthttp
// read, valid until Close.
func (a *Answer) Inline() ([]byte, bool) { return a.raw, a.inline }

// ContentType is the Content-Type header; it is valid until Close.
func (a *Answer) ContentType() []byte { return a.resp.Header.ContentType() }

// Read reads the body.
func (a *Answer) Read(p []byte) (int, error) {
	if a.eof {
		return 0, io.EOF
	}
	n, err := a.body.Read(p)
	if errors.Is(err, io.EOF) && a.wire.ended && a.resp.Header.ContentLength() == -1 {
		// fasthttp reads a chunked body whose connection closed between
		// two chunks as ended, but a chunked body ends with its last
		// chunk, which needs no read past it: a read that met the close
		// means the backend went away mid-answer.
		return n, io.ErrUnexpectedEOF
	}
	if errors.Is(err, io.EOF) {
		a.eof = true
		return n, io.EOF
	}
	if err != nil {
		err = a.ctxErr(err)
	}
	return n, err
}

// Close ends the answer; the connection goes back to the pool when the
// body was read to its end, and is closed otherwise.
func (a *Answer) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	a.resp.CloseBodyStream()
	a.finishConn((a.eof || a.inline) && a.reusable)
	fasthttp.ReleaseRequest(a.req)
	fasthttp.ReleaseResponse(a.resp)
	a.req, a.resp, a.body, a.raw, a.wire = nil, nil, nil, nil, endSeen{}
	return nil
}

// finishConn returns the connection to the pool or closes it. A
// connection whose context fired may have its deadline in the past: it is
// never reused.
func (a *Answer) finishConn(reuse bool) {
	if a.stop != nil && !a.stop() {
		reuse = false
	}
	if a.in != nil && !a.in.ReleaseConn(a.conn) {
		reuse = false
	}
	a.stop, a.in, a.conn = nil, nil, nil
	if a.br != nil {
		a.hc.ReleaseReader(a.br)
		a.br, a.hc = nil, nil
	}
	if a.release != nil {
		a.release(reuse)
		a.release = nil
	}
}

// endSeen is a backend connection that remembers whether a read met its
// end (the backend closed it).
type endSeen struct {
	net.Conn
	ended bool
}

func (c *endSeen) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.ended = true
	}
	return n, err
}

// ctxErr prefers the caller's context error to the I/O error it caused.
func (a *Answer) ctxErr(err error) error {
	if a.ctx != nil && a.ctx.Err() != nil {
		return a.ctx.Err()
	}
	return err
}

// send posts body to t through hc. ctx ends the request at any point,
// body streaming included.
func send(ctx context.Context, hc *fasthttp.HostClient, t *postTarget, body []byte, routingKey, apiKey string) (*Answer, error) {
	a := &Answer{ctx: ctx, req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
	a.req.SetURI(t.uri)
	a.req.Header.SetMethod(fasthttp.MethodPost)
	a.req.Header.SetContentType("application/json")
	if routingKey != "" {
		a.req.Header.Set("X-Routing-Key", routingKey)
	}
	if apiKey != "" {
		a.req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	a.req.SetBodyRaw(body)
	a.req.SetUserValue(callKey{}, (*answerRef)(a))
	if err := hc.Do(a.req, a.resp); err != nil {
		a.finishConn(false)
		fasthttp.ReleaseRequest(a.req)
		fasthttp.ReleaseResponse(a.resp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("post %s: %w", t.url, err)
	}
	a.StatusCode = a.resp.StatusCode()
	a.ContentLength = int64(a.resp.Header.ContentLength())
	if a.ContentLength < 0 {
		a.ContentLength = -1
	}
	a.body = a.resp.BodyStream()
	// A body read whole with the headers leaves the connection free
	// whether or not the caller reads it all.
	if _, a.inline = a.body.(*bytes.Reader); a.inline {
		// The stream is a reader over fasthttp's body buffer; closing
		// it leaves Body that buffer rather than a copy of it, and the
		// reader works on.
		a.resp.CloseBodyStream()
		a.raw = a.resp.Body()
	}
	return a, nil
}
