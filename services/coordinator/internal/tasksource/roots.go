package tasksource

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideRoots is wrapped by the error for a task source that is not
// inside any task root.
var ErrOutsideRoots = errors.New("outside the task roots")

// Roots are the directories task sources may be read from (the
// coordinator's --task-root). A task_source names a path inside one of
// them; everything under it is opened with os.Root, so that a ".." or a
// symbolic link cannot lead out of the root.
type Roots struct {
	dirs []string // absolute and clean, in the order given
}

// NewRoots checks that each dir is an existing directory. No dirs gives
// Roots that refuse every task source.
func NewRoots(dirs []string) (*Roots, error) {
	rs := &Roots{}
	seen := map[string]bool{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("task root %s: %w", d, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("task root: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("task root %s: not a directory", d)
		}
		// A root given through a symbolic link (/tmp on some systems) is
		// also known by its real path, so that a task_source spelled either
		// way is found.
		forms := []string{abs}
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			forms = append(forms, real)
		}
		for _, f := range forms {
			if !seen[f] {
				seen[f] = true
				rs.dirs = append(rs.dirs, f)
			}
		}
	}
	return rs, nil
}

// Dirs returns the roots, absolute.
func (rs *Roots) Dirs() []string {
	if rs == nil {
		return nil
	}
	return append([]string(nil), rs.dirs...)
}

// MaxPathBytes bounds a task_source path (and a task_index).
const MaxPathBytes = 4096

// resolve finds path inside the roots and returns the opened root and the
// path's name relative to it ("." for the root itself). An absolute path
// must lie lexically under a root; a relative one is looked up in each root
// in order, and the first root holding it wins.
func (rs *Roots) resolve(path string) (*os.Root, string, error) {
	switch {
	case path == "":
		return nil, "", errors.New("is empty")
	case len(path) > MaxPathBytes:
		return nil, "", fmt.Errorf("longer than %d bytes", MaxPathBytes)
	case strings.ContainsRune(path, 0):
		return nil, "", errors.New("holds a NUL byte")
	case rs == nil || len(rs.dirs) == 0:
		return nil, "", fmt.Errorf("%s: no task root is configured (--task-root): %w", path, ErrOutsideRoots)
	}
	if filepath.IsAbs(path) {
		clean := filepath.Clean(path)
		for _, d := range rs.dirs {
			rel, err := filepath.Rel(d, clean)
			if err != nil || !filepath.IsLocal(rel) {
				continue
			}
			root, err := os.OpenRoot(d)
			if err != nil {
				return nil, "", fmt.Errorf("open task root: %w", err)
			}
			return root, rel, nil
		}
		return nil, "", fmt.Errorf("%s: %w", path, ErrOutsideRoots)
	}
	if !filepath.IsLocal(path) {
		return nil, "", fmt.Errorf("%s: %w", path, ErrOutsideRoots)
	}
	var firstErr error
	for _, d := range rs.dirs {
		root, err := os.OpenRoot(d)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		if _, err := root.Stat(path); err != nil {
			root.Close()
			firstErr = cmpErr(firstErr, err)
			continue
		}
		return root, path, nil
	}
	if errors.Is(firstErr, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: not found in any task root: %w", path, os.ErrNotExist)
	}
	// A link leading out of its root, most likely.
	return nil, "", fmt.Errorf("%s: %w", path, ErrOutsideRoots)
}

// cmpErr keeps the first error, preferring one that is not "not found" so
// that an escape attempt is reported as such.
func cmpErr(first, err error) error {
	if first == nil || (errors.Is(first, os.ErrNotExist) && !errors.Is(err, os.ErrNotExist)) {
		return err
	}
	return first
}
