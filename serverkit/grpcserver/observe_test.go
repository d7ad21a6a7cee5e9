package grpcserver

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoServer answers by its input: "fail" is NotFound, "broken" is
// Internal, "slow" takes slowCall, anything else is echoed.
type echoServer struct{}

const slowCall = 50 * time.Millisecond

func (echoServer) echo(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	switch in.GetValue() {
	case "fail":
		return nil, status.Error(codes.NotFound, "no such thing")
	case "broken":
		return nil, errors.New("disk on fire")
	case "slow":
		time.Sleep(slowCall + 10*time.Millisecond)
	}
	return in, nil
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Echo/Echo"}
			return icpt(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(echoServer).echo(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
	Streams: []grpc.StreamDesc{{
		// Collect echoes each message until the client closes its side;
		// a "fail" message ends it with FailedPrecondition.
		StreamName: "Collect", ClientStreams: true, ServerStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				in := new(wrapperspb.StringValue)
				if err := ss.RecvMsg(in); errors.Is(err, io.EOF) {
					return nil
				} else if err != nil {
					return err
				}
				if in.GetValue() == "fail" {
					return status.Error(codes.FailedPrecondition, "refused")
				}
				if err := ss.SendMsg(in); err != nil {
					return err
				}
			}
		},
	}},
}

func startEcho(t *testing.T) (*grpc.ClientConn, *observer.ObservedLogs, *prometheus.Registry) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, conn, logs, reg := serveEcho(t, ln)
	return conn, logs, reg
}

// serveEcho serves the echo service on ln and dials it, with opts after
// plaintext credentials. Both end with the test.
func serveEcho(t *testing.T, ln net.Listener, opts ...grpc.DialOption) (*Server, *grpc.ClientConn, *observer.ObservedLogs, *prometheus.Registry) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	s, err := New(Options{Logger: zap.New(core), Registry: reg, SlowCall: slowCall})
	if err != nil {
		t.Fatal(err)
	}
	s.GRPC.RegisterService(&echoDesc, echoServer{})
	s.Ready()
	go s.GRPC.Serve(ln)
	t.Cleanup(s.GRPC.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn, logs, reg
}

// metricValue is the value of the series of name with exactly labels, or
// -1 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func TestUnaryCallsLoggedOnlyWhenSlowOrFailed(t *testing.T) {
	conn, logs, reg := startEcho(t)
	tests := []struct {
		in       string
		wantCode codes.Code
		wantMsg  string // "" = not logged
		wantLvl  zapcore.Level
	}{
		{"hi", codes.OK, "", 0},
		{"fail", codes.NotFound, "call failed", zapcore.InfoLevel},
		{"broken", codes.Unknown, "call failed", zapcore.ErrorLevel},
		{"slow", codes.OK, "slow call", zapcore.WarnLevel},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			logs.TakeAll()
			err := conn.Invoke(context.Background(), "/test.Echo/Echo", wrapperspb.String(tt.in), new(wrapperspb.StringValue))
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("Echo(%q) code = %v, want %v", tt.in, got, tt.wantCode)
			}
			got := logs.TakeAll()
			if tt.wantMsg == "" {
				if len(got) != 0 {
					t.Errorf("Echo(%q) logged %v, want nothing", tt.in, got)
				}
				return
			}
			if len(got) != 1 || got[0].Message != tt.wantMsg || got[0].Level != tt.wantLvl {
				t.Fatalf("Echo(%q) logged %v, want one %q at %v", tt.in, got, tt.wantMsg, tt.wantLvl)
			}
			f := got[0].ContextMap()
			if f["grpc.service"] != "test.Echo" || f["grpc.method"] != "Echo" || f["grpc.method_type"] != "unary" ||
				f["grpc.code"] != tt.wantCode.String() || f["peer.address"] == nil || f["grpc.time_ms"] == nil {
				t.Errorf("Echo(%q) log fields = %v, want service, method, type, code %v, peer and time", tt.in, f, tt.wantCode)
			}
			if _, hasErr := f["grpc.error"]; hasErr != (tt.wantCode != codes.OK) {
				t.Errorf("Echo(%q) log fields = %v: grpc.error present %v, want %v", tt.in, f, hasErr, tt.wantCode != codes.OK)
			}
		})
	}
	unary := map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo"}
	withCode := func(c codes.Code) map[string]string {
		m := map[string]string{"grpc_code": c.String()}
		for k, v := range unary {
			m[k] = v
		}
		return m
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_started_total", unary, 4},
		{"grpc_server_msg_received_total", unary, 4},
		{"grpc_server_msg_sent_total", unary, 2},
		{"grpc_server_handling_seconds", unary, 4},
		{"grpc_server_handled_total", withCode(codes.OK), 2},
		{"grpc_server_handled_total", withCode(codes.NotFound), 1},
		{"grpc_server_handled_total", withCode(codes.Unknown), 1},
		{"grpc_server_handled_total", withCode(codes.Internal), 0}, // created by Ready
	} {
		if got := metricValue(t, reg, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}

func TestStreamsLoggedOnlyWhenFailed(t *testing.T) {
	conn, logs, reg := startEcho(t)
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	run := func(msgs ...string) error {
		s, err := conn.NewStream(context.Background(), desc, "/test.Echo/Collect")
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := s.SendMsg(wrapperspb.String(m)); err != nil {
				break
			}
		}
		s.CloseSend()
		for {
			if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	if err := run("a", "b", "c"); err != nil {
		t.Fatalf("stream of three messages: %v", err)
	}
	if got := logs.TakeAll(); len(got) != 0 {
		t.Errorf("a successful stream logged %v, want nothing", got)
	}
	if err := run("a", "fail"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("failing stream: %v, want FailedPrecondition", err)
	}
	got := logs.TakeAll()
	if len(got) != 1 || got[0].Message != "call failed" || got[0].ContextMap()["grpc.method_type"] != "bidi_stream" ||
		got[0].ContextMap()["grpc.code"] != "FailedPrecondition" {
		t.Errorf("a failed stream logged %v, want one call failed, bidi_stream, FailedPrecondition", got)
	}
	bidi := map[string]string{"grpc_type": "bidi_stream", "grpc_service": "test.Echo", "grpc_method": "Collect"}
	for _, tt := range []struct {
		name string
		want float64
	}{
		{"grpc_server_started_total", 2}, {"grpc_server_msg_received_total", 5}, {"grpc_server_msg_sent_total", 4},
	} {
		if got := metricValue(t, reg, tt.name, bidi); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, bidi, got, tt.want)
		}
	}
}

func TestSplitMethod(t *testing.T) {
	tests := []struct{ in, service, method string }{
		{"/rolloutmesh.v1.ModelGateway/Chat", "rolloutmesh.v1.ModelGateway", "Chat"},
		{"/grpc.health.v1.Health/Check", "grpc.health.v1.Health", "Check"},
		{"nonsense", "unknown", "unknown"},
	}
	for _, tt := range tests {
		if s, m := splitMethod(tt.in); s != tt.service || m != tt.method {
			t.Errorf("splitMethod(%q) = %q, %q; want %q, %q", tt.in, s, m, tt.service, tt.method)
		}
	}
}
