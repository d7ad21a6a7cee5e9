package grpcserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The metrics and the log of every call, in one interceptor. Until
// session 11 they were go-grpc-middleware's prometheus and logging
// interceptors, which did per call what only has to be done once per
// method or only for the calls that are logged: five label-hash lookups
// of the metric vectors, a reporter, and the log fields of every call
// (peer address, start time and deadline formatted as text, copied into
// the context) even though only slow or failed calls are logged. That was
// a tenth of the instructions of a model gateway Chat call. Here each
// method's metrics are looked up once, in Ready, and a call's log fields
// are built only when it is logged. The metric names, labels and help
// texts are go-grpc-middleware's, which dashboards know.

// methodTypes are the grpc_type label values.
const (
	typeUnary        = "unary"
	typeClientStream = "client_stream"
	typeServerStream = "server_stream"
	typeBidiStream   = "bidi_stream"
)

// numCodes is the number of gRPC codes (OK to Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// serverMetrics are the gRPC server metrics.
type serverMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	seconds                          *prometheus.HistogramVec
	// methods holds each registered method's metrics by full method
	// name; Ready fills it, and it is not changed after.
	methods atomic.Pointer[map[string]*methodMetrics]
}

// methodMetrics are one method's metrics, resolved from the vectors.
type methodMetrics struct {
	typ, service, method    string
	started, received, sent prometheus.Counter
	handled                 [numCodes]prometheus.Counter
	seconds                 prometheus.Observer
	m                       *serverMetrics
}

func newServerMetrics(buckets []float64) *serverMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	return &serverMetrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_started_total", Help: "Total number of RPCs started on the server.",
		}, labels),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_handled_total", Help: "Total number of RPCs completed on the server, regardless of success or failure.",
		}, append(labels[:3:3], "grpc_code")),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_msg_received_total", Help: "Total number of RPC stream messages received on the server.",
		}, labels),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_msg_sent_total", Help: "Total number of gRPC stream messages sent by the server.",
		}, labels),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_handling_seconds",
			Help:    "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
			Buckets: buckets,
		}, labels),
	}
}

var _ prometheus.Collector = (*serverMetrics)(nil)

func (m *serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *serverMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.handled, m.received, m.sent, m.seconds}
}

// resolve looks up a method's metrics in the vectors, which creates them
// at zero.
func (m *serverMetrics) resolve(typ, fullMethod string) *methodMetrics {
	service, method := splitMethod(fullMethod)
	mm := &methodMetrics{
		typ: typ, service: service, method: method, m: m,
		started:  m.started.WithLabelValues(typ, service, method),
		received: m.received.WithLabelValues(typ, service, method),
		sent:     m.sent.WithLabelValues(typ, service, method),
		seconds:  m.seconds.WithLabelValues(typ, service, method),
	}
	for c := range mm.handled {
		mm.handled[c] = m.handled.WithLabelValues(typ, service, method, codes.Code(c).String())
	}
	return mm
}

// initialize resolves the metrics of every method registered on srv.
func (m *serverMetrics) initialize(srv *grpc.Server) {
	methods := map[string]*methodMetrics{}
	for service, info := range srv.GetServiceInfo() {
		for _, mi := range info.Methods {
			full := "/" + service + "/" + mi.Name
			methods[full] = m.resolve(methodType(mi.IsClientStream, mi.IsServerStream), full)
		}
	}
	m.methods.Store(&methods)
}

// method returns the metrics of a call's method: resolved in initialize,
// or looked up now for a method it did not see.
func (m *serverMetrics) method(typ, fullMethod string) *methodMetrics {
	if p := m.methods.Load(); p != nil {
		if mm, ok := (*p)[fullMethod]; ok && mm.typ == typ {
			return mm
		}
	}
	return m.resolve(typ, fullMethod)
}

func (mm *methodMetrics) done(code codes.Code, took time.Duration) {
	if int(code) < numCodes {
		mm.handled[code].Inc()
	} else {
		mm.m.handled.WithLabelValues(mm.typ, mm.service, mm.method, code.String()).Inc()
	}
	mm.seconds.Observe(took.Seconds())
}

func methodType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return typeBidiStream
	case clientStream:
		return typeClientStream
	case serverStream:
		return typeServerStream
	}
	return typeUnary
}

// splitMethod splits "/package.Service/Method".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", "unknown"
}

// codeOf is the code a call ended with, as grpc-go reports it: context
// errors map to their codes, other non-status errors to Unknown.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// callObserver counts every call and logs the slow and the failed ones.
type callObserver struct {
	m    *serverMetrics
	log  *zap.Logger
	slow time.Duration
}

func (o *callObserver) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	mm := o.m.method(typeUnary, info.FullMethod)
	mm.started.Inc()
	mm.received.Inc()
	start := time.Now()
	resp, err := handler(ctx, req)
	took := time.Since(start)
	if err == nil {
		mm.sent.Inc()
	}
	code := codeOf(err)
	mm.done(code, took)
	if err != nil || took >= o.slow {
		o.logCall(ctx, mm, start, took, code, err)
	}
	return resp, err
}

func (o *callObserver) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	mm := o.m.method(methodType(info.IsClientStream, info.IsServerStream), info.FullMethod)
	mm.started.Inc()
	start := time.Now()
	err := handler(srv, &countingStream{ServerStream: ss, mm: mm})
	took := time.Since(start)
	code := codeOf(err)
	mm.done(code, took)
	// Streams are long by nature: only failures are logged.
	if err != nil && !errors.Is(err, io.EOF) {
		o.logCall(ss.Context(), mm, start, took, code, err)
	}
	return err
}

// logCall logs a slow or failed call, at the level go-grpc-middleware
// gave its code: info for the caller's mistakes (InvalidArgument,
// NotFound, ...), warn for refusals and timeouts, error for the server's
// faults; a slow successful call at warn.
func (o *callObserver) logCall(ctx context.Context, mm *methodMetrics, start time.Time, took time.Duration, code codes.Code, err error) {
	lvl, msg := zapcore.WarnLevel, "slow call"
	if err != nil {
		lvl, msg = codeLevel(code), "call failed"
	}
	ce := o.log.Check(lvl, msg)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 11)
	fields = append(fields,
		zap.String("protocol", "grpc"), zap.String("grpc.component", "server"),
		zap.String("grpc.service", mm.service), zap.String("grpc.method", mm.method),
		zap.String("grpc.method_type", mm.typ))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		fields = append(fields, zap.String("peer.address", p.Addr.String()))
	}
	fields = append(fields, zap.Time("grpc.start_time", start))
	if d, ok := ctx.Deadline(); ok {
		fields = append(fields, zap.Time("grpc.request.deadline", d))
	}
	fields = append(fields, zap.String("grpc.code", code.String()))
	if err != nil {
		fields = append(fields, zap.String("grpc.error", err.Error()))
	}
	fields = append(fields, zap.Float64("grpc.time_ms", float64(took)/float64(time.Millisecond)))
	ce.Write(fields...)
}

// codeLevel is go-grpc-middleware's DefaultServerCodeToLevel for a failed
// call.
func codeLevel(c codes.Code) zapcore.Level {
	switch c {
	case codes.NotFound, codes.Canceled, codes.AlreadyExists, codes.InvalidArgument, codes.Unauthenticated:
		return zapcore.InfoLevel
	case codes.DeadlineExceeded, codes.PermissionDenied, codes.ResourceExhausted, codes.FailedPrecondition,
		codes.Aborted, codes.OutOfRange, codes.Unavailable:
		return zapcore.WarnLevel
	}
	return zapcore.ErrorLevel
}

// countingStream counts the messages of a stream.
type countingStream struct {
	grpc.ServerStream
	mm *methodMetrics
}

func (s *countingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil {
		s.mm.sent.Inc()
	}
	return err
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.mm.received.Inc()
	}
	return err
}
