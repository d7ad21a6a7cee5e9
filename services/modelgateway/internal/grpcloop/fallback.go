package grpcloop

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/net/http2/hpack"
)

// A call the loops do not run themselves goes to the fallback handler
// (grpc-go's server) as an HTTP/2 request on a goroutine: its body comes
// from the loop through a pipe, whose reads give the client its window
// back, and its answer goes to the loop at each Flush, which waits until
// flow control let it go. The handler sees what net/http's HTTP/2 server
// would give it.

// fallbackState is a stream's call in the fallback handler.
type fallbackState struct {
	body   *bodyPipe
	cancel context.CancelFunc
}

// abort ends the handler's call: the client reset the stream or left.
func (fb *fallbackState) abort(why error) {
	fb.cancel()
	fb.body.close(why)
}

// startFallback hands a stream to the fallback handler.
func (cn *conn) startFallback(st *stream) {
	ctx, cancel := context.WithCancel(context.Background())
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, cn.c.LocalAddr())
	hdr := make(http.Header, len(st.fields))
	host := ""
	for _, f := range st.fields {
		if strings.HasPrefix(f.Name, ":") {
			if f.Name == ":authority" {
				host = f.Value
			}
			continue
		}
		k := http.CanonicalHeaderKey(f.Name)
		hdr[k] = append(hdr[k], f.Value)
	}
	u, err := url.ParseRequestURI(st.path)
	if err != nil {
		u = &url.URL{Path: st.path}
	}
	body := &bodyPipe{el: cn.l.el, st: st}
	body.cond.L = &body.mu
	req := (&http.Request{
		Method: st.method, URL: u, RequestURI: st.path, Proto: "HTTP/2.0", ProtoMajor: 2, Header: hdr,
		Host: host, RemoteAddr: cn.c.RemoteAddr().String(), ContentLength: -1, Body: body,
	}).WithContext(ctx)
	st.fb = &fallbackState{body: body, cancel: cancel}
	st.fields = nil
	if st.remoteEnded {
		body.close(nil)
	}
	rw := &respWriter{st: st, el: cn.l.el, stopped: cn.s.stopped, header: http.Header{}}
	cn.s.handlers.Add(1)
	go func() {
		defer cn.s.handlers.Done()
		defer cancel()
		cn.s.opts.Fallback.ServeHTTP(rw, req)
		rw.push(true)
	}()
}

// bodyPipe is a fallback call's request body: the loop pushes, the
// handler reads.
type bodyPipe struct {
	el gnet.EventLoop
	st *stream // only the loop touches it

	mu   sync.Mutex
	cond sync.Cond
	buf  bytes.Buffer
	err  error // io.EOF once the client ended its side
	// read counts the bytes read and not yet given back to the client's
	// window; only the handler's goroutine touches it.
	read int64
}

var errBodyClosed = errors.New("grpcloop: body closed")

// push adds data the client sent, on the loop.
func (b *bodyPipe) push(p []byte) {
	b.mu.Lock()
	if b.err == nil {
		b.buf.Write(p)
	}
	b.mu.Unlock()
	b.cond.Signal()
}

// close ends the body: nil for the client's end of it.
func (b *bodyPipe) close(err error) {
	if err == nil {
		err = io.EOF
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *bodyPipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	for b.buf.Len() == 0 && b.err == nil {
		b.cond.Wait()
	}
	if b.buf.Len() == 0 {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	n, _ := b.buf.Read(p)
	b.mu.Unlock()
	b.read += int64(n)
	if b.read >= window/4 {
		// The handler took these bytes: the client may send as many more.
		give := b.read
		b.read = 0
		b.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			if st := b.st; !st.closed {
				st.cn.giveBack(st, give)
				st.cn.flush()
			}
			return nil
		}))
	}
	return n, nil
}

func (b *bodyPipe) Close() error {
	b.close(errBodyClosed)
	return nil
}

// respWriter is the fallback handler's http.ResponseWriter: only the
// handler's goroutine uses it.
type respWriter struct {
	st       *stream // only the loop touches it
	el       gnet.EventLoop
	stopped  <-chan struct{} // closed when the loops stopped
	header   http.Header
	head     http.Header // the header as it was at WriteHeader
	code     int
	wrote    bool
	headSent bool
	buf      []byte
}

var _ http.Flusher = (*respWriter)(nil)

func (rw *respWriter) Header() http.Header { return rw.header }

func (rw *respWriter) WriteHeader(code int) {
	if rw.wrote {
		return
	}
	rw.wrote, rw.code, rw.head = true, code, rw.header.Clone()
}

func (rw *respWriter) Write(p []byte) (int, error) {
	rw.WriteHeader(http.StatusOK)
	rw.buf = append(rw.buf, p...)
	return len(p), nil
}

// Flush sends what was written, and waits until it went.
func (rw *respWriter) Flush() { rw.push(false) }

// push hands the head, when not sent yet, and what was written to the
// loop; end ends the stream after it, with the trailers the handler set.
// Unless it ends the stream, it waits until flow control let it all go.
func (rw *respWriter) push(end bool) {
	rw.WriteHeader(http.StatusOK)
	var head []hpack.HeaderField
	if !rw.headSent {
		head, rw.headSent = headFields(rw.code, rw.head), true
	}
	data := rw.buf
	rw.buf = nil
	var trailers []hpack.HeaderField
	var done chan struct{}
	if end {
		trailers = trailerFields(rw.header, rw.head)
	} else {
		done = make(chan struct{})
	}
	st := rw.st
	err := rw.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		cn := st.cn
		if st.closed || cn.gone {
			if done != nil {
				close(done)
			}
			return nil
		}
		if head != nil {
			st.answered = true
			cn.writeHeaders(st, head, false)
		}
		if done != nil {
			st.flushed = append(st.flushed, done)
		}
		cn.queue(st, data, trailers)
		cn.flush()
		return nil
	}))
	if err == nil && done != nil {
		select {
		case <-done:
		case <-rw.stopped: // the loops stopped before they sent it
		}
	}
}

// headFields are an answer's header fields: its status and the header
// but its trailers and HTTP/1's connection fields.
func headFields(code int, h http.Header) []hpack.HeaderField {
	fields := []hpack.HeaderField{{Name: ":status", Value: strconv.Itoa(code)}}
	for k, vv := range h {
		switch k {
		case "Trailer", "Connection", "Keep-Alive", "Transfer-Encoding", "Upgrade", "Proxy-Connection":
			continue
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vv {
			fields = append(fields, hpack.HeaderField{Name: strings.ToLower(k), Value: v})
		}
	}
	return fields
}

// trailerFields are the trailers a handler set: the fields it declared
// in its head's Trailer, and those named with http.TrailerPrefix. The
// result is not nil, for it ends the stream.
func trailerFields(h, head http.Header) []hpack.HeaderField {
	fields := []hpack.HeaderField{}
	for _, decl := range head["Trailer"] {
		for _, k := range strings.Split(decl, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			for _, v := range h[k] {
				fields = append(fields, hpack.HeaderField{Name: strings.ToLower(k), Value: v})
			}
		}
	}
	for k, vv := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			for _, v := range vv {
				fields = append(fields, hpack.HeaderField{Name: strings.ToLower(name), Value: v})
			}
		}
	}
	return fields
}
