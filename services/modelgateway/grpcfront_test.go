package modelgateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds/tlstest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/fakellm"
)

// The gateway's gRPC tests run on both engines of the gRPC front (the
// event loop by default; make test runs them again with
// MODELGATEWAY_TEST_GRPC_ENGINE=goroutines); these are about what only
// the event loop does: it serves Chat on the loop, the gateway's other
// methods on workers, and hands the rest of the API to grpc-go's server
// on the same port.
func TestGRPCFrontOnEventLoop(t *testing.T) {
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "done"}`)})
	fc := &FileConfig{Backends: backends("vllm", f)}
	fc.GRPCFront.Engine = EngineEventLoop
	h := startGateway(t, fc, nil)
	// daemon.Serve hands the listener over on its goroutine.
	waitFor(t, "the loops to serve the gRPC listener", func() bool { return h.svc.grpcLoop.Load() != nil })

	resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, ReturnTokenIds: true})
	if err != nil || resp.GetChoices()[0].GetMessage().GetContent()[0].GetText() != "done" || len(resp.GetChoices()[0].GetTokenIds()) == 0 {
		t.Fatalf("Chat on the loops: %v, err %v; want the scripted reply with its token ids", resp, err)
	}
	if b := listBackend(t, h, "b0"); b.GetRequests() != 1 {
		t.Errorf("ListBackends on the loops: %d requests, want 1", b.GetRequests())
	}

	// Health and reflection (a stream) go to grpc-go's server.
	conn := h.conn
	hr, err := healthpb.NewHealthClient(conn).Check(ctxT(t, 5*time.Second), &healthpb.HealthCheckRequest{Service: "rolloutmesh.v1.ModelGateway"})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, err %v; want SERVING", hr, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	lr, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range lr.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "rolloutmesh.v1.ModelGateway") {
		t.Errorf("reflection lists %v, want rolloutmesh.v1.ModelGateway among them", names)
	}
	rs.CloseSend()
}

func TestGRPCFrontEngineChecked(t *testing.T) {
	fc := &FileConfig{Backends: []BackendConfig{{ID: "b", BaseURL: "http://127.0.0.1:1", Model: "m"}}}
	fc.GRPCFront.Engine = "threads"
	if err := fc.Validate(); err == nil || !strings.Contains(err.Error(), "grpc_front.engine") {
		t.Errorf("engine threads: %v, want an error naming grpc_front.engine", err)
	}
	fc.GRPCFront.Engine = EngineEventLoop
	env := daemontest.Env(t)
	env.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	_, err := New(context.Background(), Config{File: fc}, env)
	if err == nil || !strings.Contains(err.Error(), "grpc_front.engine") {
		t.Errorf("engine event_loop with TLS: %v, want an error naming grpc_front.engine", err)
	}
}

// TestGRPCFrontDefaultEngine: the gRPC front runs on the event loop by
// default, and on grpc-go's server over TLS, whether New saw the TLS
// config or only the server got the credentials (a program embedding
// the gateway); event_loop asked for by name over TLS is refused.
func TestGRPCFrontDefaultEngine(t *testing.T) {
	f := startFake(t, fakellm.Config{Script: script(t, `{"match": "", "reply": "done"}`)})
	// Not startGateway: its engine follows the environment (make test).
	env := daemontest.Env(t)
	plain, err := New(context.Background(), Config{File: &FileConfig{Backends: backends("vllm", f)}}, env)
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Serve(t, env, plain)
	waitFor(t, "the loops to serve the gRPC listener by default", func() bool { return plain.grpcLoop.Load() != nil })

	env = daemontest.Env(t)
	env.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	svc, err := New(context.Background(), Config{File: &FileConfig{Backends: backends("vllm", f)}}, env)
	if err != nil {
		t.Fatalf("default engine with TLS: %v", err)
	}
	if svc.grpcEngine != EngineGoroutines {
		t.Errorf("default engine with TLS = %q, want %q", svc.grpcEngine, EngineGoroutines)
	}
	svc.Close(context.Background())

	pki := tlstest.New(t)
	scfg, err := tlscreds.Server(pki.ServerCert, pki.ServerKey, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"", EngineEventLoop} {
		t.Run("credentials on the server, engine "+engine, func(t *testing.T) {
			fc := &FileConfig{Backends: backends("vllm", f)}
			fc.GRPCFront.Engine = engine
			env := daemontest.Env(t)
			svc, err := New(context.Background(), Config{File: fc}, env)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() {
				served <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: ln, Logger: env.Logger, Registry: env.Registry, Creds: credentials.NewTLS(scfg)}, svc)
			}()
			if engine == EngineEventLoop {
				if err := <-served; err == nil || !strings.Contains(err.Error(), "grpc_front.engine") {
					t.Errorf("event_loop with credentials on the server: Serve = %v, want an error naming grpc_front.engine", err)
				}
				cancel()
				return
			}
			defer func() { cancel(); <-served }()
			creds, err := tlscreds.Client{CA: pki.CA}.Credentials()
			if err != nil {
				t.Fatal(err)
			}
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			resp, err := rmv1.NewModelGatewayClient(conn).Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
			if err != nil || resp.GetChoices()[0].GetMessage().GetContent()[0].GetText() != "done" {
				t.Errorf("Chat over TLS on the default engine: %v, err %v", resp, err)
			}
			if svc.grpcLoop.Load() != nil {
				t.Error("the loops took a TLS listener")
			}
		})
	}
}

// loopFrontGateway starts a gateway whose gRPC front runs on the event
// loop, in front of the wire backend b, and waits until it serves.
func loopFrontGateway(t *testing.T, b *wireBackend, limits Limits) *harness {
	t.Helper()
	fc := &FileConfig{Backends: []BackendConfig{{ID: "w", BaseURL: b.srv.URL, Model: "fake-model"}}, Limits: limits}
	fc.GRPCFront.Engine = EngineEventLoop
	h := startGateway(t, fc, nil)
	waitFor(t, "the loops to serve the gRPC listener", func() bool { return h.svc.grpcLoop.Load() != nil })
	return h
}

// chatHandled is how many Chat calls the gateway's gRPC metrics counted
// as ended with code.
func chatHandled(t *testing.T, h *harness, code codes.Code) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "grpc_method":
					if l.GetValue() != "Chat" {
						continue series
					}
				case "grpc_code":
					if l.GetValue() != code.String() {
						continue series
					}
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestGRPCChatOnLoop: Chat served on the loop posts to the backend over
// one kept-alive connection (answers with a length and in chunks, the
// routing key sent), checks and counts each call as the interceptors
// do, and refuses an answer over max_response_bytes in the other
// engine's words.
func TestGRPCChatOnLoop(t *testing.T) {
	b := startWireBackend(t, chunkedOnEven)
	h := loopFrontGateway(t, b, Limits{})
	for i := range 4 {
		resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}, RoutingKey: fmt.Sprintf("k%d", i)})
		if err != nil || resp.GetChoices()[0].GetMessage().GetContent()[0].GetText() != "hi" || resp.GetBackend() != "w" || resp.GetUsage().GetCompletionTokens() != 1 {
			t.Fatalf("call %d: %v, err %v; want the backend's hi", i, resp, err)
		}
	}
	// Refused by validation, before any backend work.
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Chat without messages: %v, want InvalidArgument", err)
	}
	b.mu.Lock()
	if b.n != 4 || len(b.conns) != 1 || strings.Join(b.keys, " ") != "k0| k1| k2| k3|" {
		t.Errorf("backend got %d requests on %d connections, keys %q; want 4 on 1, keys k0-k3", b.n, len(b.conns), b.keys)
	}
	b.mu.Unlock()
	if got := chatHandled(t, h, codes.OK); got != 4 {
		t.Errorf("Chat counted OK %v times, want 4", got)
	}
	if got := chatHandled(t, h, codes.InvalidArgument); got != 1 {
		t.Errorf("Chat counted InvalidArgument %v times, want 1", got)
	}

	small := loopFrontGateway(t, b, Limits{MaxResponseBytes: 100})
	for _, want := range []string{
		fmt.Sprintf("answer of %d bytes exceeds the 100-byte limit", len(wireAnswer)), // b's 5th answer: with a length
		"answer exceeds the 100-byte limit",                                           // its 6th: in chunks
	} {
		_, err := small.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
			t.Errorf("answer over the limit: %v, want Unavailable saying %q", err, want)
		}
	}
}

// TestGRPCChatOnLoopTimedOut: a call with no deadline of its own is
// ended by limits.request_timeout on the loop, and one whose client
// gives up is ended at once; the backend sees each cancelled, and
// neither counts against it.
func TestGRPCChatOnLoopTimedOut(t *testing.T) {
	f := startFake(t, fakellm.Config{TTFT: time.Minute})
	fc := &FileConfig{Backends: backends("vllm", f), Limits: Limits{RequestTimeout: 300 * time.Millisecond}, Breaker: BreakerConfig{FailureThreshold: 1}}
	fc.GRPCFront.Engine = EngineEventLoop
	h := startGateway(t, fc, nil)
	waitFor(t, "the loops to serve the gRPC listener", func() bool { return h.svc.grpcLoop.Load() != nil })

	// No deadline: a cancel after 10s only keeps a broken gateway from
	// holding the test.
	noDeadline, stop := context.WithCancel(context.Background())
	defer time.AfterFunc(10*time.Second, stop).Stop()
	start := time.Now()
	_, err := h.cli.Chat(noDeadline, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Chat past request_timeout: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("request_timeout of 300ms ended the call after %v", took)
	}
	waitFor(t, "the backend to see the timed-out call cancelled", func() bool { return f.Stats().Canceled == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := h.cli.Chat(ctx, &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{userMsg("x")}}); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled Chat: %v, want Canceled", err)
	}
	waitFor(t, "the backend to see the cancelled call", func() bool { return f.Stats().Canceled == 2 })
	waitFor(t, "both calls counted", func() bool {
		return chatHandled(t, h, codes.DeadlineExceeded) == 1 && chatHandled(t, h, codes.Canceled) == 1
	})
	if got := listBackend(t, h, "b0").GetBreaker(); got != rmv1.BreakerState_BREAKER_STATE_CLOSED {
		t.Errorf("breaker after two calls that gave up = %v, want CLOSED", got)
	}
}
