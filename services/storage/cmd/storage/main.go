// Command storage runs the rolloutmesh storage service; `storage fsck`
// checks a stopped service's index and blobs.
package main

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

func main() {
	var cfg storage.Config
	daemon.Main(daemon.Spec{
		Name:     "storage",
		GRPCAddr: ":50055",
		HTTPAddr: ":9105",
		DataDir:  true,
		Flags:    cfg.RegisterFlags,
		Start: func(ctx context.Context, env daemon.Env) (daemon.Service, error) {
			return storage.New(ctx, cfg, env)
		},
		Commands: map[string]daemon.Command{"fsck": storage.Fsck},
	})
}
