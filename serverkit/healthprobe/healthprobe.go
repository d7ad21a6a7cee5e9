// Package healthprobe asks a gRPC server whether it is serving. It backs the
// `healthcheck` subcommand of every binary, which container health checks
// run because the images have no shell or curl.
package healthprobe

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Check returns nil when the server at addr reports SERVING for service
// ("" is the server as a whole). It dials plaintext unless opts carry
// transport credentials (grpc.WithTransportCredentials, for a TLS server).
func Check(ctx context.Context, addr, service string, opts ...grpc.DialOption) error {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("health check %s: %w", addr, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check %s: %s", addr, resp.GetStatus())
	}
	return nil
}
