// Package loopclient posts chat requests to plain-HTTP backends from a
// gnet event loop and reads their answers there, over kept-alive
// HTTP/1.1 connections registered on that loop: the gRPC front's Chat on
// the event loop sends through it, so that a call and its backend
// exchange never leave the loop that read the call. Only non-streamed
// answers are read (gRPC Chat is unary); the HTTP front's exchange
// (openaihttp) relays streamed ones itself.
package loopclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
)

// A Waiter hears, on the loop, how its request ended: exactly one of its
// methods is called, unless the request was dropped first.
type Waiter interface {
	// Answered takes a whole answer: its status, content type and body
	// (dechunked). Both slices are valid during the call only.
	Answered(status int, contentType, body []byte)
	// TooLong takes an answer whose body went over the client's limit:
	// its status and content type, and why, in the words of
	// gateway.ReadAnswer.
	TooLong(status int, contentType []byte, why string)
	// Failed takes a request that got no answer.
	Failed(err error)
}

// Client keeps each loop's backend connections.
type Client struct {
	// MaxAnswer bounds an answer's body (0: no bound).
	MaxAnswer int64
	// DialTimeout bounds connecting to a backend.
	DialTimeout time.Duration

	mu    sync.Mutex
	pools map[gnet.EventLoop]*Pool
}

// New returns a client whose answers are bounded by maxAnswer bytes.
func New(maxAnswer int64, dialTimeout time.Duration) *Client {
	return &Client{MaxAnswer: maxAnswer, DialTimeout: dialTimeout, pools: map[gnet.EventLoop]*Pool{}}
}

// Pool is el's pool; only el may use it.
func (cl *Client) Pool(el gnet.EventLoop) *Pool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	p := cl.pools[el]
	if p == nil {
		p = &Pool{cl: cl, el: el, idle: map[*backend.Wire][]*Conn{}}
		cl.pools[el] = p
	}
	return p
}

// idleTimeout closes a backend connection idle this long: servers close
// theirs after a few seconds anyway.
const idleTimeout = 90 * time.Second

// maxAnswerHead bounds the head of a backend's answer.
const maxAnswerHead = 64 << 10

// Pool is one loop's backend connections and scratch buffers.
type Pool struct {
	cl   *Client
	el   gnet.EventLoop
	idle map[*backend.Wire][]*Conn
	// head, pieces and answer are scratch: a request's head, what one
	// write sends, a dechunked answer.
	head   []byte
	pieces [][]byte
	answer []byte
	// swept is when the idle connections were last looked at.
	swept time.Time
}

// Conn is a backend connection on a loop, and the exchange it carries.
type Conn struct {
	p     *Pool
	w     *backend.Wire
	c     gnet.Conn // nil while it is dialled
	wt    Waiter    // whom the answer goes to; nil when idle
	frame h1.Frame
	// framed counts the bytes of the answer framed so far; need, when
	// set, is how many the answer takes (its head gave the length).
	framed, need int
	// pending is the request waiting for the connection to open.
	pending   [2][]byte
	idleSince time.Time
}

// Send posts body (JSON) to w's chat path with routingKey, for wt, which
// hears of the answer on the loop: later, or before Send returns when the
// write to a kept-alive connection failed (wt.Failed). body must stay as
// it is until wt hears, or until Drop. The Conn returned is the
// exchange's, for Drop until wt hears.
func (p *Pool) Send(w *backend.Wire, routingKey string, body []byte, wt Waiter) *Conn {
	head := append(p.head[:0], w.Head...)
	if routingKey != "" {
		head = append(head, "X-Routing-Key: "...)
		head = h1.AppendHeaderValue(head, routingKey)
		head = append(head, "\r\n"...)
	}
	head = append(head, "Content-Length: "...)
	head = strconv.AppendInt(head, int64(len(body)), 10)
	head = append(head, "\r\n\r\n"...)
	p.head = head
	if c := p.takeIdle(w); c != nil {
		c.wt = wt
		p.pieces = append(p.pieces[:0], head, body)
		// gnet keeps what the socket does not take at once.
		if _, err := c.c.Writev(p.pieces); err != nil {
			c.wt = nil
			c.c.Close()
			wt.Failed(err)
		}
		return c
	}
	c := &Conn{p: p, w: w, wt: wt, frame: h1.Frame{MaxHead: maxAnswerHead}}
	c.pending = [2][]byte{append([]byte(nil), head...), body}
	c.dial()
	return c
}

// dial connects off the loop; the connection is registered on the
// pool's loop, which opens it (OnOpen).
func (c *Conn) dial() {
	p := c.p
	addr, timeout := c.w.Addr, p.cl.DialTimeout
	go func() {
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			var res <-chan gnet.RegisteredResult
			if res, err = p.el.Enroll(gnet.NewContext(context.Background(), c), conn); err != nil {
				conn.Close()
			} else if r := <-res; r.Err != nil {
				err = r.Err
			}
		}
		if err != nil {
			p.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				if c.c == nil && c.wt != nil {
					c.detach().Failed(fmt.Errorf("dial %s: %w", addr, err))
				}
				return nil
			}))
		}
	}()
}

// Drop gives up the exchange: a connection carrying it is closed, so that
// the backend sees its caller go and stops generating; one still dialled
// joins the pool once open.
func (c *Conn) Drop() {
	if c.wt == nil {
		return
	}
	c.wt = nil
	c.pending = [2][]byte{}
	if c.c != nil {
		c.c.Close()
	}
}

// detach ends c's hold on its waiter, which it returns.
func (c *Conn) detach() Waiter {
	wt := c.wt
	c.wt = nil
	return wt
}

// OnOpen sends the request that dialled c, or keeps c for the next one
// when that request was dropped.
func (c *Conn) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c.c = gc
	if c.wt == nil {
		c.p.putIdle(c)
		return nil, gnet.None
	}
	p := c.p
	p.pieces = append(p.pieces[:0], c.pending[0], c.pending[1])
	c.pending = [2][]byte{}
	if _, err := gc.Writev(p.pieces); err != nil {
		c.detach().Failed(err)
		return nil, gnet.Close
	}
	return nil, gnet.None
}

var (
	errClosed   = errors.New("backend closed the connection before its answer was whole")
	errNoLength = errors.New("answer without a length, ending with the connection")
)

// OnClose drops an idle connection from the pool, and fails the request
// of one cut short.
func (c *Conn) OnClose(gnet.Conn, error) gnet.Action {
	if c.wt == nil {
		c.p.dropIdle(c)
		return gnet.None
	}
	c.detach().Failed(errClosed)
	return gnet.None
}

// OnTraffic frames the answer as it arrives and hands it to its waiter
// once whole.
func (c *Conn) OnTraffic(gc gnet.Conn) gnet.Action {
	if c.wt == nil {
		return gnet.Close // bytes nobody asked for
	}
	limit := c.p.cl.MaxAnswer
	for {
		if c.need > 0 && gc.InboundBuffered() < c.need {
			return gnet.None
		}
		c.need = 0
		buf, _ := gc.Peek(-1)
		n, ended, err := c.frame.Consume(buf[c.framed:])
		c.framed += n
		if err != nil {
			c.detach().Failed(err)
			return gnet.Close
		}
		if !ended {
			// A body that cannot fit is refused as soon as its length
			// (or, in chunks, its size so far) says so.
			if !c.frame.InHead() && limit > 0 {
				hd := c.frame.Head
				if (!hd.Chunked && hd.Length > limit) || (hd.Chunked && int64(c.framed) > 2*limit+maxAnswerHead) {
					length := hd.Length
					if hd.Chunked {
						length = -1
					}
					c.detach().TooLong(hd.Status, buf[hd.ContentType.Start:hd.ContentType.End], gateway.TooLong(length, limit))
					return gnet.Close
				}
			}
			if left := c.frame.BodyLeft(); left > 0 {
				c.need = c.framed + int(left)
			}
			return gnet.None
		}
		hd := c.frame.Head
		if hd.Status == 0 {
			// A request line where a status line belongs: the framer
			// reads both.
			c.detach().Failed(h1.ErrFraming)
			return gnet.Close
		}
		if hd.Status < 200 {
			// 100 Continue and its kind: the answer follows.
			gc.Discard(c.framed)
			c.framed = 0
			continue
		}
		if !hd.HasLength && !hd.Chunked && hd.Status != 204 && hd.Status != 304 {
			// A body that runs to the connection's end (HTTP/1.0's
			// way) is left to the gateway's other client.
			c.detach().Failed(errNoLength)
			return gnet.Close
		}
		msg := buf[:c.framed]
		contentType, body := msg[hd.ContentType.Start:hd.ContentType.End], msg[c.frame.HeadLen:]
		keep := !hd.Close
		if hd.Chunked {
			p := c.p
			body, err = h1.Dechunk(p.answer[:0], body, limit)
			p.answer = keepScratch(body)
			switch {
			case errors.Is(err, h1.ErrTooLong):
				c.detach().TooLong(hd.Status, contentType, gateway.TooLong(-1, limit))
				return gnet.Close
			case err != nil:
				c.detach().Failed(err)
				return gnet.Close
			}
		} else if limit > 0 && int64(len(body)) > limit {
			c.detach().TooLong(hd.Status, contentType, gateway.TooLong(int64(len(body)), limit))
			return gnet.Close
		}
		c.detach().Answered(hd.Status, contentType, body)
		gc.Discard(c.framed)
		c.framed = 0
		if !keep || gc.InboundBuffered() > 0 {
			// More bytes than the answer: the framing cannot be trusted.
			return gnet.Close
		}
		c.p.putIdle(c)
		return gnet.None
	}
}

// keepScratch keeps a scratch buffer for the next answer unless it grew
// past what is worth holding on to for each loop.
func keepScratch(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b
}

func (p *Pool) takeIdle(w *backend.Wire) *Conn {
	list := p.idle[w]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	p.idle[w] = list[:len(list)-1]
	return c
}

func (p *Pool) putIdle(c *Conn) {
	c.framed, c.need = 0, 0
	now := time.Now()
	c.idleSince = now
	p.idle[c.w] = append(p.idle[c.w], c)
	// Looked at as connections come back, not on a timer: a loop with
	// no traffic keeps its few until the backends close them.
	if now.Sub(p.swept) > idleTimeout/3 {
		p.swept = now
		p.sweepIdle(now)
	}
}

func (p *Pool) dropIdle(c *Conn) {
	list := p.idle[c.w]
	for i, x := range list {
		if x == c {
			p.idle[c.w] = append(list[:i], list[i+1:]...)
			return
		}
	}
}

// sweepIdle closes the connections idle too long.
func (p *Pool) sweepIdle(now time.Time) {
	var stale []*Conn
	for _, list := range p.idle {
		for _, c := range list {
			if now.Sub(c.idleSince) > idleTimeout {
				stale = append(stale, c)
			}
		}
	}
	for _, c := range stale {
		c.c.Close() // OnClose takes it out of the pool
	}
}
