package modelgateway

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/grpcloop"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopclient"
)

// Chat on the gRPC front's event loop (grpc_front.engine event_loop).
// A call that a worker goroutine served cost two hand-offs between
// threads (the loop to the worker, the worker to the loop) and a third
// and fourth for the backend exchange on fasthttp's client: wake-ups
// that made up most of what the event-loop front cost over nginx. Here
// the loop that read the call decodes and checks it (grpcserver.Begin:
// metrics, token, validation), writes the backend's body, posts it on a
// backend connection registered on the same loop (loopclient), and, when
// the answer comes, decodes it and answers the call: no goroutine and no
// other thread. What cannot be done without waiting goes to a goroutine
// that runs the rest as the other engine does (sendChat): a retry
// (backoff), a weight update that holds every backend, a backend the
// loop does not speak to (TLS, kind openai).

// loopDialTimeout bounds connecting to a backend from a loop, as the
// other client's dial timeout does.
const loopDialTimeout = 5 * time.Second

// hasWire is the backends a loop can send to: plain HTTP.
func hasWire(b *backend.Backend) bool { return b.Wire() != nil }

// loopChat is a Chat call on a loop, from its message to its answer.
// Until it goes slow, only its loop touches it.
type loopChat struct {
	s    *Service
	c    *grpcloop.LoopCall
	call *grpcserver.Call
	req  rmv1.ChatRequest
	prep chatPrep
	gr   *gateway.Request
	a    gateway.Attempts
	// b is the backend of the attempt on the loop, up the exchange on
	// its connection, sent when it began, epoch the backend's then.
	b     *backend.Backend
	up    *loopclient.Conn
	sent  time.Time
	epoch int64
	// slow is set once the call went to a goroutine; cancel ends that
	// goroutine's context.
	slow   bool
	cancel context.CancelCauseFunc
}

var _ loopclient.Waiter = (*loopChat)(nil)

// chatOnLoop serves a Chat call on the loop that read it.
func (s *Service) chatOnLoop(c *grpcloop.LoopCall) {
	lc := &loopChat{s: s, c: c}
	defer lc.recovered()
	srv := s.grpcSrv
	if err := srv.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(c.Message())}, &lc.req); err != nil {
		c.Fail(codes.Internal, "grpc: error unmarshalling request: "+err.Error())
		return
	}
	md, err := c.Metadata()
	if err != nil {
		c.Fail(codes.Internal, err.Error())
		return
	}
	ctx := metadata.NewIncomingContext(context.Background(), md)
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()})
	if lc.call, err = srv.Begin(ctx, rmv1.ModelGateway_Chat_FullMethodName, &lc.req); err != nil {
		c.FailStatus(status.Convert(err))
		return
	}
	if err := s.prepareChat(&lc.req, &lc.prep); err != nil {
		lc.finish(nil, err)
		return
	}
	if _, ok := c.Deadline(); !ok {
		c.SetDeadline(lc.prep.start.Add(s.limits.RequestTimeout))
	}
	c.OnEnd(lc.ended)
	lc.gr = lc.prep.request(&lc.req)
	b, body, epoch := s.g.First(lc.gr, &lc.a, hasWire)
	if b == nil {
		lc.goSlow()
		return
	}
	lc.b, lc.epoch, lc.sent = b, epoch, time.Now()
	up := s.loopClient.Pool(c.Loop()).Send(b.Wire(), lc.req.GetRoutingKey(), body, lc)
	if lc.b != nil {
		lc.up = up // else Send's write failed, and Failed took the attempt
	}
}

// Answered takes the backend's answer to the attempt on the loop.
func (lc *loopChat) Answered(code int, _, body []byte) {
	defer lc.recovered()
	lc.up = nil
	b := lc.b
	lc.b = nil
	if lc.s.g.Answered(&lc.a, b, lc.sent, code, body[:min(len(body), 4096)]) {
		lc.goSlow()
		return
	}
	resp := gateway.NewResponse(&lc.a, b, lc.sent, lc.epoch)
	lc.finish(lc.s.chatDone(resp, code, body, &lc.prep))
}

// TooLong takes an answer over limits.max_response_bytes: refused as
// sendChat refuses it, unless its status asks for another attempt.
func (lc *loopChat) TooLong(code int, _ []byte, why string) {
	defer lc.recovered()
	lc.up = nil
	b := lc.b
	lc.b = nil
	if lc.s.g.Answered(&lc.a, b, lc.sent, code, nil) {
		lc.goSlow()
		return
	}
	gateway.NewResponse(&lc.a, b, lc.sent, lc.epoch).Finish(false, why)
	lc.finish(nil, fmt.Errorf("%w from %s: %v", errBadAnswer, b.ID(), why))
}

// Failed takes an attempt on the loop that got no answer: the gateway
// tries again on a goroutine, as it would have on the other engine.
func (lc *loopChat) Failed(err error) {
	defer lc.recovered()
	lc.up = nil
	b := lc.b
	lc.b = nil
	lc.s.g.Failed(context.Background(), &lc.a, b, lc.sent, fmt.Errorf("post %s%s: %w", b.BaseURL(), chatPath, err))
	lc.goSlow()
}

// chatPath is the backend path of chat completions, for messages.
const chatPath = "/v1/chat/completions"

// ended is the call's end before its answer: the client went away
// (context.Canceled) or its deadline passed (context.DeadlineExceeded).
// The attempt's backend connection is closed, so that the backend stops
// generating.
func (lc *loopChat) ended(err error) {
	if lc.slow {
		lc.cancel(err) // the goroutine ends the call
		return
	}
	if lc.up != nil {
		lc.up.Drop()
		lc.up = nil
	}
	if lc.b != nil {
		gateway.Abandon(lc.b)
		lc.b = nil
	}
	lc.prep.release()
	lc.call.End(status.FromContextError(err).Err())
}

// finish answers the call with out, or with err's status.
func (lc *loopChat) finish(out *rmv1.ChatResponse, err error) {
	lc.prep.release()
	lc.answer(out, err)
}

// answer answers the call, on the loop, unless it ended.
func (lc *loopChat) answer(out *rmv1.ChatResponse, err error) {
	if lc.c.Ended() {
		if err == nil {
			err = context.Canceled
		}
		lc.call.End(lc.s.toStatus(err))
		return
	}
	if err == nil {
		payload, merr := lc.s.grpcSrv.Codec.Marshal(out)
		if merr != nil {
			err = status.Errorf(codes.Internal, "grpc: error while marshaling: %v", merr)
		} else {
			lc.c.Reply(payload)
			lc.call.End(nil)
			return
		}
	}
	st := status.Convert(lc.s.toStatus(err))
	lc.c.FailStatus(st)
	lc.call.End(st.Err())
}

// goSlow hands the call to a goroutine, which makes the attempts left as
// the other engine does; its answer comes back to the loop.
func (lc *loopChat) goSlow() {
	lc.slow = true
	deadline, _ := lc.c.Deadline()
	dctx, cancelDeadline := context.WithDeadline(context.Background(), deadline)
	ctx, cancel := context.WithCancelCause(dctx)
	lc.cancel = cancel
	el := lc.c.Loop()
	go func() {
		out, err := lc.s.sendChat(ctx, lc.gr, &lc.a, &lc.prep)
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		lc.prep.release()
		cancel(nil)
		cancelDeadline()
		if eerr := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			defer lc.recovered()
			lc.answer(out, err)
			return nil
		})); eerr != nil {
			// The loops stopped: nobody to answer.
			lc.call.End(status.Error(codes.Unavailable, "server stopped"))
		}
	}()
}

// recovered turns a panic in the gateway's code on the loop into the
// call's Internal failure, as the recovery interceptor does on the other
// engine, so that one bad call does not end the process.
func (lc *loopChat) recovered() {
	p := recover()
	if p == nil {
		return
	}
	lc.s.log.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
	st := status.New(codes.Internal, "internal error")
	if !lc.c.Ended() {
		lc.c.FailStatus(st)
	}
	if lc.call != nil {
		lc.call.End(st.Err())
	}
}
