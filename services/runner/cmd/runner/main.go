// Command runner runs one rolloutmesh runner replica (gRPC :50053, HTTP
// :9103), or one of its subcommands: `runner episode` runs a single task
// without a coordinator, `runner parse` shows how an action space parses a
// model answer.
package main

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

func main() {
	var cfg runner.Config
	daemon.Main(daemon.Spec{
		Name:     "runner",
		GRPCAddr: ":50053",
		HTTPAddr: ":9103",
		DataDir:  true,
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return runner.New(ctx, cfg, env)
		},
		Commands: runner.Commands(),
	})
}
