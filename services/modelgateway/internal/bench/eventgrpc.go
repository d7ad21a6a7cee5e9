package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/h1"
)

// The event-loop gRPC proxy asks of the gRPC front what the event-loop
// proxy asks of the HTTP one: is the gRPC floor gRPC's, or grpc-go's? It
// does the bare grpc-go proxy's job (bareGRPCMethod: the backend's JSON
// body in as raw bytes, posted to the upstream, the answer's bytes back)
// the way nginx works: on one gnet event loop per CPU, with no goroutine
// per connection or per call. HTTP/2 frames are read and written with
// golang.org/x/net/http2's Framer and HPACK coder; the connection's
// state (streams, flow-control windows, settings) is kept here, as much of
// RFC 9113 as a gRPC server of unary calls needs. A call's body goes to
// the upstream over a kept-alive HTTP/1.1 connection registered on the
// loop that read the call, so a call and its answer never leave it.
//
// It is a measuring stick, not a server to deploy: no deadlines
// (grpc-timeout is not read), no compression, no keepalive pings of its
// own, one method.

const (
	// egMaxMessage bounds a call's message, as grpc-go's default
	// receive limit does.
	egMaxMessage = 4 << 20
	// egWindow is the flow-control window each stream starts with and
	// egConnWindow the connection's: the mesh's fixed windows
	// (serverkit/grpcserver).
	egWindow     = 1 << 20
	egConnWindow = 4 * egWindow
	// egMaxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS it announces.
	egMaxStreams = 1024
	// egMaxHeaderList bounds a call's decoded header fields.
	egMaxHeaderList = 16 << 10
	// egMaxAnswer bounds an upstream's answer.
	egMaxAnswer = 16 << 20
)

type egProxy struct {
	gnet.BuiltinEventEngine
	upstream net.Addr
	host     string
	out      io.Writer
	engine   chan gnet.Engine

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

// egConn is a client's HTTP/2 connection. Only its loop touches it.
type egConn struct {
	c   gnet.Conn
	l   *egLoop
	p   *egProxy
	rd  bytes.Reader // the complete frames of this read
	out bytes.Buffer // frames to write when the event is handled
	fr  *http2.Framer

	hdec    *hpack.Decoder
	henc    *hpack.Encoder
	hbuf    bytes.Buffer
	reading *egStream // the stream whose header block is being decoded
	listLen int       // bytes of header fields decoded for it

	preface  bool
	streams  map[uint32]*egStream
	lastID   uint32
	sendWin  int64 // what the client lets it send on the connection
	initWin  int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame int   // the client's SETTINGS_MAX_FRAME_SIZE
	unacked  int64 // connection-level bytes received and not yet given back
	blocked  []*egStream
	gone     bool
}

// egStream is one call.
type egStream struct {
	id      uint32
	cn      *egConn
	body    []byte
	pooled  *[]byte // body's buffer, from grpc-go's pool
	unacked int64   // stream-level bytes received and not yet given back
	sendWin int64
	// request header fields that matter
	method, path, ctype string
	bad                 bool // a header field was refused
	noMessage           bool // the client ended the stream with its headers
	// out is the answer's DATA payload not yet sent (flow control holds
	// it back); answered is set once an answer or a failure began.
	out      []byte
	answered bool
	closed   bool // ended or reset: nothing more is sent on it
}

// egUpstream is a kept-alive connection to the upstream.
type egUpstream struct {
	c     gnet.Conn
	l     *egLoop
	st    *egStream // the call whose answer it carries; nil when idle
	frame h1.Frame
	seen  int    // bytes of the answer framed so far
	req   []byte // a request waiting for the connection to open
}

func (p *egProxy) OnBoot(eng gnet.Engine) gnet.Action {
	port, err := listenPort(eng)
	if err != nil {
		fmt.Fprintf(os.Stderr, "event gRPC proxy: %v\n", err)
		return gnet.Shutdown
	}
	p.engine <- eng
	fmt.Fprintf(p.out, "ADDR 127.0.0.1:%d\n", port)
	return gnet.None
}

func (p *egProxy) loopOf(c gnet.Conn) *egLoop {
	el := c.EventLoop()
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.loops[el]
	if l == nil {
		l = &egLoop{loop: el}
		p.loops[el] = l
	}
	return l
}

func (p *egProxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if up, ok := c.Context().(*egUpstream); ok {
		up.c = c
		if up.st == nil || up.st.closed {
			// The call went away while the connection was dialled.
			up.st = nil
			up.l.idle = append(up.l.idle, up)
			return nil, gnet.None
		}
		if _, err := c.Write(up.req); err != nil {
			return nil, gnet.Close
		}
		up.req = nil
		return nil, gnet.None
	}
	cn := &egConn{c: c, l: p.loopOf(c), p: p, streams: map[uint32]*egStream{}, sendWin: 65535, initWin: 65535, maxFrame: 16384}
	cn.fr = http2.NewFramer(&cn.out, &cn.rd)
	cn.fr.SetMaxReadFrameSize(16384)
	cn.fr.SetReuseFrames()
	cn.hdec = hpack.NewDecoder(4096, cn.field)
	cn.hdec.SetMaxStringLength(egMaxHeaderList)
	cn.henc = hpack.NewEncoder(&cn.hbuf)
	c.SetContext(cn)
	// The server's preface: its settings, and the connection window
	// raised to the mesh's.
	cn.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: egMaxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: egWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: egMaxHeaderList})
	cn.fr.WriteWindowUpdate(0, egConnWindow-65535)
	out := bytes.Clone(cn.out.Bytes())
	cn.out.Reset()
	return out, gnet.None
}

func (p *egProxy) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch x := c.Context().(type) {
	case *egConn:
		x.gone = true
		for _, st := range x.streams {
			st.closed = true
			st.release()
		}
	case *egUpstream:
		for i, up := range x.l.idle {
			if up == x {
				x.l.idle = append(x.l.idle[:i], x.l.idle[i+1:]...)
				break
			}
		}
		if st := x.st; st != nil {
			x.st = nil
			st.cn.fail(st, codes.Unavailable, "upstream closed the connection")
			st.cn.flush()
		}
	}
	return gnet.None
}

func (p *egProxy) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *egConn:
		return x.read()
	case *egUpstream:
		return x.answer()
	}
	return gnet.Close
}

// read handles the complete frames the client has sent.
func (cn *egConn) read() gnet.Action {
	buf, _ := cn.c.Peek(-1)
	used := 0
	if !cn.preface {
		if len(buf) < len(http2.ClientPreface) {
			if !strings.HasPrefix(http2.ClientPreface, string(buf)) {
				return gnet.Close
			}
			return gnet.None
		}
		if string(buf[:len(http2.ClientPreface)]) != http2.ClientPreface {
			return gnet.Close
		}
		cn.preface = true
		used = len(http2.ClientPreface)
	}
	// The frames read whole: the Framer reads from them and never
	// waits for more.
	end := used
	for len(buf)-end >= 9 {
		n := int(buf[end])<<16 | int(buf[end+1])<<8 | int(buf[end+2])
		if n > 16384 {
			return cn.goAway(http2.ErrCodeFrameSize)
		}
		if len(buf)-end < 9+n {
			break
		}
		end += 9 + n
	}
	cn.rd.Reset(buf[used:end])
	for cn.rd.Len() > 0 {
		f, err := cn.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				cn.reset(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return cn.goAway(http2.ErrCode(ce))
			}
			return cn.goAway(http2.ErrCodeProtocol)
		}
		if a := cn.frame(f); a != gnet.None {
			return a
		}
	}
	if end > 0 {
		// Not Discard(0): gnet reads a count of 0 or less as all of it.
		cn.c.Discard(end)
	}
	cn.flush()
	return gnet.None
}

// frame handles one frame; the frame is valid until the next is read.
func (cn *egConn) frame(f http2.Frame) gnet.Action {
	if cn.reading != nil {
		// A header block continues only in CONTINUATION frames of its
		// stream; the Framer checks the order.
		if c, ok := f.(*http2.ContinuationFrame); ok {
			return cn.headerBlock(c.HeaderBlockFragment(), c.HeadersEnded(), false)
		}
		return cn.goAway(http2.ErrCodeProtocol)
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return gnet.None
		}
		err := f.ForeachSetting(func(s http2.Setting) error {
			switch s.ID {
			case http2.SettingInitialWindowSize:
				delta := int64(s.Val) - cn.initWin
				cn.initWin = int64(s.Val)
				for _, st := range cn.streams {
					st.sendWin += delta
				}
			case http2.SettingMaxFrameSize:
				cn.maxFrame = int(s.Val)
			case http2.SettingHeaderTableSize:
				cn.henc.SetMaxDynamicTableSizeLimit(s.Val)
			}
			return nil
		})
		if err != nil {
			return cn.goAway(http2.ErrCodeProtocol)
		}
		cn.fr.WriteSettingsAck()
		cn.resume()
	case *http2.PingFrame:
		if !f.IsAck() {
			cn.fr.WritePing(true, f.Data)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			cn.sendWin += int64(f.Increment)
		} else if st := cn.streams[f.StreamID]; st != nil {
			st.sendWin += int64(f.Increment)
		}
		cn.resume()
	case *http2.HeadersFrame:
		if f.StreamID%2 == 0 || f.StreamID <= cn.lastID {
			// A client's streams are odd and new; gRPC clients send no
			// trailers.
			return cn.goAway(http2.ErrCodeProtocol)
		}
		cn.lastID = f.StreamID
		st := &egStream{id: f.StreamID, cn: cn, sendWin: cn.initWin}
		if len(cn.streams) >= egMaxStreams {
			st.bad = true
			cn.reset(st.id, http2.ErrCodeRefusedStream)
		} else {
			cn.streams[st.id] = st
		}
		cn.reading, cn.listLen = st, 0
		return cn.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded(), f.StreamEnded())
	case *http2.DataFrame:
		cn.data(f)
	case *http2.RSTStreamFrame:
		if st := cn.streams[f.StreamID]; st != nil {
			st.closed = true
			st.release()
			delete(cn.streams, f.StreamID)
		}
	case *http2.GoAwayFrame:
		// The client opens no more streams; it closes the connection
		// when its calls are answered.
	}
	return gnet.None
}

// headerBlock decodes a piece of the current stream's header block.
func (cn *egConn) headerBlock(frag []byte, ended, streamEnded bool) gnet.Action {
	st := cn.reading
	if streamEnded {
		st.noMessage = true
	}
	if _, err := cn.hdec.Write(frag); err != nil {
		return cn.goAway(http2.ErrCodeCompression)
	}
	if !ended {
		return gnet.None
	}
	cn.reading = nil
	if err := cn.hdec.Close(); err != nil {
		return cn.goAway(http2.ErrCodeCompression)
	}
	if st.closed || cn.streams[st.id] != st {
		return gnet.None
	}
	switch {
	case st.bad:
		cn.fail(st, codes.Internal, "header list too large")
	case st.method != "POST" || !strings.HasPrefix(st.ctype, "application/grpc"):
		cn.fail(st, codes.Internal, "not a gRPC call")
	case st.path != bareGRPCMethod:
		cn.fail(st, codes.Unimplemented, "unknown method "+st.path)
	case st.noMessage:
		cn.fail(st, codes.Internal, "a call without a message")
	}
	return gnet.None
}

// field takes one decoded header field of the stream being read.
func (cn *egConn) field(f hpack.HeaderField) {
	st := cn.reading
	cn.listLen += len(f.Name) + len(f.Value) + 32
	if cn.listLen > egMaxHeaderList {
		st.bad = true
		return
	}
	switch f.Name {
	case ":method":
		st.method = f.Value
	case ":path":
		st.path = f.Value
	case "content-type":
		st.ctype = f.Value
	}
}

// data takes a DATA frame: the call's message, and flow control.
func (cn *egConn) data(f *http2.DataFrame) {
	n := int64(f.Header().Length)
	cn.unacked += n
	if cn.unacked >= egConnWindow/4 {
		cn.fr.WriteWindowUpdate(0, uint32(cn.unacked))
		cn.unacked = 0
	}
	st := cn.streams[f.StreamID]
	if st == nil || st.closed || st.answered {
		return
	}
	if len(st.body)+len(f.Data()) > 5+egMaxMessage {
		cn.fail(st, codes.ResourceExhausted, "message over "+strconv.Itoa(egMaxMessage)+" bytes")
		cn.reset(st.id, http2.ErrCodeCancel)
		return
	}
	if len(st.body) == 0 && st.pooled == nil && len(f.Data()) >= 5 {
		// The message's length comes first: its buffer is taken whole
		// (from grpc-go's pool), not grown as the frames come, which
		// for a screenshot copied it over and over.
		size := 5 + int64(binary.BigEndian.Uint32(f.Data()[1:5]))
		if size > 5+egMaxMessage {
			cn.fail(st, codes.ResourceExhausted, "message over "+strconv.Itoa(egMaxMessage)+" bytes")
			cn.reset(st.id, http2.ErrCodeCancel)
			return
		}
		st.pooled = mem.DefaultBufferPool().Get(int(size))
		st.body = (*st.pooled)[:0]
	}
	st.body = append(st.body, f.Data()...)
	if !f.StreamEnded() {
		st.unacked += n
		if st.unacked >= egWindow/4 {
			cn.fr.WriteWindowUpdate(st.id, uint32(st.unacked))
			st.unacked = 0
		}
		return
	}
	cn.call(st)
}

// call sends a whole call's message to the upstream.
func (cn *egConn) call(st *egStream) {
	defer st.release()
	b := st.body
	if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		if len(b) >= 5 && b[0] != 0 {
			cn.fail(st, codes.Unimplemented, "compressed messages are not taken")
		} else {
			cn.fail(st, codes.Internal, "not one whole gRPC message")
		}
		return
	}
	msg := b[5:]
	l := cn.l
	head := append(l.head[:0], "POST /v1/chat/completions HTTP/1.1\r\nHost: "...)
	head = append(head, cn.p.host...)
	head = append(head, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	head = strconv.AppendInt(head, int64(len(msg)), 10)
	head = append(head, "\r\n\r\n"...)
	l.head = head
	if n := len(l.idle); n > 0 {
		up := l.idle[n-1]
		l.idle = l.idle[:n-1]
		up.st = st
		l.pieces = append(l.pieces[:0], head, msg)
		if _, err := up.c.Writev(l.pieces); err != nil {
			up.st = nil
			up.c.Close()
			cn.fail(st, codes.Unavailable, "write to upstream: "+err.Error())
		}
		return
	}
	up := &egUpstream{l: l, st: st, frame: h1.Frame{MaxHead: eventMaxHead}, req: append(append([]byte(nil), head...), msg...)}
	res, err := l.loop.Register(gnet.NewContext(context.Background(), up), cn.p.upstream)
	if err != nil {
		up.st = nil
		cn.fail(st, codes.Unavailable, "dial upstream: "+err.Error())
		return
	}
	// Only a dial that failed is news; the loop then fails the call.
	go func() {
		if r := <-res; r.Err != nil {
			l.loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				if s := up.st; s != nil {
					up.st = nil
					s.cn.fail(s, codes.Unavailable, "dial upstream: "+r.Err.Error())
					s.cn.flush()
				}
				return nil
			}))
		}
	}()
}

// answer reads the upstream's answer once it is whole and hands it to the
// call it carries.
func (up *egUpstream) answer() gnet.Action {
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
	if up.seen != len(buf) || up.st == nil {
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
	st := up.st
	up.st = nil
	switch {
	case !ok || err != nil:
		st.cn.fail(st, codes.Unavailable, "unreadable upstream answer")
	case h.Status != 200:
		st.cn.fail(st, codes.Unknown, "upstream status "+strconv.Itoa(h.Status))
	default:
		st.cn.answer(st, body)
	}
	st.cn.flush()
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
	if st := up.st; st != nil {
		up.st = nil
		st.cn.fail(st, codes.Unavailable, why)
		st.cn.flush()
	}
	return gnet.Close
}

// answer sends a call's answer: headers, the message as flow control
// lets it go, and the OK trailers after it.
func (cn *egConn) answer(st *egStream, msg []byte) {
	if st.closed || cn.gone {
		return
	}
	st.answered = true
	cn.responseHead()
	cn.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: cn.hbuf.Bytes(), EndHeaders: true})
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	st.out = append(append(st.out[:0], prefix[:]...), msg...)
	cn.send(st)
}

// send writes what flow control lets go of a stream's answer, and its
// trailers once all of it is gone; a stream that must wait joins the
// blocked ones.
func (cn *egConn) send(st *egStream) bool {
	for len(st.out) > 0 {
		n := min(int64(len(st.out)), int64(cn.maxFrame), cn.sendWin, st.sendWin)
		if n <= 0 {
			cn.blocked = append(cn.blocked, st)
			return false
		}
		cn.fr.WriteData(st.id, false, st.out[:n])
		cn.sendWin -= n
		st.sendWin -= n
		st.out = st.out[n:]
	}
	cn.trailers(st, codes.OK, "")
	return true
}

// resume sends what waited for a window that has grown.
func (cn *egConn) resume() {
	blocked := cn.blocked
	cn.blocked = nil
	for i, st := range blocked {
		if st.closed {
			continue
		}
		if !cn.send(st) && cn.sendWin <= 0 {
			cn.blocked = append(cn.blocked, blocked[i+1:]...)
			return
		}
	}
}

// responseHead encodes an answer's header fields into hbuf.
func (cn *egConn) responseHead() {
	cn.hbuf.Reset()
	cn.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	cn.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
}

// fail ends a call that has sent nothing yet with a status alone: gRPC's
// trailers-only answer.
func (cn *egConn) fail(st *egStream, code codes.Code, msg string) {
	if st.closed || cn.gone {
		return
	}
	st.answered = true
	cn.responseHead()
	cn.trailerFields(code, msg)
	cn.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: cn.hbuf.Bytes(), EndHeaders: true, EndStream: true})
	cn.end(st)
}

// trailers ends an answered call.
func (cn *egConn) trailers(st *egStream, code codes.Code, msg string) {
	cn.hbuf.Reset()
	cn.trailerFields(code, msg)
	cn.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: cn.hbuf.Bytes(), EndHeaders: true, EndStream: true})
	cn.end(st)
}

func (cn *egConn) trailerFields(code codes.Code, msg string) {
	cn.henc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(code))})
	if msg != "" {
		// grpc-message is percent-encoded; these messages are ASCII
		// with no '%' but for what the upstream's error said.
		cn.henc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: strings.ReplaceAll(msg, "%", "%25")})
	}
}

// end forgets a stream that was answered in full.
func (cn *egConn) end(st *egStream) {
	st.closed = true
	st.out = nil
	st.release()
	delete(cn.streams, st.id)
}

// release gives back the buffer of a stream's message: gnet copied what
// the upstream's socket did not take at once.
func (st *egStream) release() {
	if st.pooled != nil {
		mem.DefaultBufferPool().Put(st.pooled)
	}
	st.pooled, st.body = nil, nil
}

// reset refuses a stream.
func (cn *egConn) reset(id uint32, code http2.ErrCode) {
	cn.fr.WriteRSTStream(id, code)
	if st := cn.streams[id]; st != nil {
		st.closed = true
		st.release()
		delete(cn.streams, id)
	}
}

// goAway ends the connection for an error of the client's.
func (cn *egConn) goAway(code http2.ErrCode) gnet.Action {
	cn.fr.WriteGoAway(cn.lastID, code, nil)
	cn.flush()
	return gnet.Close
}

// flush writes the frames the event made.
func (cn *egConn) flush() {
	if cn.out.Len() == 0 || cn.gone {
		cn.out.Reset()
		return
	}
	cn.c.Write(cn.out.Bytes())
	cn.out.Reset()
}

// serveEventGRPCProxy serves bareGRPCMethod in front of backend (a base
// URL) until ctx ends, printing "ADDR <host:port>" on out once it listens.
func serveEventGRPCProxy(ctx context.Context, backend string, out io.Writer) error {
	up, err := net.ResolveTCPAddr("tcp", hostPort(backend))
	if err != nil {
		return err
	}
	p := &egProxy{upstream: up, host: hostPort(backend), out: out, engine: make(chan gnet.Engine, 1), loops: map[gnet.EventLoop]*egLoop{}}
	return runLoops(ctx, p, p.engine)
}
