package mesh

import (
	"fmt"
	"os"
)

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}
