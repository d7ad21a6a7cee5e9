// Package grpcserver builds the gRPC server every rolloutmesh service runs:
// one interceptor chain in a fixed, commented order, gRPC health and server
// reflection, message size limits and keepalive.
package grpcserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// DefaultMaxMsgBytes bounds a single gRPC message. Steps carry screenshots
// (a 1920×1080 PNG is 0.2-3 MB) and exports stream chunks, so the gRPC default
// of 4 MiB is too tight; anything larger must be streamed.
const DefaultMaxMsgBytes = 64 << 20

// Options configure New.
type Options struct {
	// Logger receives slow and failed calls and recovered panics. Required.
	Logger *zap.Logger
	// Registry receives the gRPC server metrics. Required.
	Registry prometheus.Registerer
	// AuthToken, when set, must arrive as "authorization: Bearer <token>" on
	// every call except health checks and reflection.
	AuthToken string
	// Validate checks a request before its handler runs. A non-nil error is
	// returned to the client as InvalidArgument (status errors pass as they
	// are). May be nil.
	Validate func(fullMethod string, req any) error
	// SlowCall is the duration above which a successful unary call is logged;
	// default 1s. Streams are long by nature and only logged when they fail.
	SlowCall time.Duration
	// MaxMsgBytes bounds received and sent messages; default DefaultMaxMsgBytes.
	MaxMsgBytes int
	// Creds, when set, are the server's transport credentials (TLS); nil
	// serves plaintext.
	Creds credentials.TransportCredentials
}

// windowBytes is the HTTP/2 flow-control window each stream starts with.
const windowBytes = 1 << 20

// MinPingInterval is how often a client may ping a server New builds
// (keepalive enforcement): runners keep Work streams open for hours and
// ping to notice a dead coordinator.
const MinPingInterval = 5 * time.Second

// KeepaliveTime and KeepaliveTimeout are the servers' own keepalive: a
// connection silent for KeepaliveTime is pinged, and closed when the ping
// goes unanswered for KeepaliveTimeout.
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// Server is a gRPC server with its health service.
type Server struct {
	// GRPC is the server; register services on it before Serve.
	GRPC *grpc.Server
	// Health is the gRPC health service; Ready marks it SERVING and drain
	// marks it NOT_SERVING.
	Health *health.Server
	// Unary is the server's chain of unary interceptors as one, and Codec
	// its codec: what another transport serving the same services (the
	// model gateway's event loop) runs a unary call through, so that the
	// call is counted, logged, authenticated and validated as on GRPC.
	Unary grpc.UnaryServerInterceptor
	Codec encoding.CodecV2
	// TLS is set when the server serves over TLS (Options.Creds): a
	// transport that serves plain HTTP/2 only must leave it to GRPC.
	TLS     bool
	metrics *serverMetrics
	// What Begin runs of the chain: the observer, the log of panics, the
	// auth check and the validation.
	obs       *callObserver
	log       *zap.Logger
	authFn    auth.AuthFunc
	needsAuth func(service string) bool
	validate  func(string, any) error
}

// New builds a Server. Register the services on s.GRPC, then call Ready.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil || opts.Registry == nil {
		return nil, errors.New("grpcserver: Logger and Registry are required")
	}
	if opts.SlowCall <= 0 {
		opts.SlowCall = time.Second
	}
	if opts.MaxMsgBytes <= 0 {
		opts.MaxMsgBytes = DefaultMaxMsgBytes
	}
	metrics := newServerMetrics([]float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120})
	if err := opts.Registry.Register(metrics); err != nil {
		return nil, fmt.Errorf("register grpc metrics: %w", err)
	}
	obs := &callObserver{m: metrics, log: opts.Logger, slow: opts.SlowCall}
	recoverOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		opts.Logger.Error("panic in handler", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	authFn := bearerAuth(opts.AuthToken)
	authService := func(service string) bool {
		return opts.AuthToken != "" && service != healthpb.Health_ServiceDesc.ServiceName &&
			service != "grpc.reflection.v1.ServerReflection" && service != "grpc.reflection.v1alpha.ServerReflection"
	}
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return authService(c.Service)
	})

	// Interceptor order, outermost first:
	//  1. recovery: a panic anywhere below becomes Internal, and the process lives;
	//  2. metrics and logging: every call is counted, including those
	//     refused below, and slow or failed ones are logged with the final
	//     code (see observe.go);
	//  3. auth: refuse unauthenticated calls before any work or validation
	//     reveals anything about the request;
	//  4. validation: the handler only ever sees well-formed requests; a
	//     message the codec could not parse is refused here (see codec.go).
	var credOpts []grpc.ServerOption
	if opts.Creds != nil {
		credOpts = append(credOpts, grpc.Creds(opts.Creds))
	}
	unary := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(recoverOpt),
		obs.unary,
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(authFn), needsAuth),
		validateUnary(opts.Validate),
	}
	codec := newServerCodec()
	srv := grpc.NewServer(append(append(credOpts, TransportOptions(opts.MaxMsgBytes)...),
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(
			recovery.StreamServerInterceptor(recoverOpt),
			obs.stream,
			selector.StreamServerInterceptor(auth.StreamServerInterceptor(authFn), needsAuth),
			validateStream(opts.Validate),
		),
	)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	// Until Ready, the overall status says the server is not serving yet.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return &Server{
		GRPC: srv, Health: hs, Unary: chainUnary(unary), Codec: codec, TLS: opts.Creds != nil, metrics: metrics,
		obs: obs, log: opts.Logger, authFn: authFn, needsAuth: authService, validate: opts.Validate,
	}, nil
}

// chainUnary makes one interceptor of several, the first outermost, as
// grpc.ChainUnaryInterceptor does inside a server.
func chainUnary(chain []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return chain[0](ctx, req, info, nextUnary(chain, 0, info, handler))
	}
}

// nextUnary is the handler the i-th interceptor of chain calls.
func nextUnary(chain []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(chain)-1 {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return chain[i+1](ctx, req, info, nextUnary(chain, i+1, info, final))
	}
}

// TransportOptions are the transport settings of every server New builds
// (buffer pool, flow-control windows, stream workers, message size bounds
// of maxMsgBytes, keepalive), without its codec, interceptors or
// services: what a benchmark measuring grpc-go's own floor runs with, so
// that the floor differs from the mesh's servers only by the mesh's code.
func TransportOptions(maxMsgBytes int) []grpc.ServerOption {
	return []grpc.ServerOption{
		experimental.BufferPool(bufferPool),
		// Steps carry 0.2-3 MB screenshots. With the 64 KB window HTTP/2
		// starts with, a sender waits for several window updates per such
		// message; measured on storage's ingest, a 1 MB stream window cut
		// the median wait for the next message from milliseconds to 0.1 ms
		// and raised steps/s by 10-15 %. It also bounds what one stream
		// (1 MB) and one connection (4 MB) can make the server buffer,
		// where gRPC's adaptive window may grow to 16 MB.
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(4 * windowBytes),
		// Without workers grpc-go starts a goroutine per call, whose stack
		// then grows (allocated anew and copied, frame by frame) through
		// the interceptors, the handler and its I/O: a fifth of the
		// instructions of a model gateway Chat call under callgrind.
		// A worker keeps its grown stack from call to call. Calls that find
		// every worker busy (long generations, streams) get their own
		// goroutine as before.
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
		grpc.MaxRecvMsgSize(maxMsgBytes),
		grpc.MaxSendMsgSize(maxMsgBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    KeepaliveTime,
			Timeout: KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             MinPingInterval,
			PermitWithoutStream: true,
		}),
	}
}

// Ready initialises per-method metrics and marks the server and every
// registered service SERVING. Call it after registering the services.
func (s *Server) Ready() {
	s.metrics.initialize(s.GRPC)
	for name := range s.GRPC.GetServiceInfo() {
		s.Health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

func bearerAuth(token string) auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		got, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, status.Error(codes.Unauthenticated, "invalid bearer token")
		}
		return ctx, nil
	}
}

// fieldViolation is implemented by validation errors that name a field, such
// as daemon.FieldError; the field goes into a BadRequest detail as well.
type fieldViolation interface {
	error
	FieldViolation() (field, description string)
}

func invalid(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	st := status.New(codes.InvalidArgument, err.Error())
	var fv fieldViolation
	if errors.As(err, &fv) {
		field, desc := fv.FieldViolation()
		if withDetails, derr := st.WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}},
		}); derr == nil {
			st = withDetails
		}
	}
	return st.Err()
}

func validateUnary(validate func(string, any) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := malformed(req); err != nil {
			return nil, err
		}
		if validate != nil {
			if err := validate(info.FullMethod, req); err != nil {
				return nil, invalid(err)
			}
		}
		return handler(ctx, req)
	}
}

// validateStream checks every message a client sends on a stream.
func validateStream(validate func(string, any) error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &validatingStream{ServerStream: ss, method: info.FullMethod, validate: validate})
	}
}

type validatingStream struct {
	grpc.ServerStream
	method   string
	validate func(string, any) error
}

func (s *validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := malformed(m); err != nil {
		return err
	}
	if s.validate == nil {
		return nil
	}
	if err := s.validate(s.method, m); err != nil {
		return invalid(err)
	}
	return nil
}
