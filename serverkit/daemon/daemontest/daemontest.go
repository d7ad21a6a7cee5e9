// Package daemontest gives tests a daemon.Env and ways to run a built
// service: on a loopback listener, or in memory for fuzz targets.
package daemontest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/test/bufconn"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
)

// Env returns an Env with a logger bound to t, a fresh registry and a
// temporary data directory.
func Env(t testing.TB) daemon.Env {
	t.Helper()
	return daemon.Env{
		Logger:   zaptest.NewLogger(t),
		Registry: daemon.NewRegistry(),
		DataDir:  t.TempDir(),
		GRPCAddr: "127.0.0.1:0",
	}
}

// Serve runs svc on a loopback port until the test ends and returns the
// address. The service is drained and closed during cleanup.
func Serve(t testing.TB, env daemon.Env, svc daemon.Service) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry}, svc)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// ServeInMemory runs svc behind the daemon's gRPC server (the real
// interceptor chain, validation and limits) on an in-memory listener until
// the test ends, and returns a connection to it. Fuzz targets use it: no
// port and no kernel socket per input.
func ServeInMemory(tb testing.TB, env daemon.Env, svc daemon.Service) *grpc.ClientConn {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry,
			DrainTimeout: time.Second}, svc)
	}()
	conn, err := DialInMemory(lis)
	if err != nil {
		cancel()
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return conn
}

// DialInMemory connects to a server on an in-memory listener.
func DialInMemory(lis *bufconn.Listener) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// RawCodec is a client codec that puts []byte on the wire as they are (and
// reads answers into a *[]byte), so that a test can send bytes no request
// message would marshal to: grpc.ForceCodecV2(daemontest.RawCodec{}).
type RawCodec struct{}

// Name is "proto": the server decodes what RawCodec sends as protobuf.
func (RawCodec) Name() string { return "proto" }

// Marshal sends v, a []byte, unchanged.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("RawCodec: want []byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal copies the answer into v, a *[]byte.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("RawCodec: want *[]byte")
	}
	*p = data.Materialize()
	return nil
}
