// Package daemontest gives tests a daemon.Env and a way to run a built
// service on a loopback listener.
package daemontest

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap/zaptest"

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
