package grpcserver

import (
	"context"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Call is a unary call that another transport serves without running
// its handler inside the interceptor chain: the model gateway's event
// loop answers a Chat call later, from the loop, once the backend has
// answered, and a chain wants a handler that returns the answer. Begin
// does what the chain does before the handler and End what it does
// after, so that the call is counted, logged, authenticated and
// validated as on GRPC (recovery covers Begin's checks; the transport
// recovers its own code).
type Call struct {
	o     *callObserver
	mm    *methodMetrics
	ctx   context.Context
	start time.Time
	ended bool
}

// Begin counts a unary call to fullMethod and checks it as the chain
// does: the bearer token in ctx's incoming metadata, a message the codec
// could not parse, the Validate option. ctx carries the call's metadata
// and peer (for the log). When the call is refused, Begin has ended it
// and returns the status error to answer with; otherwise the caller ends
// it with End, once.
func (s *Server) Begin(ctx context.Context, fullMethod string, req any) (*Call, error) {
	c := &Call{o: s.obs, mm: s.metrics.method(typeUnary, fullMethod), ctx: ctx, start: time.Now()}
	c.mm.started.Inc()
	c.mm.received.Inc()
	if err := s.check(ctx, fullMethod, req); err != nil {
		c.End(err)
		return nil, err
	}
	return c, nil
}

// check is the auth and validation interceptors' work for Begin.
func (s *Server) check(ctx context.Context, fullMethod string, req any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	if service, _ := splitMethod(fullMethod); s.needsAuth(service) {
		if _, err := s.authFn(ctx); err != nil {
			return err
		}
	}
	if err := malformed(req); err != nil {
		return err
	}
	if s.validate != nil {
		if err := s.validate(fullMethod, req); err != nil {
			return invalid(err)
		}
	}
	return nil
}

// End records the call's outcome (err nil: answered) as the chain's
// observer does: its code and duration in the metrics, and a log line
// when it failed or was slow. Later calls do nothing.
func (c *Call) End(err error) {
	if c.ended {
		return
	}
	c.ended = true
	took := time.Since(c.start)
	if err == nil {
		c.mm.sent.Inc()
	}
	code := codeOf(err)
	c.mm.done(code, took)
	if err != nil || took >= c.o.slow {
		c.o.logCall(c.ctx, c.mm, c.start, took, code, err)
	}
}
