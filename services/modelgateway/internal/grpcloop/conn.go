package grpcloop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

const (
	// window is the flow-control window each stream starts with and
	// connWindow the connection's: the mesh's fixed windows
	// (serverkit/grpcserver).
	window     = 1 << 20
	connWindow = 4 * window
	// maxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS announced.
	maxStreams = 1024
	// maxHeaderList bounds a call's decoded header fields.
	maxHeaderList = 64 << 10
	// maxReadFrame is the largest frame a client may send: HTTP/2's
	// default, which the server does not raise.
	maxReadFrame = 16384
	// maxPingStrikes is how many pings too soon grpc-go's server
	// forgives before it sends GOAWAY ENHANCE_YOUR_CALM.
	maxPingStrikes = 2
	// drainPingWait bounds the wait for the drain ping's answer before
	// the final GOAWAY.
	drainPingWait = time.Second
)

// drainPing is the data of the ping a drain sends between its two
// GOAWAYs, and alivePing that of a keepalive ping.
var (
	drainPing = [8]byte{'d', 'r', 'a', 'i', 'n', 'i', 'n', 'g'}
	alivePing = [8]byte{'a', 'l', 'i', 'v', 'e', '?', '?', '?'}
)

// conn is a client's HTTP/2 connection. Only its loop touches it.
type conn struct {
	s   *Server
	c   gnet.Conn
	l   *loop
	rd  bytes.Reader // the complete frames of this read
	out bytes.Buffer // frames to write when the event is handled
	fr  *http2.Framer

	hdec    *hpack.Decoder
	henc    *hpack.Encoder
	hbuf    bytes.Buffer
	reading *stream // the stream whose header block is being decoded
	listLen int     // bytes of header fields decoded for it
	block   int     // bytes of its header block read so far
	trailer bool    // the block being decoded is a stream's trailers

	preface  bool
	streams  map[uint32]*stream
	lastID   uint32
	sendWin  int64 // what the client lets the server send on the connection
	recvLeft int64 // what the client may still send on it
	initWin  int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame int   // the client's SETTINGS_MAX_FRAME_SIZE
	unacked  int64 // connection-level bytes received and not yet given back
	blocked  []*stream
	gone     bool

	// Keepalive enforcement, as grpc-go's server: a ping sooner than
	// MinPingInterval after the last is a strike, unless the server
	// sent headers or data since.
	lastPing    time.Time
	pingStrikes int
	sentSince   bool
	// Server keepalive: lastRead is when the client last sent anything;
	// pingedAt, when set, is when the server pinged a silent client.
	lastRead time.Time
	pingedAt time.Time

	// drain is 0, then 1 once the first GOAWAY and its ping went (at
	// drainAt), then 2 once the final GOAWAY went.
	drain   int
	drainAt time.Time
	acked   bool
}

func newConn(s *Server, c gnet.Conn, l *loop) *conn {
	cn := &conn{s: s, c: c, l: l, streams: map[uint32]*stream{}, sendWin: 65535, initWin: 65535, maxFrame: 16384,
		recvLeft: connWindow}
	cn.fr = http2.NewFramer(&cn.out, &cn.rd)
	cn.fr.SetMaxReadFrameSize(maxReadFrame)
	cn.fr.SetReuseFrames()
	cn.hdec = hpack.NewDecoder(4096, cn.field)
	cn.hdec.SetMaxStringLength(maxHeaderList)
	cn.henc = hpack.NewEncoder(&cn.hbuf)
	return cn
}

// open returns the server's preface: its settings, and the connection
// window raised to the mesh's.
func (cn *conn) open() []byte {
	cn.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: window},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList})
	cn.fr.WriteWindowUpdate(0, connWindow-65535)
	if cn.s.draining.Load() {
		// Opened during a drain: no call is taken on it.
		cn.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		cn.drain = 2
	}
	out := bytes.Clone(cn.out.Bytes())
	cn.out.Reset()
	return out
}

// closed ends the connection's streams.
func (cn *conn) closed() {
	cn.gone = true
	for _, st := range cn.streams {
		st.reset(errConnClosed)
	}
}

var (
	errConnClosed  = errors.New("connection closed")
	errStreamReset = errors.New("stream reset")
)

// read handles the complete frames the client has sent.
func (cn *conn) read() gnet.Action {
	if cn.s.opts.KeepaliveTime > 0 {
		cn.lastRead, cn.pingedAt = time.Now(), time.Time{}
	}
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
		if n > maxReadFrame {
			return cn.goAway(http2.ErrCodeFrameSize, "frame too large")
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
				cn.refuse(se.StreamID, se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return cn.goAway(http2.ErrCode(ce), "")
			}
			return cn.goAway(http2.ErrCodeProtocol, "")
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
func (cn *conn) frame(f http2.Frame) gnet.Action {
	if cn.reading != nil {
		// A header block continues only in CONTINUATION frames of its
		// stream; the Framer checks the order.
		if c, ok := f.(*http2.ContinuationFrame); ok {
			return cn.headerBlock(c.HeaderBlockFragment(), c.HeadersEnded(), false)
		}
		return cn.goAway(http2.ErrCodeProtocol, "")
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
			return cn.goAway(http2.ErrCodeProtocol, "")
		}
		cn.fr.WriteSettingsAck()
		cn.resume()
	case *http2.PingFrame:
		if f.IsAck() {
			if f.Data == drainPing {
				cn.acked = true
			}
			return gnet.None
		}
		if cn.pingTooSoon(time.Now()) {
			return cn.goAway(http2.ErrCodeEnhanceYourCalm, "too_many_pings")
		}
		cn.fr.WritePing(true, f.Data)
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			cn.sendWin += int64(f.Increment)
		} else if st := cn.streams[f.StreamID]; st != nil {
			st.sendWin += int64(f.Increment)
		}
		cn.resume()
	case *http2.HeadersFrame:
		return cn.headers(f)
	case *http2.DataFrame:
		return cn.data(f)
	case *http2.RSTStreamFrame:
		if st := cn.streams[f.StreamID]; st != nil {
			st.reset(errStreamReset)
		}
	case *http2.GoAwayFrame:
		// The client opens no more streams; it closes the connection
		// once its calls are answered.
	}
	return gnet.None
}

// pingTooSoon counts a ping against grpc-go's keepalive enforcement
// policy and reports whether the client used up its strikes.
func (cn *conn) pingTooSoon(now time.Time) bool {
	if cn.sentSince {
		cn.sentSince, cn.pingStrikes, cn.lastPing = false, 0, now
		return false
	}
	if least := cn.s.opts.MinPingInterval; least > 0 && now.Sub(cn.lastPing) < least {
		cn.pingStrikes++
	}
	cn.lastPing = now
	return cn.pingStrikes > maxPingStrikes
}

// headers starts a stream, or takes a stream's trailers.
func (cn *conn) headers(f *http2.HeadersFrame) gnet.Action {
	if st := cn.streams[f.StreamID]; st != nil || f.StreamID <= cn.lastID {
		// Trailers: gRPC clients send none, but a stream may end with
		// them. They are decoded (HPACK's table depends on it) and
		// dropped; only their END_STREAM counts.
		if !f.StreamEnded() {
			return cn.goAway(http2.ErrCodeProtocol, "")
		}
		cn.reading, cn.listLen, cn.block, cn.trailer = st, 0, 0, true
		if st == nil {
			cn.reading = &stream{id: f.StreamID, cn: cn}
		}
		return cn.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded(), true)
	}
	if f.StreamID%2 == 0 {
		return cn.goAway(http2.ErrCodeProtocol, "")
	}
	cn.lastID = f.StreamID
	st := &stream{id: f.StreamID, cn: cn, sendWin: cn.initWin, recvLeft: window}
	switch {
	case cn.drain == 2:
		// Sent after the final GOAWAY: the client may retry it elsewhere.
		st.refused = http2.ErrCodeRefusedStream
	case len(cn.streams) >= maxStreams:
		st.refused = http2.ErrCodeRefusedStream
	default:
		cn.streams[st.id] = st
		cn.s.active.Add(1)
	}
	cn.reading, cn.listLen, cn.block, cn.trailer = st, 0, 0, false
	return cn.headerBlock(f.HeaderBlockFragment(), f.HeadersEnded(), f.StreamEnded())
}

// headerBlock decodes a piece of the current stream's header block.
func (cn *conn) headerBlock(frag []byte, ended, streamEnded bool) gnet.Action {
	st := cn.reading
	if streamEnded {
		st.remoteEnded = true
	}
	// A header block far past the bound on a call's fields, in bytes or
	// in what they decode to (indexed fields are a byte each), is a flood
	// of CONTINUATION frames (CVE-2023-45288): decoding on would cost the
	// loop without end.
	if cn.block += len(frag); cn.block > 2*maxHeaderList {
		return cn.goAway(http2.ErrCodeEnhanceYourCalm, "header block too large")
	}
	if _, err := cn.hdec.Write(frag); err != nil {
		return cn.goAway(http2.ErrCodeCompression, "")
	}
	if cn.listLen > 4*maxHeaderList {
		return cn.goAway(http2.ErrCodeEnhanceYourCalm, "header list too large")
	}
	if !ended {
		return gnet.None
	}
	cn.reading = nil
	if err := cn.hdec.Close(); err != nil {
		return cn.goAway(http2.ErrCodeCompression, "")
	}
	if st.refused != 0 {
		cn.fr.WriteRSTStream(st.id, st.refused)
		return gnet.None
	}
	if cn.trailer {
		if st.fb != nil {
			st.fb.body.close(nil)
		} else if cn.streams[st.id] == st && !st.closed {
			cn.whole(st)
		}
		return gnet.None
	}
	cn.begin(st)
	return gnet.None
}

// field takes one decoded header field of the stream being read.
func (cn *conn) field(f hpack.HeaderField) {
	st := cn.reading
	cn.listLen += len(f.Name) + len(f.Value) + 32
	if cn.trailer {
		return
	}
	if cn.listLen > maxHeaderList {
		st.tooLarge = true
		return
	}
	switch f.Name {
	case ":method":
		st.method = f.Value
	case ":path":
		st.path = f.Value
	case "content-type":
		st.ctype = f.Value
	case "grpc-timeout":
		st.timeout = f.Value
	case "grpc-encoding":
		st.encoding = f.Value
	}
	st.fields = append(st.fields, f)
}

// begin starts a stream whose header block is whole: a registered method
// waits for its message; any other call goes to the fallback at once.
func (cn *conn) begin(st *stream) {
	if st.closed {
		return
	}
	if st.tooLarge {
		cn.fail(st, status.New(codes.Internal, "header list over "+strconv.Itoa(maxHeaderList)+" bytes"))
		return
	}
	m := cn.s.methods[st.path]
	if m == nil || st.method != "POST" || !grpcContentType(st.ctype) {
		cn.startFallback(st)
		return
	}
	st.m = m
	if st.encoding != "" && st.encoding != "identity" {
		cn.fail(st, status.Newf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", st.encoding))
		return
	}
	if st.timeout != "" {
		d, ok := parseTimeout(st.timeout)
		if !ok {
			cn.fail(st, status.Newf(codes.Internal, "malformed grpc-timeout %q", st.timeout))
			return
		}
		st.deadline = time.Now().Add(d)
	}
	if st.remoteEnded {
		cn.whole(st)
	}
}

// grpcContentType reports whether ct is gRPC's: application/grpc, alone
// or with a subtype after '+' or ';'.
func grpcContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// data takes a DATA frame: flow control, then a registered method's
// message or the fallback's body.
func (cn *conn) data(f *http2.DataFrame) gnet.Action {
	n := int64(f.Header().Length)
	cn.recvLeft -= n
	if cn.recvLeft < 0 {
		return cn.goAway(http2.ErrCodeFlowControl, "")
	}
	cn.unacked += n
	if cn.unacked >= connWindow/4 {
		cn.fr.WriteWindowUpdate(0, uint32(cn.unacked))
		cn.recvLeft += cn.unacked
		cn.unacked = 0
	}
	st := cn.streams[f.StreamID]
	if st == nil || st.closed {
		return gnet.None
	}
	st.recvLeft -= n
	if st.recvLeft < 0 {
		cn.refuse(st.id, http2.ErrCodeFlowControl)
		return gnet.None
	}
	if f.StreamEnded() {
		st.remoteEnded = true
	}
	if st.fb != nil {
		if len(f.Data()) > 0 {
			st.fb.body.push(f.Data())
		}
		// Padding is given back at once; the body's bytes once the
		// handler reads them.
		if pad := n - int64(len(f.Data())); pad > 0 {
			cn.giveBack(st, pad)
		}
		if st.remoteEnded {
			st.fb.body.close(nil)
		}
		return gnet.None
	}
	if st.m == nil || st.answered {
		return gnet.None // refused at its headers
	}
	limit := cn.s.opts.MaxMsgBytes
	if len(st.body) == 0 && st.pooled == nil && len(f.Data()) >= 5 {
		// The message's length comes first: its buffer is taken whole,
		// not grown as the frames come.
		size := int64(binary.BigEndian.Uint32(f.Data()[1:5]))
		if size > int64(limit) {
			cn.tooLarge(st, size)
			return gnet.None
		}
		st.pooled = mem.DefaultBufferPool().Get(int(5 + size))
		st.body = (*st.pooled)[:0]
	}
	if len(st.body)+len(f.Data()) > 5+limit {
		cn.tooLarge(st, int64(len(st.body)+len(f.Data())-5))
		return gnet.None
	}
	st.body = append(st.body, f.Data()...)
	if !st.remoteEnded {
		cn.giveBack(st, n)
		return gnet.None
	}
	cn.whole(st)
	return gnet.None
}

// giveBack returns n bytes of a stream's window to the client, in pieces
// of a quarter window at least.
func (cn *conn) giveBack(st *stream, n int64) {
	st.unacked += n
	if st.unacked >= window/4 {
		cn.fr.WriteWindowUpdate(st.id, uint32(st.unacked))
		st.recvLeft += st.unacked
		st.unacked = 0
	}
}

// tooLarge refuses a message over the limit, as grpc-go does.
func (cn *conn) tooLarge(st *stream, size int64) {
	cn.fail(st, status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, cn.s.opts.MaxMsgBytes))
}

// whole runs a registered method whose message has come.
func (cn *conn) whole(st *stream) {
	if st.m == nil || st.answered || st.begun {
		return
	}
	st.begun = true
	b := st.body
	switch {
	case len(b) == 0:
		cn.fail(st, status.New(codes.Internal, "grpc: a unary call ended without its message"))
		return
	case len(b) < 5 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		cn.fail(st, status.New(codes.Internal, "grpc: a unary call's body is not one whole message"))
		return
	case b[0] != 0:
		cn.fail(st, status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding"))
		return
	}
	if h := st.m.onLoop; h != nil {
		cn.l.begin(st)
		h(&LoopCall{st: st})
		return
	}
	cn.s.dispatch(newCall(st))
}

// stream is one call.
type stream struct {
	id uint32
	cn *conn
	m  *method        // a registered method's; nil for the fallback's
	fb *fallbackState // the fallback's call, once begun

	method, path, ctype, timeout, encoding string
	fields                                 []hpack.HeaderField
	deadline                               time.Time
	tooLarge                               bool
	refused                                http2.ErrCode // refused at its headers

	body     []byte
	pooled   *[]byte // body's buffer, from the pool
	unacked  int64   // stream-level bytes received and not yet given back
	recvLeft int64   // what the client may still send on it
	sendWin  int64

	call  *call // the registered method's run on a worker, once begun
	begun bool  // its message was whole, and it began
	// onEnd is what a call on the loop runs when it ends unanswered.
	onEnd func(error)
	// out is the DATA not yet sent (flow control holds it back); ending,
	// when set, is the trailer block to send after it; flushed are the
	// fallback's writers waiting for out to go.
	out         []byte
	ending      []hpack.HeaderField
	flushed     []chan struct{}
	answered    bool // an answer began
	remoteEnded bool // the client ended its side
	closed      bool // ended or reset: nothing more is sent on it
}

// reset ends a stream the client reset or whose connection closed.
func (st *stream) reset(why error) {
	if st.closed {
		return
	}
	if st.call != nil {
		st.call.cancel()
	}
	if f := st.onEnd; f != nil && !st.answered {
		st.onEnd = nil
		f(context.Canceled)
	}
	if st.fb != nil {
		st.fb.abort(why)
	}
	st.cn.forget(st)
}

// forget drops a stream that ended, for whatever reason.
func (cn *conn) forget(st *stream) {
	if st.closed {
		return
	}
	st.closed = true
	st.onEnd = nil
	cn.l.leave(st)
	st.out, st.ending = nil, nil
	for _, ch := range st.flushed {
		close(ch)
	}
	st.flushed = nil
	st.release()
	if cn.streams[st.id] == st {
		delete(cn.streams, st.id)
		cn.s.active.Add(-1)
	}
}

// release gives back the buffer of a stream's message.
func (st *stream) release() {
	if st.pooled != nil {
		mem.DefaultBufferPool().Put(st.pooled)
	}
	st.pooled, st.body = nil, nil
}

// refuse resets a stream.
func (cn *conn) refuse(id uint32, code http2.ErrCode) {
	cn.fr.WriteRSTStream(id, code)
	if st := cn.streams[id]; st != nil {
		st.reset(errStreamReset)
	}
}

// writeHeaders sends a header block, in CONTINUATION frames past the
// client's frame size.
func (cn *conn) writeHeaders(st *stream, fields []hpack.HeaderField, end bool) {
	cn.hbuf.Reset()
	for _, f := range fields {
		cn.henc.WriteField(f)
	}
	block := cn.hbuf.Bytes()
	first := block[:min(len(block), cn.maxFrame)]
	rest := block[len(first):]
	cn.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(len(rest), cn.maxFrame)
		cn.fr.WriteContinuation(st.id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	cn.sentSince = true
}

// queue adds data to what a stream sends, and sends what flow control
// lets go; trailers, when given, end the stream after the data.
func (cn *conn) queue(st *stream, data []byte, trailers []hpack.HeaderField) {
	st.out = append(st.out, data...)
	if trailers != nil {
		st.ending = trailers
	}
	cn.send(st)
}

// send writes what flow control lets go of a stream's data, and its
// trailers once all of it is gone; a stream that must wait joins the
// blocked ones.
func (cn *conn) send(st *stream) bool {
	for len(st.out) > 0 {
		n := min(int64(len(st.out)), int64(cn.maxFrame), cn.sendWin, st.sendWin)
		if n <= 0 {
			cn.blocked = append(cn.blocked, st)
			return false
		}
		cn.fr.WriteData(st.id, false, st.out[:n])
		cn.sentSince = true
		cn.sendWin -= n
		st.sendWin -= n
		st.out = st.out[n:]
	}
	st.out = st.out[:0]
	for _, ch := range st.flushed {
		close(ch)
	}
	st.flushed = st.flushed[:0]
	if st.ending != nil {
		cn.end(st, st.ending)
	}
	return true
}

// writeMessage writes a message (its 5-byte prefix, then the pieces of
// payload) in DATA frames of the client's frame size, straight from the
// pieces; the windows must take all of it.
func (cn *conn) writeMessage(st *stream, prefix []byte, payload mem.BufferSlice) {
	n := len(prefix) + payload.Len()
	cn.sendWin -= int64(n)
	st.sendWin -= int64(n)
	cn.sentSince = true
	pieces := append(make([][]byte, 0, 1+len(payload)), prefix)
	for _, b := range payload {
		pieces = append(pieces, b.ReadOnlyData())
	}
	for n > 0 {
		size := min(n, cn.maxFrame)
		n -= size
		// A DATA frame's head: length, type 0, no flags, the stream.
		var head [9]byte
		head[0], head[1], head[2] = byte(size>>16), byte(size>>8), byte(size)
		binary.BigEndian.PutUint32(head[5:], st.id)
		cn.out.Write(head[:])
		for size > 0 {
			k := min(size, len(pieces[0]))
			cn.out.Write(pieces[0][:k])
			size -= k
			if pieces[0] = pieces[0][k:]; len(pieces[0]) == 0 {
				pieces = pieces[1:]
			}
		}
	}
}

// end sends a stream's last header block and forgets it.
func (cn *conn) end(st *stream, trailers []hpack.HeaderField) {
	if len(trailers) == 0 {
		cn.fr.WriteData(st.id, true, nil)
	} else {
		cn.writeHeaders(st, trailers, true)
	}
	if !st.remoteEnded {
		// The answer is whole: the client need send no more.
		cn.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
	}
	cn.forget(st)
}

// resume sends what waited for a window that has grown.
func (cn *conn) resume() {
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

// fail ends a call that has sent nothing yet with a status alone: gRPC's
// trailers-only answer.
func (cn *conn) fail(st *stream, s *status.Status) {
	if st.closed || cn.gone || st.answered {
		return
	}
	st.answered = true
	cn.end(st, append(responseHead(st), statusFields(s)...))
}

// responseHead is an answer's first header fields: the request's
// content type mirrored, as grpc-go does. Callers append to it: the
// shared slice is full, so an append copies it.
func responseHead(st *stream) []hpack.HeaderField {
	ct := st.ctype
	if ct == "application/grpc" || !grpcContentType(ct) {
		return grpcHead
	}
	return []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: ct}}
}

var grpcHead = []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}}

// goAway ends the connection for an error of the client's.
func (cn *conn) goAway(code http2.ErrCode, debug string) gnet.Action {
	cn.fr.WriteGoAway(cn.lastID, code, []byte(debug))
	cn.flush()
	return gnet.Close
}

// keepalive pings a client silent for KeepaliveTime, and closes the
// connection of one that stayed silent KeepaliveTimeout after the ping.
func (cn *conn) keepalive(now time.Time) {
	if cn.gone {
		return
	}
	switch {
	case cn.lastRead.IsZero():
		cn.lastRead = now
	case !cn.pingedAt.IsZero():
		if now.Sub(cn.pingedAt) > cn.s.opts.KeepaliveTimeout {
			cn.c.Close()
		}
	case now.Sub(cn.lastRead) >= cn.s.opts.KeepaliveTime:
		cn.fr.WritePing(false, alivePing)
		cn.pingedAt = now
		cn.flush()
	}
}

// drainStep moves a drain on: the first GOAWAY (no stream refused yet)
// with a ping; the final one (streams after lastID refused) once the ping
// came back; the close once no stream is left.
func (cn *conn) drainStep(now time.Time) {
	if cn.gone {
		return
	}
	switch cn.drain {
	case 0:
		cn.fr.WriteGoAway(math.MaxInt32, http2.ErrCodeNo, nil)
		cn.fr.WritePing(false, drainPing)
		cn.drain, cn.drainAt = 1, now
	case 1:
		if cn.acked || now.Sub(cn.drainAt) > drainPingWait {
			cn.fr.WriteGoAway(cn.lastID, http2.ErrCodeNo, nil)
			cn.drain = 2
		}
	}
	if cn.drain == 2 && len(cn.streams) == 0 {
		cn.flush()
		cn.c.Close()
		return
	}
	cn.flush()
}

// flush writes the frames the event made.
func (cn *conn) flush() {
	if cn.out.Len() == 0 || cn.gone {
		cn.out.Reset()
		return
	}
	cn.c.Write(cn.out.Bytes())
	cn.out.Reset()
}
