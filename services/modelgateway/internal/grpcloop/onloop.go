package grpcloop

import (
	"context"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A LoopHandler serves a method on the loop that read its call, once the
// call's message is whole, with no goroutine: it must not block. It
// answers at once or later, from the loop, for instance once an answer
// came on a connection it registered on the same loop (LoopConn).
type LoopHandler func(c *LoopCall)

// HandleOnLoop serves fullMethod (/package.Service/Method) with h on the
// loops; no interceptor runs. Call it before Start.
func (s *Server) HandleOnLoop(fullMethod string, h LoopHandler) {
	s.methods[fullMethod] = &method{name: fullMethod, onLoop: h}
}

// LoopCall is a call a LoopHandler serves. Only its loop may use it.
type LoopCall struct{ st *stream }

// Message is the call's message. It is valid until the call is answered
// or ends.
func (c *LoopCall) Message() []byte {
	if len(c.st.body) < 5 {
		return nil
	}
	return c.st.body[5:]
}

// Loop is the loop the call runs on.
func (c *LoopCall) Loop() gnet.EventLoop { return c.st.cn.l.el }

// Ended reports whether the call is over: answered, or given up by the
// client (reset, or its connection closed).
func (c *LoopCall) Ended() bool { return c.st.closed }

// Answer answers the call with msg, a marshalled message.
func (c *LoopCall) Answer(msg []byte) {
	c.st.cn.reply(c.st, mem.BufferSlice{mem.SliceBuffer(msg)}, nil, nil, nil)
}

// Reply answers the call with payload, a message as the codec marshalled
// it, and frees payload: one over MaxMsgBytes fails the call as grpc-go
// does (ResourceExhausted).
func (c *LoopCall) Reply(payload mem.BufferSlice) {
	defer payload.Free()
	if n, limit := payload.Len(), c.st.cn.s.opts.MaxMsgBytes; n > limit {
		c.FailStatus(status.Newf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, limit))
		return
	}
	c.st.cn.reply(c.st, payload, nil, nil, nil)
}

// Fail ends the call with a status.
func (c *LoopCall) Fail(code codes.Code, msg string) {
	c.FailStatus(status.New(code, msg))
}

// FailStatus ends the call with st, details included.
func (c *LoopCall) FailStatus(st *status.Status) {
	c.st.cn.reply(c.st, nil, st, nil, nil)
}

// Metadata is the call's incoming metadata, as grpc-go gives a handler
// (metadata.FromIncomingContext).
func (c *LoopCall) Metadata() (metadata.MD, error) { return incoming(c.st.fields) }

// RemoteAddr is the client's address.
func (c *LoopCall) RemoteAddr() net.Addr { return c.st.cn.c.RemoteAddr() }

// LocalAddr is the address the client reached.
func (c *LoopCall) LocalAddr() net.Addr { return c.st.cn.c.LocalAddr() }

// Deadline is the call's deadline: the client's (grpc-timeout), or one
// SetDeadline set; ok is false when it has none.
func (c *LoopCall) Deadline() (t time.Time, ok bool) {
	return c.st.deadline, !c.st.deadline.IsZero()
}

// SetDeadline gives the call a deadline, or an earlier one than it has.
// Past it, the loop ends the call (at most a tick late): OnEnd's function
// runs with context.DeadlineExceeded, then the call fails with
// DeadlineExceeded unless that function answered it.
func (c *LoopCall) SetDeadline(t time.Time) {
	if st := c.st; st.deadline.IsZero() || t.Before(st.deadline) {
		st.deadline = t
	}
}

// OnEnd sets what runs, on the loop, when the call ends unanswered: the
// client reset it or its connection closed (context.Canceled), or its
// deadline passed (context.DeadlineExceeded). A handler that holds
// something for the call (a backend connection) lets go of it there.
func (c *LoopCall) OnEnd(f func(err error)) { c.st.onEnd = f }

// begin counts a call served on the loop, whose deadline the loop
// sweeps.
func (l *loop) begin(st *stream) {
	if l.onLoop == nil {
		l.onLoop = map[*stream]struct{}{}
	}
	l.onLoop[st] = struct{}{}
	st.cn.s.onLoopCalls.Add(1)
}

// leave forgets a call served on the loop, once it ended.
func (l *loop) leave(st *stream) {
	if _, ok := l.onLoop[st]; ok {
		delete(l.onLoop, st)
		st.cn.s.onLoopCalls.Add(-1)
	}
}

// sweep ends the calls on the loop past their deadline.
func (l *loop) sweep(now time.Time) {
	for st := range l.onLoop {
		if st.closed || st.answered || st.deadline.IsZero() || now.Before(st.deadline) {
			continue
		}
		if f := st.onEnd; f != nil {
			st.onEnd = nil
			f(context.DeadlineExceeded)
		}
		st.cn.reply(st, nil, status.New(codes.DeadlineExceeded, context.DeadlineExceeded.Error()), nil, nil)
	}
}

// LoopConn is a connection a LoopHandler registered on its loop (to a
// backend, with gnet.NewContext): the server hands it its events.
type LoopConn interface {
	OnOpen(c gnet.Conn) ([]byte, gnet.Action)
	OnTraffic(c gnet.Conn) gnet.Action
	OnClose(c gnet.Conn, err error) gnet.Action
}
