// Command vmmanager runs the rolloutmesh VM manager: pools of VMs handed out
// as leases (see services/vmmanager/README.md).
package main

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"
)

func main() {
	var cfg vmmanager.Config
	daemon.Main(daemon.Spec{
		Name:     "vmmanager",
		GRPCAddr: ":50051",
		HTTPAddr: ":9101",
		DataDir:  true,
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return vmmanager.New(ctx, cfg, env)
		},
	})
}
