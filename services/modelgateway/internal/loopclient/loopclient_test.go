package loopclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopboot"
)

// engine is a gnet engine that hands the events of the connections
// loopclient registers to them, as the gRPC front's does.
type engine struct {
	gnet.BuiltinEventEngine
	booted chan gnet.Engine
	loops  chan gnet.EventLoop
}

func (e *engine) OnBoot(eng gnet.Engine) gnet.Action {
	e.booted <- eng
	return gnet.None
}

func (e *engine) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if lc, ok := c.Context().(*Conn); ok {
		return lc.OnOpen(c)
	}
	e.loops <- c.EventLoop() // the test's own connection: its loop
	return nil, gnet.None
}

func (e *engine) OnTraffic(c gnet.Conn) gnet.Action {
	if lc, ok := c.Context().(*Conn); ok {
		return lc.OnTraffic(c)
	}
	return gnet.None
}

func (e *engine) OnClose(c gnet.Conn, err error) gnet.Action {
	if lc, ok := c.Context().(*Conn); ok {
		return lc.OnClose(c, err)
	}
	return gnet.None
}

// startLoop runs an engine and returns one of its loops.
func startLoop(t *testing.T) gnet.EventLoop {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := &engine{booted: make(chan gnet.Engine, 1), loops: make(chan gnet.EventLoop, 1)}
	done := make(chan error, 1)
	go func() { done <- gnet.Run(e, "tcp://"+addr, gnet.WithLogger(loopboot.Logger(zap.NewNop()))) }()
	eng := <-e.booted
	t.Cleanup(func() {
		eng.Stop(context.Background())
		<-done
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return <-e.loops
}

// event is what a waiter heard.
type event struct {
	kind        string // answered, too long, failed
	status      int
	contentType string
	body        string // the body, why, or the error
	err         error
}

type waiter chan event

func (w waiter) Answered(status int, contentType, body []byte) {
	w <- event{kind: "answered", status: status, contentType: string(contentType), body: string(body)}
}

func (w waiter) TooLong(status int, contentType []byte, why string) {
	w <- event{kind: "too long", status: status, contentType: string(contentType), body: why}
}

func (w waiter) Failed(err error) { w <- event{kind: "failed", body: err.Error(), err: err} }

// scriptedBackend answers each request it reads with the next of
// answers, as raw bytes; "" closes the connection instead.
type scriptedBackend struct {
	addr    string
	accepts atomic.Int64
	gotEOF  chan struct{}
}

func startBackend(t *testing.T, answers ...string) *scriptedBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b := &scriptedBackend{addr: ln.Addr().String(), gotEOF: make(chan struct{}, 8)}
	next := make(chan string, len(answers))
	for _, a := range answers {
		next <- a
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepts.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						if errors.Is(err, io.EOF) {
							b.gotEOF <- struct{}{}
						}
						return
					}
					io.Copy(io.Discard, req.Body)
					var a string
					select {
					case a = <-next:
					default:
						// No answer left: hold the request until the
						// client goes.
						io.Copy(io.Discard, br)
						b.gotEOF <- struct{}{}
						return
					}
					if a == "" {
						return
					}
					io.WriteString(c, a)
				}
			}()
		}
	}()
	return b
}

// send runs Send on el and returns the exchange's Conn.
func send(el gnet.EventLoop, p *Pool, w *backend.Wire, key, body string, wt Waiter) *Conn {
	got := make(chan *Conn, 1)
	el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		got <- p.Send(w, key, []byte(body), wt)
		return nil
	}))
	return <-got
}

func hear(t *testing.T, w waiter) event {
	t.Helper()
	select {
	case ev := <-w:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s")
	}
	return event{}
}

func wire(addr string) *backend.Wire {
	return &backend.Wire{Addr: addr, Head: []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n")}
}

func TestAnswers(t *testing.T) {
	el := startLoop(t)
	const json = "Content-Type: application/json\r\n"
	tests := []struct {
		name   string
		answer string
		want   event
		kept   bool // the connection serves the next request
	}{
		{"with a length", "HTTP/1.1 200 OK\r\n" + json + "Content-Length: 2\r\n\r\n{}", event{kind: "answered", status: 200, contentType: "application/json", body: "{}"}, true},
		{"in chunks after 100 Continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\n" + json + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1\r\n \r\n0\r\n\r\n", event{kind: "answered", status: 503, contentType: "application/json", body: "{} "}, true},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", event{kind: "answered", status: 200, body: "{}"}, false},
		{"over the limit, with a length", "HTTP/1.1 200 OK\r\n" + json + "Content-Length: 20\r\n\r\n", event{kind: "too long", status: 200, contentType: "application/json", body: "answer of 20 bytes exceeds the 10-byte limit"}, false},
		{"over the limit, in chunks", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n123456\r\n6\r\n123456\r\n0\r\n\r\n", event{kind: "too long", status: 200, body: "answer exceeds the 10-byte limit"}, false},
		{"no length", "HTTP/1.1 200 OK\r\n\r\n{}", event{kind: "failed", body: errNoLength.Error()}, false},
		{"closed before the answer", "", event{kind: "failed", body: errClosed.Error()}, false},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", event{kind: "failed", body: h1.ErrFraming.Error()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBackend(t, tt.answer, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
			p := New(10, time.Second).Pool(el)
			w, bw := make(waiter, 2), wire(b.addr)
			send(el, p, bw, "k", `{"x":1}`, w)
			got := hear(t, w)
			got.err = nil
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			send(el, p, bw, "", "{}", w)
			if next := hear(t, w); next.kind != "answered" || next.body != "next" {
				t.Errorf("next request: %+v, want answered next", next)
			}
			wantAccepts := int64(2)
			if tt.kept {
				wantAccepts = 1
			}
			if got := b.accepts.Load(); got != wantAccepts {
				t.Errorf("backend accepted %d connections for two requests, want %d", got, wantAccepts)
			}
		})
	}
}

func TestDialFails(t *testing.T) {
	el := startLoop(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	w := make(waiter, 1)
	send(el, New(0, time.Second).Pool(el), wire(addr), "", "{}", w)
	if got := hear(t, w); got.kind != "failed" || !strings.Contains(got.body, "dial "+addr) {
		t.Errorf("send to a closed port: %+v, want failed naming the dial", got)
	}
}

// TestDrop: a dropped exchange's connection is closed, so that the
// backend sees its caller go; the waiter hears nothing.
func TestDrop(t *testing.T) {
	el := startLoop(t)
	b := startBackend(t) // holds every request
	w := make(waiter, 1)
	p := New(0, time.Second).Pool(el)
	c := send(el, p, wire(b.addr), "", "{}", w)
	for b.accepts.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		c.Drop()
		return nil
	}))
	select {
	case <-b.gotEOF:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend did not see the dropped exchange's connection close")
	}
	select {
	case ev := <-w:
		t.Errorf("a dropped exchange's waiter heard %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}
