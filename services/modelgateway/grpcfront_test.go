package modelgateway

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/fakellm"
)

// The gateway's gRPC tests run on both engines of the gRPC front (make
// test sets MODELGATEWAY_TEST_GRPC_ENGINE); these are about what only the
// event loop does: it runs the gateway's methods itself and hands the
// rest of the API to grpc-go's server on the same port.
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
