//go:build !linux

package blobstore

import (
	"errors"
	"os"
)

// Linux is the supported platform; elsewhere packs are written through the
// page cache and deleted blobs keep their space.

func createPack(path string, _ bool) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	return f, false, err
}

func preallocate(*os.File, int64, int64) error { return errors.ErrUnsupported }

func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }

func datasync(f *os.File) error { return f.Sync() }
