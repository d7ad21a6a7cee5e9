package blobstore

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// createPack creates a pack file and, if direct is set and the file system
// has O_DIRECT (tmpfs before Linux 6.6 has not), switches it to O_DIRECT
// writes; it reports which it got.
func createPack(path string, direct bool) (*os.File, bool, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return nil, false, fmt.Errorf("create pack: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	if !direct {
		return f, false, nil
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT)
	}
	return f, err == nil, nil
}

// preallocate reserves [off, off+n) of f, extending it, so that writes
// into the range need not each grow the file.
func preallocate(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return errors.ErrUnsupported
	}
	return err
}

// punchHole frees [off, off+n) of f without changing its size.
func punchHole(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return errors.ErrUnsupported
	}
	return err
}

// datasync makes f's data, and the metadata needed to read it, durable.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
