package grpcloop

import (
	"github.com/panjf2000/gnet/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
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

// Fail ends the call with a status.
func (c *LoopCall) Fail(code codes.Code, msg string) {
	c.st.cn.reply(c.st, nil, status.New(code, msg), nil, nil)
}

// LoopConn is a connection a LoopHandler registered on its loop (to a
// backend, with gnet.NewContext): the server hands it its events.
type LoopConn interface {
	OnOpen(c gnet.Conn) ([]byte, gnet.Action)
	OnTraffic(c gnet.Conn) gnet.Action
	OnClose(c gnet.Conn, err error) gnet.Action
}
