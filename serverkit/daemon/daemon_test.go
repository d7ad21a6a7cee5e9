package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoService is a real gRPC service described by hand, so the plumbing can
// be tested over a real transport without depending on the API module.
type echoService struct {
	closed  chan struct{}
	drained chan struct{}
}

func newEcho() *echoService {
	return &echoService{closed: make(chan struct{}), drained: make(chan struct{})}
}

func (e *echoService) Register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Echo",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					v := req.(*wrapperspb.StringValue).GetValue()
					if v == "panic" {
						panic("boom")
					}
					return wrapperspb.String(v), nil
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Echo/Echo"}, h)
			},
		}},
		Streams: []grpc.StreamDesc{{
			// Collect echoes every message it receives until the client
			// closes its side.
			StreamName: "Collect", ClientStreams: true, ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				for {
					in := new(wrapperspb.StringValue)
					if err := ss.RecvMsg(in); errors.Is(err, io.EOF) {
						return nil
					} else if err != nil {
						return err
					}
					if err := ss.SendMsg(in); err != nil {
						return err
					}
				}
			},
		}},
	}, e)
}

func (e *echoService) ValidateRequest(method string, req any) error {
	if v, ok := req.(*wrapperspb.StringValue); ok && v.GetValue() == "" {
		return InvalidField("value", "must not be empty")
	}
	return nil
}

func (e *echoService) Drain(context.Context) error { close(e.drained); return nil }

func (e *echoService) Close(context.Context) error { close(e.closed); return nil }

type running struct {
	conn   *grpc.ClientConn
	http   string
	cancel context.CancelFunc
	done   chan error
	svc    *echoService
}

func start(t *testing.T, token string) *running {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), svc: newEcho(), http: "http://" + hl.Addr().String()}
	go func() {
		r.done <- Serve(ctx, ServeConfig{
			GRPCListener: gl, HTTPListener: hl, Logger: zaptest.NewLogger(t), Registry: NewRegistry(),
			AuthToken: token, DrainTimeout: 2 * time.Second,
		}, r.svc)
	}()
	r.conn, err = grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("Serve() = %v, want nil after drain", err)
	}
	r.conn.Close()
}

func (r *running) echo(ctx context.Context, v string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := r.conn.Invoke(ctx, "/test.Echo/Echo", wrapperspb.String(v), out)
	return out.GetValue(), err
}

func TestServeCallsValidatesRecoversAndDrains(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()

	hc, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "test.Echo"})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v; want SERVING", hc.GetStatus(), err)
	}

	tests := []struct {
		in       string
		wantCode codes.Code
		wantOut  string
	}{
		{in: "hi", wantCode: codes.OK, wantOut: "hi"},
		{in: "", wantCode: codes.InvalidArgument},
		{in: "panic", wantCode: codes.Internal},
		{in: "again", wantCode: codes.OK, wantOut: "again"}, // alive after the panic
	}
	for _, tt := range tests {
		got, err := r.echo(ctx, tt.in)
		if status.Code(err) != tt.wantCode || got != tt.wantOut {
			t.Errorf("Echo(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.wantOut, tt.wantCode)
		}
	}

	_, err = r.echo(ctx, "")
	st, _ := status.FromError(err)
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	if field != "value" || !strings.Contains(st.Message(), "value: must not be empty") {
		t.Errorf("validation error = %q with field %q; want it to name field %q", st.Message(), field, "value")
	}

	body := httpGet(t, r.http+"/metrics")
	for _, want := range []string{`grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="Echo"`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := httpGet(t, r.http+"/healthz"); got != "ok\n" {
		t.Errorf("/healthz = %q, want ok", got)
	}

	r.stop(t)
	for name, ch := range map[string]chan struct{}{"Drain": r.svc.drained, "Close": r.svc.closed} {
		select {
		case <-ch:
		default:
			t.Errorf("%s was not called on drain", name)
		}
	}
}

func TestBearerToken(t *testing.T) {
	r := start(t, "s3cret")
	tests := []struct {
		name string
		md   metadata.MD
		want codes.Code
	}{
		{name: "missing", want: codes.Unauthenticated},
		{name: "wrong", md: metadata.Pairs("authorization", "Bearer nope"), want: codes.Unauthenticated},
		{name: "right", md: metadata.Pairs("authorization", "Bearer s3cret"), want: codes.OK},
	}
	for _, tt := range tests {
		ctx := metadata.NewOutgoingContext(context.Background(), tt.md)
		if _, err := r.echo(ctx, "x"); status.Code(err) != tt.want {
			t.Errorf("%s token: code %v, want %v", tt.name, status.Code(err), tt.want)
		}
	}
	// Health stays open so probes and orchestrators work without the token.
	if _, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without token: %v", err)
	}
}

func TestRunHealthcheckAndSignalDrain(t *testing.T) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := gl.Addr().String()
	gl.Close()

	ctx, cancel := context.WithCancel(context.Background())
	svc := newEcho()
	spec := Spec{
		Name: "echo", GRPCAddr: addr, HTTPAddr: "", DataDir: true,
		Start: func(ctx context.Context, env Env) (Service, error) { return svc, nil },
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, spec, []string{"--data-dir", t.TempDir(), "--log-level", "warn", "--drain-timeout", "1s"})
	}()

	deadline := time.Now().Add(5 * time.Second)
	for {
		err = Run(context.Background(), spec, []string{"healthcheck", "--addr", addr, "--timeout", "200ms"})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("healthcheck of a running service: %v", err)
	}
	cancel() // what SIGTERM does through signal.NotifyContext in Main
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() after drain = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within its drain time")
	}
	if err := Run(context.Background(), spec, []string{"healthcheck", "--addr", addr, "--timeout", "200ms"}); err == nil {
		t.Error("healthcheck of a stopped service succeeded")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	spec := Spec{Name: "echo", GRPCAddr: "127.0.0.1:0", Start: func(context.Context, Env) (Service, error) {
		return nil, errors.New("must not start")
	}}
	for _, args := range [][]string{{"--nope"}, {"stray"}, {"--log-level", "loud"}} {
		err := Run(context.Background(), spec, args)
		if !errors.As(err, new(usageError)) {
			t.Errorf("Run(%q) = %v, want a usage error", args, err)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// ownTransport is an echo service that serves its gRPC listener itself
// (GRPCServer), here with the server it is handed, and whose transport
// then fails.
type ownTransport struct {
	*echoService
	stopped chan error
	served  chan struct{}
}

func (o *ownTransport) ServeGRPC(ln net.Listener, srv *grpcserver.Server) (<-chan error, error) {
	go srv.GRPC.Serve(ln)
	close(o.served)
	return o.stopped, nil
}

// TestOwnGRPCTransportFailure: a service's own gRPC transport that stops
// by itself ends Serve with its error, after the drain, as a failed
// listener does.
func TestOwnGRPCTransportFailure(t *testing.T) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &ownTransport{echoService: newEcho(), stopped: make(chan error, 1), served: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), ServeConfig{GRPCListener: gl, Logger: zaptest.NewLogger(t), Registry: NewRegistry(), DrainTimeout: time.Second}, svc)
	}()
	<-svc.served
	svc.stopped <- errors.New("event loops stopped")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "serve grpc: event loops stopped") {
			t.Errorf("Serve() = %v, want the transport's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running 10s after its gRPC transport stopped")
	}
	select {
	case <-svc.drained:
	default:
		t.Error("the service was not drained")
	}
	select {
	case <-svc.closed:
	default:
		t.Error("the service was not closed")
	}
}
