package grpcloop

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// call is a registered method's run: made on the loop once its message
// is whole, run on a worker, answered on the loop.
type call struct {
	s      *Server
	st     *stream // only the loop touches it
	el     gnet.EventLoop
	m      *method
	msg    []byte  // the message, after its 5-byte prefix
	pooled *[]byte // msg's buffer
	fields []hpack.HeaderField
	peer   peer.Peer
	ctx    context.Context
	cancel context.CancelFunc

	// header and trailer are the metadata the handler set.
	mu              sync.Mutex
	header, trailer metadata.MD
}

var _ grpc.ServerTransportStream = (*call)(nil)

// newCall takes a stream's whole message into a call, on the loop.
func newCall(st *stream) *call {
	cn := st.cn
	c := &call{
		s: cn.s, st: st, el: cn.l.el, m: st.m, msg: st.body[5:], pooled: st.pooled, fields: st.fields,
		peer: peer.Peer{Addr: cn.c.RemoteAddr(), LocalAddr: cn.c.LocalAddr()},
	}
	st.pooled, st.body, st.fields = nil, nil, nil
	if st.deadline.IsZero() {
		c.ctx, c.cancel = context.WithCancel(context.Background())
	} else {
		c.ctx, c.cancel = context.WithDeadline(context.Background(), st.deadline)
	}
	st.call = c
	return c
}

// run runs the method's handler through the interceptors, then hands the
// answer to the loop.
func (c *call) run() {
	defer c.s.handlers.Done()
	payload, st := c.handle()
	c.cancel()
	c.mu.Lock()
	header, trailer := c.header, c.trailer
	c.mu.Unlock()
	err := c.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		c.answer(payload, st, header, trailer)
		return nil
	}))
	if err != nil {
		payload.Free() // the loops stopped: nobody to answer
	}
}

func (c *call) handle() (mem.BufferSlice, *status.Status) {
	defer func() {
		if c.pooled != nil {
			mem.DefaultBufferPool().Put(c.pooled)
			c.pooled, c.msg = nil, nil
		}
	}()
	md, err := incoming(c.fields)
	if err != nil {
		return nil, status.New(codes.Internal, err.Error())
	}
	ctx := metadata.NewIncomingContext(c.ctx, md)
	ctx = peer.NewContext(ctx, &c.peer)
	ctx = grpc.NewContextWithServerTransportStream(ctx, c)
	codec := c.s.opts.Codec
	dec := func(v any) error {
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(c.msg)}, v); err != nil {
			return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		return nil
	}
	resp, err := c.m.handler(c.m.impl, ctx, dec, c.s.opts.Interceptor)
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		return nil, st
	}
	payload, err := codec.Marshal(resp)
	if err != nil {
		return nil, status.Newf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if n := payload.Len(); n > c.s.opts.MaxMsgBytes {
		payload.Free()
		return nil, status.Newf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, c.s.opts.MaxMsgBytes)
	}
	return payload, nil
}

// answer sends the call's answer, on the loop.
func (c *call) answer(payload mem.BufferSlice, s *status.Status, header, trailer metadata.MD) {
	defer payload.Free()
	c.st.cn.reply(c.st, payload, s, header, trailer)
}

// reply sends a call's answer, on the loop: headers, the message as flow
// control lets it go, and the trailers; or, for a failure (s not nil),
// the status alone.
func (cn *conn) reply(st *stream, payload mem.BufferSlice, s *status.Status, header, trailer metadata.MD) {
	if st.closed || cn.gone || st.answered {
		return
	}
	st.answered = true
	if s != nil && len(header) == 0 {
		// Trailers-only: the status in the one header block.
		fields := append(responseHead(st), statusFields(s)...)
		cn.end(st, append(fields, outgoing(trailer)...))
		cn.flush()
		return
	}
	cn.writeHeaders(st, append(responseHead(st), outgoing(header)...), false)
	if s == nil {
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], uint32(payload.Len()))
		if n := int64(len(prefix) + payload.Len()); n <= cn.sendWin && n <= st.sendWin {
			// The windows take the whole message: its frames are written
			// from the codec's buffers, not copied to wait in st.out.
			cn.writeMessage(st, prefix[:], payload)
			cn.end(st, append(okStatus, outgoing(trailer)...))
			cn.flush()
			return
		}
		s = status.New(codes.OK, "")
		st.out = append(st.out[:0], prefix[:]...)
		for _, b := range payload {
			st.out = append(st.out, b.ReadOnlyData()...)
		}
	}
	cn.queue(st, nil, append(statusFields(s), outgoing(trailer)...))
	cn.flush()
}

// okStatus is a successful call's trailer.
var okStatus = []hpack.HeaderField{{Name: "grpc-status", Value: "0"}}

// Method is the call's full method name (grpc.Method).
func (c *call) Method() string { return c.m.name }

// SetHeader adds to the header metadata, sent with the answer.
func (c *call) SetHeader(md metadata.MD) error {
	c.mu.Lock()
	c.header = metadata.Join(c.header, md)
	c.mu.Unlock()
	return nil
}

// SendHeader adds to the header metadata: a unary call's headers go with
// its answer.
func (c *call) SendHeader(md metadata.MD) error { return c.SetHeader(md) }

// SetTrailer adds to the trailer metadata.
func (c *call) SetTrailer(md metadata.MD) error {
	c.mu.Lock()
	c.trailer = metadata.Join(c.trailer, md)
	c.mu.Unlock()
	return nil
}
