// Package grpcloop serves gRPC on gnet event loops: HTTP/2 on one loop per
// CPU, with no goroutine per connection and none to read or write a call.
// grpc-go's transport alone cost 2-3× nginx's CPU per proxied request
// (docs/benchmarks.md, session 48), where an event-loop transport cost
// 1.0-1.4×.
//
// The loops keep each connection's HTTP/2 state: streams, both
// directions' flow-control windows, settings, pings, GOAWAY. Frames and
// HPACK come from golang.org/x/net/http2. A unary method registered here
// (RegisterService) runs once its message is whole: on a worker
// goroutine, through the same interceptor chain and codec grpc-go's server
// runs, with the call's deadline (grpc-timeout), metadata and peer in its
// context. Every other call (streaming methods, health, reflection,
// methods not registered here) goes to Options.Fallback, grpc-go's server
// as an http.Handler, on a goroutine of its own, so that all of the API is
// served on one port.
//
// It serves plain HTTP/2 (h2c, as gRPC clients dial without TLS); TLS is
// grpc-go's server's job.
package grpcloop

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopboot"
)

// Options configure a Server.
type Options struct {
	// Listener, when set, is where connections come from: a goroutine
	// accepts them and hands each to a loop (the daemon listened before
	// the service chose its transport). Otherwise the loops listen on
	// Addr (host:port).
	Listener net.Listener
	Addr     string
	// Fallback serves the calls of methods not registered here:
	// grpc-go's *grpc.Server, whose ServeHTTP serves gRPC over any
	// HTTP/2 transport. Required.
	Fallback http.Handler
	// Interceptor runs around every registered method's handler, as the
	// chain of grpc-go's server does (nil: none).
	Interceptor grpc.UnaryServerInterceptor
	// Codec decodes requests and encodes answers. Required.
	Codec encoding.CodecV2
	// MaxMsgBytes bounds a message each way (ResourceExhausted over it).
	MaxMsgBytes int
	// MinPingInterval is how often a client may ping, as grpc-go's
	// keepalive enforcement policy's MinTime: a client that pings more
	// often three times is sent GOAWAY ENHANCE_YOUR_CALM.
	MinPingInterval time.Duration
	// KeepaliveTime and KeepaliveTimeout are grpc-go's server keepalive:
	// a connection silent for KeepaliveTime is pinged, and closed when
	// nothing comes within KeepaliveTimeout after (0: no pings), so that
	// a client that vanished without a FIN does not hold its calls.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// Workers is how many goroutines run registered methods and keep
	// their grown stacks (default 4 per CPU); a call that finds all busy
	// gets a goroutine of its own.
	Workers int
	// Logger takes gnet's messages and the server's.
	Logger *zap.Logger
}

// Server is a gRPC server on event loops.
type Server struct {
	gnet.BuiltinEventEngine
	opts    Options
	methods map[string]*method

	addr     net.Addr
	sockDir  string // the private socket gnet listens on beside Listener
	eng      gnet.Engine
	booted   chan error
	stopped  chan struct{}
	runErr   error         // why the loops stopped by themselves; set before stopped closes
	ticked   chan struct{} // closed at the first tick
	tickOnce sync.Once
	ticks    int // only OnTick touches it
	work     chan *call

	mu    sync.Mutex
	loops map[gnet.EventLoop]*loop

	// active counts the calls between their first header and their end;
	// handlers counts the goroutines running calls.
	active   atomic.Int64
	handlers sync.WaitGroup
	// onLoopCalls counts the calls served on the loops, which OnTick
	// sweeps for their deadlines while there are any.
	onLoopCalls atomic.Int64
	draining    atomic.Bool
	stopOnce    sync.Once
	quit        chan struct{}
}

// method is a registered unary method: its handler runs on a worker, or
// onLoop on the loop.
type method struct {
	name    string // full: /package.Service/Method
	impl    any
	handler grpc.MethodHandler
	onLoop  LoopHandler
}

var _ grpc.ServiceRegistrar = (*Server)(nil)

// New returns a server; register its methods, then Start it.
func New(opts Options) (*Server, error) {
	if opts.Fallback == nil || opts.Codec == nil {
		return nil, errors.New("grpcloop: Fallback and Codec are required")
	}
	if opts.MaxMsgBytes <= 0 {
		opts.MaxMsgBytes = 4 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Server{
		opts: opts, methods: map[string]*method{}, booted: make(chan error, 1), stopped: make(chan struct{}), ticked: make(chan struct{}),
		work: make(chan *call), loops: map[gnet.EventLoop]*loop{}, quit: make(chan struct{}),
	}, nil
}

// RegisterService serves desc's unary methods on the loops; its streaming
// methods stay with the fallback. Call it before Start.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for i := range desc.Methods {
		m := &desc.Methods[i]
		name := "/" + desc.ServiceName + "/" + m.MethodName
		s.methods[name] = &method{name: name, impl: impl, handler: m.Handler}
	}
}

// Start listens and serves; it returns once the loops listen.
func (s *Server) Start() error {
	addr := "tcp://" + s.opts.Addr
	if s.opts.Listener != nil {
		// gnet runs only with a listener of its own, and takes none
		// made elsewhere: it gets a socket nobody dials, in a private
		// directory, and the connections come from Listener.
		dir, err := os.MkdirTemp("", "grpcloop-")
		if err != nil {
			return err
		}
		s.sockDir = dir
		addr = "unix://" + filepath.Join(dir, "unused.sock")
	}
	go func() {
		err := gnet.Run(s, addr,
			gnet.WithLoadBalancing(gnet.LeastConnections),
			gnet.WithTicker(true),
			gnet.WithMulticore(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTCPKeepAlive(30*time.Second),
			gnet.WithLogger(loopboot.Logger(s.opts.Logger)))
		select {
		case <-s.quit: // Close stopped it
		default:
			s.runErr = err
			if err == nil {
				s.runErr = errors.New("event loops stopped")
			}
		}
		close(s.stopped)
		if err == nil {
			err = errors.New("event loop stopped at start")
		}
		select {
		case s.booted <- err:
		default: // booted, and OnBoot's nil taken
		}
	}()
	if err := <-s.booted; err != nil {
		if s.sockDir != "" {
			os.RemoveAll(s.sockDir)
		}
		return err
	}
	// The loops are in place once the first tick came: before, gnet
	// takes no connection (and its list of loops is still written).
	select {
	case <-s.ticked:
	case <-s.stopped:
		return errors.New("event loop stopped at start")
	}
	for range s.opts.Workers {
		go s.worker()
	}
	if s.opts.Listener != nil {
		go s.accept(s.opts.Listener)
	}
	return nil
}

// accept hands each connection Listener takes to a loop, until it closes.
// An accept that fails otherwise (no file descriptor left) is logged and
// tried again after a pause, as net/http's and grpc-go's servers do: the
// front must not stop taking connections for good.
func (s *Server) accept(ln net.Listener) {
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.opts.Logger.Error("grpc accept failed; trying again", zap.Error(err), zap.Duration("pause", pause))
			select {
			case <-time.After(pause):
				continue
			case <-s.stopped:
				return
			}
		}
		pause = 0
		if s.draining.Load() {
			c.Close()
			continue
		}
		// gnet takes a copy of the socket and closes c.
		res, err := s.eng.Register(gnet.NewNetConnContext(context.Background(), c))
		if err != nil {
			s.opts.Logger.Warn("grpc connection not taken", zap.Error(err))
			c.Close()
			continue
		}
		go func() {
			if r := <-res; r.Err != nil {
				s.opts.Logger.Warn("grpc connection not taken", zap.Error(r.Err))
			}
		}()
	}
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Stopped is closed once the loops stopped, by Close or by themselves;
// Err then says why they stopped by themselves (nil after Close).
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Err is why the loops stopped by themselves, once Stopped is closed.
func (s *Server) Err() error {
	select {
	case <-s.stopped:
		return s.runErr
	default:
		return nil
	}
}

func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	if s.opts.Listener != nil {
		s.addr, s.eng = s.opts.Listener.Addr(), eng
		s.booted <- nil
		return gnet.None
	}
	addr, err := loopboot.Addr(eng)
	if err != nil {
		s.booted <- err
		return gnet.Shutdown
	}
	s.addr, s.eng = addr, eng
	s.booted <- nil
	return gnet.None
}

// loop is one event loop's: its connections and scratch. Only its loop
// touches it.
type loop struct {
	el    gnet.EventLoop
	conns map[*conn]struct{}
	// onLoop holds the calls served on the loop (HandleOnLoop) until
	// they end, for their deadlines.
	onLoop map[*stream]struct{}
}

func (s *Server) loopOf(c gnet.Conn) *loop {
	el := c.EventLoop()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.loops[el]
	if l == nil {
		l = &loop{el: el, conns: map[*conn]struct{}{}}
		s.loops[el] = l
	}
	return l
}

// eachLoop runs f on every loop, on that loop.
func (s *Server) eachLoop(f func(*loop)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for el, l := range s.loops {
		el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			f(l)
			return nil
		}))
	}
}

func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if lc, ok := c.Context().(LoopConn); ok {
		return lc.OnOpen(c)
	}
	if c.LocalAddr() != nil && c.LocalAddr().Network() == "unix" {
		return nil, gnet.Close // the private socket's: nobody should dial it
	}
	cn := newConn(s, c, s.loopOf(c))
	cn.l.conns[cn] = struct{}{}
	c.SetContext(cn)
	return cn.open(), gnet.None
}

func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	switch x := c.Context().(type) {
	case *conn:
		x.closed()
		delete(x.l.conns, x)
	case LoopConn:
		return x.OnClose(c, err)
	}
	return gnet.None
}

func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *conn:
		return x.read()
	case LoopConn:
		return x.OnTraffic(c)
	}
	return gnet.Close
}

// tickInterval is how often the loops look at their connections during a
// drain: for its second GOAWAY, and for connections with no stream left.
const tickInterval = 100 * time.Millisecond

func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.tickOnce.Do(func() { close(s.ticked) })
	s.ticks++
	draining := s.draining.Load()
	// Keepalive is looked at every tenth tick: its times are seconds.
	keepalive := s.opts.KeepaliveTime > 0 && s.ticks%10 == 0
	sweep := s.onLoopCalls.Load() > 0
	if draining || keepalive || sweep {
		now := time.Now()
		s.eachLoop(func(l *loop) {
			if sweep {
				l.sweep(now)
			}
			for cn := range l.conns {
				if keepalive {
					cn.keepalive(now)
				}
				if draining {
					cn.drainStep(now)
				}
			}
		})
	}
	return tickInterval, gnet.None
}

// Drain stops taking calls (GOAWAY, in two steps as grpc-go does: calls
// the client sent before it saw the first are still served) and waits,
// within ctx, for the calls in flight to end.
func (s *Server) Drain(ctx context.Context) error {
	if !s.draining.Swap(true) {
		if s.opts.Listener != nil {
			s.opts.Listener.Close()
		}
		now := time.Now()
		s.eachLoop(func(l *loop) {
			for cn := range l.conns {
				cn.drainStep(now)
			}
		})
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Close ends the calls in flight and stops the server.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		if s.opts.Listener != nil {
			s.opts.Listener.Close()
		}
		close(s.quit)
		// Stopping closes every connection, which cancels its calls.
		go s.eng.Stop(context.Background())
		select {
		case <-s.stopped:
			done := make(chan struct{})
			go func() { s.handlers.Wait(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				err = ctx.Err()
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
		if s.sockDir != "" {
			os.RemoveAll(s.sockDir)
		}
	})
	return err
}

// worker runs calls until the server closes.
func (s *Server) worker() {
	for {
		select {
		case c := <-s.work:
			c.run()
		case <-s.quit:
			return
		}
	}
}

// dispatch runs c on an idle worker, or on a goroutine of its own.
func (s *Server) dispatch(c *call) {
	s.handlers.Add(1)
	select {
	case s.work <- c:
	default:
		go c.run()
	}
}
