// Package modelgateway builds the model gateway service: one gRPC
// (rolloutmesh.v1.ModelGateway) and one OpenAI-compatible HTTP front over
// many OpenAI-compatible model backends (vLLM, SGLang, OpenAI), with sticky
// least-loaded routing, health probing, circuit breakers, retries with
// failover, token ids and logprobs end to end, and weight-version stamping.
package modelgateway

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/checkpoint"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/grpcloop"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/linger"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/loopclient"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/metrics"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaihttp"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/routing"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Config is the service configuration.
type Config struct {
	// ConfigFile is the YAML config (--config).
	ConfigFile string
	// OpenAIAddr is the OpenAI HTTP listen address (--openai-addr, default
	// ":8000"); empty disables the HTTP front.
	OpenAIAddr string
	// Policy overrides routing.policy from the file (--routing-policy).
	Policy string
	// File, when set, is used instead of reading ConfigFile: the all-in-one
	// binary builds the gateway from a list of backends this way.
	File *FileConfig
	// Clock drives health probing, breaker cooldowns and backoff (nil =
	// real time). Tests set a fake one.
	Clock clock.Clock
	// AuthToken, when set, is required as a bearer token on every route of
	// the HTTP front but /health, as --auth-token is on every gRPC call:
	// whoever reaches a backend through the gateway spends its API key.
	// When empty, New takes the daemon's (env.AuthToken: --auth-token,
	// its file or the environment), so that one token guards both fronts.
	AuthToken string
	// TLS, when set, serves the HTTP front over TLS. When nil, New uses
	// the daemon's (env.TLS, from --tls-cert, --tls-key and
	// --tls-client-ca), if any: a token that gRPC carries encrypted must
	// not cross the network in clear to the other front.
	TLS *tls.Config
}

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "config", "", "YAML config file with the backends (see examples/modelgateway.yaml)")
	fs.StringVar(&c.OpenAIAddr, "openai-addr", ":8000", "OpenAI-compatible HTTP listen address (empty disables)")
	fs.StringVar(&c.Policy, "routing-policy", "", "override routing.policy: round_robin, least_loaded, sticky_least_loaded or weighted")
}

// Spec describes the modelgateway binary to serverkit/daemon: its default
// addresses, its flags and how it starts.
func Spec() daemon.Spec {
	var cfg Config
	return daemon.Spec{
		Name:     "modelgateway",
		GRPCAddr: ":50054",
		HTTPAddr: ":9104",
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return New(ctx, cfg, env)
		},
	}
}

// Service is the running gateway.
type Service struct {
	rmv1.UnimplementedModelGatewayServer

	g      *gateway.Gateway
	met    *metrics.Metrics
	log    *zap.Logger
	limits Limits
	clk    clock.Clock
	// front holds the gRPC front's latency histograms.
	front metrics.Front
	// images holds recent gRPC requests' images by digest; nil when
	// limits.image_cache_bytes turned it off.
	images *images
	// anyOpenAI is set when a backend is of kind openai, for which a
	// request needs a second body.
	anyOpenAI bool

	// launcher runs the replicas of backends with a launch section;
	// watcher loads new checkpoints.
	launcher  *launch.Launcher
	watcher   *checkpoint.Watcher
	watchStop context.CancelFunc
	watchDone chan struct{}

	// grpcEngine serves the gRPC front (ServeGRPC); grpcLoop is the
	// event loops' server when it is EngineEventLoop.
	grpcEngine string
	// grpcEngineDefault is set when grpcEngine is the default, not the
	// config's: a transport the loops cannot serve then goes to grpc-go
	// without a word.
	grpcEngineDefault bool
	grpcLoop          atomic.Pointer[grpcloop.Server]
	// grpcSrv is the gRPC server whose checks and codec Chat on the loop
	// runs, loopClient its backend connections (event_loop only).
	grpcSrv    *grpcserver.Server
	loopClient *loopclient.Client

	openai  *openaihttp.Handler
	httpSrv *fasthttp.Server
	// loopSrv serves the front instead of httpSrv with engine event_loop.
	loopSrv  *openaihttp.LoopServer
	httpLn   net.Listener
	httpDone chan struct{}
}

var (
	_ daemon.Service    = (*Service)(nil)
	_ daemon.Drainer    = (*Service)(nil)
	_ daemon.Validator  = (*Service)(nil)
	_ daemon.GRPCServer = (*Service)(nil)
)

// New builds the gateway, starts health probing and, unless OpenAIAddr is
// empty, the OpenAI HTTP listener. ctx bounds only the start-up.
func New(ctx context.Context, cfg Config, env daemon.Env) (*Service, error) {
	fc := cfg.File
	if fc == nil && cfg.ConfigFile == "" {
		// Started without a config (e.g. to inspect the API): it serves, and
		// every Chat is refused until it is restarted with backends.
		env.Logger.Warn("no backends configured; give --config FILE")
		fc = &FileConfig{}
	} else if fc == nil {
		var err error
		if fc, err = LoadFile(cfg.ConfigFile); err != nil {
			return nil, err
		}
	} else if err := fc.Validate(); err != nil {
		return nil, err
	}
	rc := fc.Routing
	if cfg.Policy != "" {
		rc.Policy = cfg.Policy
	}
	if _, err := routing.New(rc, routing.Hooks{}); err != nil {
		return nil, fmt.Errorf("--routing-policy: %w", err)
	}
	limits := fc.Limits
	limits.defaults()
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	met, err := metrics.New(env.Registry)
	if err != nil {
		return nil, err
	}
	backends, launched, err := expandLaunched(fc.Backends, env.Logger)
	if err != nil {
		return nil, err
	}
	g, err := gateway.New(gateway.Config{
		Backends: backends, Routing: rc, Retry: fc.Retry, Health: fc.Health, Breaker: fc.Breaker,
		DefaultModel: fc.DefaultModel, InitialVersion: fc.InitialVersion,
	}, newHTTPClient(), clk, met, env.Logger)
	if err != nil {
		return nil, err
	}
	s := &Service{g: g, met: met, log: env.Logger, limits: limits, clk: clk, front: met.Front("grpc"), grpcEngine: fc.GRPCFront.Engine}
	// As the HTTP front: the event loop by default, and grpc-go's server
	// over TLS, which the loops do not speak.
	switch {
	case s.grpcEngine == EngineEventLoop && env.TLS != nil:
		return nil, errGRPCLoopTLS
	case s.grpcEngine == "" && env.TLS != nil:
		s.grpcEngine = EngineGoroutines
	case s.grpcEngine == "":
		s.grpcEngine, s.grpcEngineDefault = EngineEventLoop, true
	}
	for _, b := range backends {
		s.anyOpenAI = s.anyOpenAI || b.Kind == KindOpenAI
	}
	if limits.ImageCacheBytes > 0 {
		if s.images, err = newImages(limits.ImageCacheBytes, env.Registry); err != nil {
			return nil, fmt.Errorf("limits.image_cache_bytes: %w", err)
		}
	}
	openaiTLS := false
	if cfg.OpenAIAddr != "" {
		token := cfg.AuthToken
		if token == "" {
			token = env.AuthToken
		}
		tlsCfg := cfg.TLS
		if tlsCfg == nil {
			tlsCfg = env.TLS
		}
		if tlsCfg != nil {
			tlsCfg = tlsCfg.Clone()
			tlsCfg.NextProtos = []string{"http/1.1"} // fasthttp speaks no HTTP/2
		}
		engine := fc.HTTPFront.Engine
		switch {
		case engine == EngineEventLoop && tlsCfg != nil:
			return nil, errors.New("http_front.engine: event_loop serves plain HTTP only; TLS needs engine goroutines")
		case engine == "" && tlsCfg != nil:
			engine = EngineGoroutines
		case engine == "":
			engine = EngineEventLoop
		}
		s.openai = openaihttp.New(g, met, env.Logger, openaihttp.Options{
			MaxRequestBytes: limits.MaxRequestBytes, MaxImageBytes: limits.MaxImageBytes,
			MaxResponseBytes: limits.MaxResponseBytes, Timeout: limits.RequestTimeout,
			MaxMessages: limits.MaxMessages, MaxImages: limits.MaxImages, AuthToken: token,
		})
		if engine == EngineEventLoop {
			ls, err := openaihttp.ServeLoop(s.openai, openaihttp.LoopOptions{
				Addr: cfg.OpenAIAddr, MaxHead: maxRequestHead, ReadTimeout: requestReadTimeout, IdleTimeout: idleConnTimeout,
				DrainWait: drainWait, Logger: env.Logger,
			})
			if err != nil {
				return nil, fmt.Errorf("--openai-addr: %w", err)
			}
			s.loopSrv = ls
			if token == "" && !loopback(ls.Addr()) {
				warnOpenFront(env.Logger, ls.Addr())
			}
		} else {
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", cfg.OpenAIAddr)
			if err != nil {
				return nil, fmt.Errorf("--openai-addr: listen: %w", err)
			}
			ln = linger.NewListener(ln, maxDraining, drainWait)
			if tlsCfg != nil {
				ln, openaiTLS = tls.NewListener(ln, tlsCfg), true
			}
			if token == "" && !loopback(ln.Addr()) {
				warnOpenFront(env.Logger, ln.Addr())
			}
			s.httpLn = ln
			s.httpSrv = newHTTPServer(s.openai, limits, env.Logger)
			s.httpDone = make(chan struct{})
			go func() {
				defer close(s.httpDone)
				if err := s.httpSrv.Serve(ln); err != nil {
					env.Logger.Error("openai http server failed", zap.Error(err))
				}
			}()
		}
	}
	g.Start()
	s.startLaunched(launched, fc.InitialVersion)
	s.startWatcher(fc.Checkpoints)
	env.Logger.Info("modelgateway started", zap.Int("backends", len(backends)), zap.Int("launched_replicas", len(launched)),
		zap.String("routing_policy", g.PolicyName()), zap.String("openai_addr", s.OpenAIAddr()),
		zap.Bool("openai_tls", openaiTLS))
	return s, nil
}

// newHTTPClient returns the client for health probes and weight-update
// calls (chat requests use each backend's fasthttp client): a few idle
// connections per host, no overall timeout (each request's context bounds
// it), no transparent compression.
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

// The OpenAI front drains the connections it answers before reading their
// body (package linger): at most maxDraining at once, each for at most
// drainWait, which covers a body of the default 64 MiB limit at 100 Mbit/s.
const (
	maxDraining = 64
	drainWait   = 6 * time.Second
)

// warnOpenFront warns of a front without a token beyond loopback.
func warnOpenFront(log *zap.Logger, addr net.Addr) {
	log.Warn("openai http front reachable beyond loopback without a token; anyone who reaches it spends the backends' API keys",
		zap.String("openai_addr", addr.String()))
}

// The HTTP front's bounds, on either engine: a request's head, the time a
// request (head and body) may take to arrive once begun, and how long a
// kept-alive connection may idle.
const (
	maxRequestHead     = 16 << 10
	requestReadTimeout = time.Minute
	idleConnTimeout    = 90 * time.Second
)

// newHTTPServer serves the OpenAI front with fasthttp. Bodies over the
// limit are refused before they are read whole (and a request without the
// token gets a few kilobytes); a request (headers and body) must arrive
// within a minute.
func newHTTPServer(h *openaihttp.Handler, limits Limits, log *zap.Logger) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               h.Serve,
		ErrorHandler:          h.ServeError,
		HeaderReceived:        h.HeaderReceived,
		MaxRequestBodySize:    int(min(limits.MaxRequestBytes, math.MaxInt32)),
		ReadBufferSize:        maxRequestHead,
		ReadTimeout:           requestReadTimeout,
		IdleTimeout:           idleConnTimeout,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                openaihttp.FastHTTPLogger{Log: log},
	}
}

// loopback reports whether addr is a loopback address, which only local
// processes reach.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// OpenAIAddr is the address the HTTP front listens on ("" when disabled).
func (s *Service) OpenAIAddr() string {
	if s.loopSrv != nil {
		return s.loopSrv.Addr().String()
	}
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// Register adds the gRPC handlers.
func (s *Service) Register(srv *grpc.Server) { rmv1.RegisterModelGatewayServer(srv, s) }

// ServeGRPC serves the gRPC listener on the event loops when
// grpc_front.engine is event_loop: they serve Chat themselves (loopchat.go),
// run the gateway's other unary methods on workers, and hand every other
// call (health, reflection) to srv.
func (s *Service) ServeGRPC(ln net.Listener, srv *grpcserver.Server) (<-chan error, error) {
	if s.grpcEngine != EngineEventLoop {
		return nil, nil
	}
	if srv.TLS {
		// Credentials given to the server, not in the environment New
		// read (a program that embeds the gateway).
		if !s.grpcEngineDefault {
			return nil, errGRPCLoopTLS
		}
		return nil, nil
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		// gnet takes sockets: an in-memory listener (tests) stays
		// with grpc-go.
		if !s.grpcEngineDefault {
			s.log.Warn("grpc_front.engine event_loop serves TCP listeners only; grpc-go's server serves this one",
				zap.String("listener", fmt.Sprintf("%T", ln)))
		}
		return nil, nil
	}
	ls, err := grpcloop.New(grpcloop.Options{
		Listener: ln, Fallback: srv.GRPC, Interceptor: srv.Unary, Codec: srv.Codec,
		MaxMsgBytes: grpcserver.DefaultMaxMsgBytes, MinPingInterval: grpcserver.MinPingInterval,
		KeepaliveTime: grpcserver.KeepaliveTime, KeepaliveTimeout: grpcserver.KeepaliveTimeout, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	rmv1.RegisterModelGatewayServer(ls, s)
	s.grpcSrv = srv
	s.loopClient = loopclient.New(s.limits.MaxResponseBytes, loopDialTimeout)
	ls.HandleOnLoop(rmv1.ModelGateway_Chat_FullMethodName, s.chatOnLoop)
	if err := ls.Start(); err != nil {
		return nil, fmt.Errorf("grpc_front event loop on %s: %w", ln.Addr(), err)
	}
	s.grpcLoop.Store(ls)
	stopped := make(chan error, 1)
	go func() {
		<-ls.Stopped()
		stopped <- ls.Err()
	}()
	return stopped, nil
}

// errGRPCLoopTLS refuses grpc_front.engine event_loop over TLS.
var errGRPCLoopTLS = errors.New("grpc_front.engine: event_loop serves plain HTTP/2 only; TLS needs engine goroutines")

// Drain stops both fronts from taking new requests and waits for the
// in-flight ones (streams included) to finish, within ctx.
func (s *Service) Drain(ctx context.Context) error {
	err := s.drainHTTP(ctx)
	if gl := s.grpcLoop.Load(); gl != nil {
		if gerr := gl.Drain(ctx); gerr != nil {
			err = errors.Join(err, fmt.Errorf("drain grpc: %w", gerr))
		}
	}
	return err
}

func (s *Service) drainHTTP(ctx context.Context) error {
	if s.loopSrv != nil {
		if err := s.loopSrv.Drain(ctx); err != nil {
			return fmt.Errorf("drain openai http: %w", err)
		}
		return nil
	}
	if s.httpSrv == nil {
		return nil
	}
	err := s.httpSrv.ShutdownWithContext(ctx)
	// fasthttp's Shutdown closes only the listeners Serve has taken up: a
	// drain right after New would leave the front accepting.
	s.httpLn.Close()
	if err != nil {
		return fmt.Errorf("drain openai http: %w", err)
	}
	return nil
}

// Close ends both fronts' requests in flight, stops them and health
// probing.
func (s *Service) Close(ctx context.Context) error {
	if gl := s.grpcLoop.Load(); gl != nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		gl.Close(sctx)
		cancel()
	}
	if s.loopSrv != nil {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		s.loopSrv.Close(sctx)
		cancel()
	}
	if s.httpSrv != nil {
		s.openai.Close()
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		s.httpSrv.ShutdownWithContext(sctx)
		cancel()
		// Shutdown before Serve took up the listener does not close it,
		// and Serve would then accept for ever.
		s.httpLn.Close()
		<-s.httpDone
	}
	// The replicas go last: in-flight requests above were still using them.
	s.stopManaged()
	s.g.Stop()
	return nil
}
