// Command rollout is the rolloutmesh command line: it runs rollouts on the
// embedded all-in-one mesh and inspects a running mesh.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := command.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rollout: %v\n", err)
		os.Exit(command.ExitCode(err))
	}
}
