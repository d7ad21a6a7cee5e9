package osworld

import (
	"context"
	"fmt"
	"path"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/table"
)

// getContentFromVMFile is OSWorld's content_from_vm_file: the guest file
// saved as vm_file does (dest: its base name), then, for file_type xlsx
// and file_content last_row, the last data row as strings (see
// table.LastRow). A file that is missing or has no data row is None.
func getContentFromVMFile(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	p := str(cfg, "path")
	if p == "" {
		return nil, fmt.Errorf("content_from_vm_file: path is required")
	}
	if ft, fc := str(cfg, "file_type"), str(cfg, "file_content"); ft != "xlsx" || fc != "last_row" {
		return nil, fmt.Errorf("content_from_vm_file: file_type %q with file_content %q is not one OSWorld reads", ft, fc)
	}
	local, err := getVMFile(ctx, s, map[string]any{"path": p, "dest": path.Base(p)})
	if err != nil || local == nil {
		return nil, err
	}
	lp, _ := local.(string)
	// pandas raises on a file it cannot read or a sheet without rows;
	// OSWorld's evaluator then has no value, which its metric scores 0.
	row, ok, err := table.LastRow(lp)
	if err != nil {
		return noneBecause(ctx, "%s does not read as a workbook: %v", p, err)
	}
	if !ok {
		return noneBecause(ctx, "the first sheet of %s has no data row", p)
	}
	out := make([]any, len(row))
	for i, v := range row {
		out[i] = v
	}
	return out, nil
}
