// Command modelgateway runs the rolloutmesh model gateway: gRPC on :50054,
// OpenAI-compatible HTTP on :8000, metrics on :9104.
package main

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
)

func main() {
	var cfg modelgateway.Config
	daemon.Main(daemon.Spec{
		Name:     "modelgateway",
		GRPCAddr: ":50054",
		HTTPAddr: ":9104",
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return modelgateway.New(ctx, cfg, env)
		},
	})
}
