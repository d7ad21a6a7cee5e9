package chrome

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
)

// The guest's browser is as trusted as the pages the agent opened in it: a
// page with a title or a document of hundreds of megabytes makes DevTools
// answer with a message that size. chromedp's own websocket client
// (chromedp/remote) reads messages of up to 256 MiB, a bound no option
// changes, and decoding holds as much again, per episode evaluating. This
// transport reads over gorilla/websocket with a read limit of maxMessage
// bytes per message and drops the connection past it, so a getter fails,
// naming the bound, instead.

const (
	// wsDialTimeout bounds the TCP connect and the handshake, as
	// chromedp/remote's default does.
	wsDialTimeout = 10 * time.Second
	// wsWriteTimeout bounds one message's write: a browser that stops
	// reading must not block the connection's writer for ever.
	wsWriteTimeout = 10 * time.Second
	// maxHandshake bounds the handshake's answer (status line and headers).
	maxHandshake = 64 << 10
)

// errMessageTooBig is a message over the connection's bound.
var errMessageTooBig = errors.New("message too big")

// wsConn is a client websocket connection to a DevTools endpoint; it
// implements chromedp.Transport. One goroutine reads (chromedp's reader)
// while others write.
type wsConn struct {
	conn *websocket.Conn
	max  int64
	wmu  sync.Mutex // gorilla allows one writer at a time

	closeOnce sync.Once
	closeErr  error
	debugf    func(string, ...any)

	// failure is why this side dropped the connection (a message over the
	// bound, a protocol error), for the errors of the calls that fail with
	// it: chromedp reports them as its context's cancellation.
	failure atomic.Pointer[error]
}

// failed records err as why the connection dropped, closes it and
// returns err.
func (c *wsConn) failed(err error) error {
	c.failure.CompareAndSwap(nil, &err)
	c.Close()
	return err
}

// dropped is why this side dropped the connection, or nil.
func (c *wsConn) dropped() error {
	if p := c.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// handshakeConn bounds what the handshake may read; lift removes the
// bound for the frames that follow.
type handshakeConn struct {
	net.Conn
	n      int64
	lifted atomic.Bool
}

func (h *handshakeConn) Read(p []byte) (int, error) {
	if h.lifted.Load() {
		return h.Conn.Read(p)
	}
	if h.n <= 0 {
		return 0, fmt.Errorf("handshake answer over %d bytes", maxHandshake)
	}
	if int64(len(p)) > h.n {
		p = p[:h.n]
	}
	n, err := h.Conn.Read(p)
	h.n -= int64(n)
	return n, err
}

// dialWS connects to a ws:// DevTools address and runs the opening
// handshake, within ctx. Messages read over the connection are bounded by
// max bytes. It sends no Origin header: Chrome refuses a websocket whose
// Origin it was not started to allow.
func dialWS(ctx context.Context, address string, max int64) (*wsConn, error) {
	var hc *handshakeConn
	d := websocket.Dialer{
		HandshakeTimeout: wsDialTimeout,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			conn, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			hc = &handshakeConn{Conn: conn, n: maxHandshake}
			return hc, nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	defer cancel()
	conn, resp, err := d.DialContext(ctx, address, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("websocket handshake with %s: %w", address, err)
	}
	hc.lifted.Store(true)
	conn.SetReadLimit(max)
	return &wsConn{conn: conn, max: max}, nil
}

// SetDebugf sets the protocol logger; chromedp calls it with the
// browser's.
func (c *wsConn) SetDebugf(f func(string, ...any)) { c.debugf = f }

// Read reads the next message and decodes it into msg.
func (c *wsConn) Read(_ context.Context, msg *cdproto.Message) error {
	data, err := c.readMessage()
	if err != nil {
		return err
	}
	if c.debugf != nil {
		c.debugf("<- %s", data)
	}
	if err := jsonv2.Unmarshal(data, msg, chromedp.DefaultUnmarshalOptions); err != nil {
		return c.failed(fmt.Errorf("decode a DevTools message: %w", err))
	}
	return nil
}

// readMessage reads the next message whole, at most c.max bytes of it. A
// message over the bound, or one DevTools does not send (binary), drops
// the connection.
func (c *wsConn) readMessage() ([]byte, error) {
	typ, data, err := c.conn.ReadMessage()
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return nil, c.failed(fmt.Errorf("a message from the browser is over the %d-byte bound: %w", c.max, errMessageTooBig))
	case err != nil:
		if c.dropped() == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			return nil, c.failed(fmt.Errorf("read from the browser: %w", err))
		}
		return nil, err
	case typ != websocket.TextMessage:
		return nil, c.failed(errors.New("read from the browser: protocol error: a binary message (DevTools sends text)"))
	}
	return data, nil
}

// Write encodes msg and sends it as one text message.
func (c *wsConn) Write(_ context.Context, msg *cdproto.Message) error {
	data, err := jsonv2.Marshal(msg, chromedp.DefaultMarshalOptions)
	if err != nil {
		return err
	}
	if c.debugf != nil {
		c.debugf("-> %s", data)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout)); err != nil {
		return err
	}
	return c.conn.WriteMessage(websocket.TextMessage, data)
}

// Close closes the connection, saying so with a close frame.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		// A control frame may be written while a writer is blocked; the
		// frame is a courtesy, the close is what counts.
		_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.closeErr = c.conn.Close()
	})
	return c.closeErr
}

// allocator attaches chromedp to the browser at wsURL over a wsConn, as
// chromedp/remote's allocator does over its own client.
type allocator struct {
	wsURL string
	wg    sync.WaitGroup
	conn  atomic.Pointer[wsConn]
}

// Allocate satisfies chromedp.Allocator.
func (a *allocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	// The connection outlives ctx by the time the tabs take to detach, as
	// with chromedp/remote.
	wctx, cancel := context.WithCancel(context.Background())
	a.wg.Go(func() {
		<-ctx.Done()
		chromedp.Cancel(ctx)
		cancel()
	})
	conn, err := dialWS(wctx, a.wsURL, maxMessage)
	if err != nil {
		return nil, fmt.Errorf("could not dial %q: %w", a.wsURL, err)
	}
	a.conn.Store(conn)
	return chromedp.NewBrowserTransport(wctx, conn, opts...)
}

// dropped is why the connection was dropped by this side, or nil.
func (a *allocator) dropped() error {
	if c := a.conn.Load(); c != nil {
		return c.dropped()
	}
	return nil
}

// Wait satisfies chromedp.Allocator.
func (a *allocator) Wait() { a.wg.Wait() }

// Attaches tells chromedp that the browser runs already: closing the
// contexts leaves it running.
func (a *allocator) Attaches() bool { return true }
