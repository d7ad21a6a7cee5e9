package coordinator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// LoadTasks reads a task source exactly as StartRollout does (every layout
// it accepts, with its caps), for tools on the same machine such as
// `rollout tasks check`: path's own directory (or path, when it is one) is
// the only task root. index names an OSWorld index file ("" for
// test_all.json).
func LoadTasks(ctx context.Context, path, index string) ([]*pb.Task, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("task source %s: %w", path, err)
	}
	root := filepath.Dir(abs)
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		root = abs
	}
	roots, err := tasksource.NewRoots([]string{root})
	if err != nil {
		return nil, err
	}
	return tasksource.Load(ctx, roots, abs, index)
}
