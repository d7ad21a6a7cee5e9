package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

// FuzzRequests sends requests built from fuzz input (the first byte picks
// the RPC) to a real runner, connected to a coordinator that never assigns
// work, through the real interceptor chain over an in-process connection.
// Bytes that do not parse must be InvalidArgument; no request may get
// Internal or Unknown; health stays SERVING.
func FuzzRequests(f *testing.F) {
	coordLis := bufconn.Listen(1 << 20)
	cs := grpc.NewServer()
	rmv1.RegisterCoordinatorServer(cs, &testCoordinator{streams: make(chan *coordStream, 1024)})
	go cs.Serve(coordLis) //nolint:errcheck // ends with Stop
	f.Cleanup(cs.Stop)
	coordConn, err := daemontest.DialInMemory(coordLis)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { coordConn.Close() })

	env := daemontest.Env(f)
	// A logger bound to f may not be used inside the fuzz function.
	env.Logger = zap.NewNop()
	svc, err := runner.NewWithConns(context.Background(), runner.Config{RunnerID: "fuzz", Slots: 1},
		env, runner.Conns{Coordinator: coordConn, Gateway: coordConn})
	if err != nil {
		f.Fatal(err)
	}
	conn := daemontest.ServeInMemory(f, env, svc)
	health := healthpb.NewHealthClient(conn)
	var calls atomic.Int64

	methods := []struct {
		name       string
		req, reply func() proto.Message
	}{
		{"GetStatus", func() proto.Message { return &rmv1.GetStatusRequest{} }, func() proto.Message { return &rmv1.GetStatusResponse{} }},
		{"ListEpisodes", func() proto.Message { return &rmv1.ListRunnerEpisodesRequest{} }, func() proto.Message { return &rmv1.ListRunnerEpisodesResponse{} }},
		{"CancelEpisode", func() proto.Message { return &rmv1.CancelEpisodeRequest{} }, func() proto.Message { return &rmv1.CancelEpisodeResponse{} }},
	}
	for i, m := range []proto.Message{&rmv1.GetStatusRequest{}, &rmv1.ListRunnerEpisodesRequest{}, &rmv1.CancelEpisodeRequest{EpisodeId: "e1", Reason: "r"}} {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Add([]byte{2, 0x0a, 0x05, 'a'}) // a truncated string

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := methods[int(data[0])%len(methods)]
		full := "/rolloutmesh.v1.Runner/" + m.name
		body := data[1:]
		req := m.req()
		malformed := proto.Unmarshal(body, req) != nil
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		if malformed {
			var raw []byte
			err = conn.Invoke(cctx, full, body, &raw, grpc.ForceCodecV2(daemontest.RawCodec{}))
		} else {
			err = conn.Invoke(cctx, full, req, m.reply())
		}
		code := status.Code(err)
		switch {
		case malformed && code != codes.InvalidArgument:
			t.Fatalf("%s with bytes that do not parse (%x): %v, want InvalidArgument", m.name, body, err)
		case code == codes.Internal || code == codes.Unknown:
			t.Fatalf("%s(%v): %v", m.name, req, err)
		}
		// Health every 16th call: each check is a call of its own, and a
		// dead or stuck server would fail the next calls as well.
		if calls.Add(1)%16 != 0 {
			return
		}
		hc, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health after %s(%v): %v, %v", m.name, req, hc.GetStatus(), err)
		}
	})
}
