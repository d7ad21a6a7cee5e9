// Command coordinator runs the rolloutmesh coordinator service: rollouts,
// GRPO groups, dispatch to runners, VM leases and batches.
package main

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
)

func main() {
	var cfg coordinator.Config
	daemon.Main(daemon.Spec{
		Name:     "coordinator",
		GRPCAddr: ":50052",
		HTTPAddr: ":9102",
		DataDir:  true,
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return coordinator.New(ctx, cfg, env)
		},
	})
}
