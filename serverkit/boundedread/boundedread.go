// Package boundedread reads data that comes from outside the process (task
// files, configs, scripts, HTTP bodies) with a hard size cap, and refuses
// files that are not regular: a device such as /dev/zero never ends, a FIFO
// can block for ever, and Stat reports size 0 for both, so neither the size
// nor the kind of a file can be trusted before it is opened.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is wrapped by every error for input over its cap.
var ErrTooLarge = errors.New("too large")

// ErrNotRegular is wrapped by the errors for paths that are neither regular
// files nor (where a directory is allowed) directories.
var ErrNotRegular = errors.New("not a regular file")

// ReadAll reads r to its end, failing with ErrTooLarge once more than max
// bytes arrive. It never buffers more than max+1 bytes.
func ReadAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("over %d bytes: %w", max, ErrTooLarge)
	}
	return b, nil
}

// ReadFile reads the regular file at path, up to max bytes. The error names
// the path but never quotes the file's content.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(f, path, max)
}

// ReadFileIn is ReadFile for a name resolved inside root, so that neither
// ".." nor a symbolic link can lead outside it.
func ReadFileIn(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(f, name, max)
}

// Open opens path for reading and checks, on the open file, that it is a
// regular file. O_NONBLOCK keeps the open of a FIFO from waiting for a
// writer; it has no effect on regular files.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenIn is Open for a name resolved inside root.
func OpenIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckMode refuses modes other than regular files, and directories when
// dirOK. Callers that walk a tree use it on each entry.
func CheckMode(name string, mode fs.FileMode, dirOK bool) error {
	if mode.IsRegular() || (dirOK && mode.IsDir()) {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", name, kind(mode), ErrNotRegular)
}

func checkRegular(f *os.File, name string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return CheckMode(name, st.Mode(), false)
}

func readOpened(f *os.File, name string, max int64) ([]byte, error) {
	// The file is known to be regular here, so its size is worth checking
	// first: an over-cap file is refused without reading max bytes of it.
	// The read stays capped, as the file may grow after the Stat.
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, fmt.Errorf("read %s: over %d bytes: %w", name, max, ErrTooLarge)
	}
	b, err := ReadAll(f, max)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "not a regular file"
	}
}
