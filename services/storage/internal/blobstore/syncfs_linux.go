package blobstore

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// syncFS makes everything written to the file system holding dir durable,
// directory entries included, in one journal commit.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open blob directory: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("syncfs blob directory: %w", err)
	}
	return nil
}

// newTemp opens a new file in dir that has no name yet (O_TMPFILE): it
// takes no lock on the directory, needs no removal, and a crash before it
// is linked leaves nothing behind. File systems without O_TMPFILE (overlayfs
// before Linux 6.6) get a named temporary file instead.
func newTemp(dir string) (*temp, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return newNamedTemp(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("create blob in %s: %w", dir, err)
	}
	return &temp{f: os.NewFile(uintptr(fd), dir+"/(unnamed blob)")}, nil
}

// link gives the file its final name; it fails with EEXIST rather than
// replace a file. An unnamed file is linked through /proc/self/fd, which
// needs no privilege, unlike AT_EMPTY_PATH.
func (t *temp) link(name string) error {
	if t.name != "" {
		return os.Link(t.name, name)
	}
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(t.f.Fd())), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return &os.LinkError{Op: "link", Old: t.f.Name(), New: name, Err: err}
	}
	return nil
}
