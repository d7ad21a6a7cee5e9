//go:build !linux

package blobstore

import (
	"os"
	"syscall"
)

// syncFS falls back to sync(2) where syncfs(2) does not exist. Linux is the
// supported platform; elsewhere sync may return before the data is on disk.
func syncFS(string) error {
	syscall.Sync()
	return nil
}

func newTemp(dir string) (*temp, error) { return newNamedTemp(dir) }

func (t *temp) link(name string) error { return os.Link(t.name, name) }
