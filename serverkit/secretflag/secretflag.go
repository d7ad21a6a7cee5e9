// Package secretflag gives every secret flag (a bearer token, a password,
// an API key) a twin, --<name>-file, that reads the secret from a file, so
// that no secret has to be put on a command line, where any local user can
// read it in ps or /proc/PID/cmdline. The environment (ROLLOUTMESH_<NAME>)
// is the other way; it is read by envflag.
package secretflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// MaxBytes bounds a secret file: a token is tens of bytes, so anything
// larger is a wrong path.
const MaxBytes = 64 << 10

// FileSuffix is appended to a secret flag's name to name its file flag.
const FileSuffix = "-file"

// IsSecret reports whether a flag of this name holds a secret.
func IsSecret(name string) bool {
	for _, s := range []string{"-token", "-password", "-api-key"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Files are the file flags added to a flag set.
type Files struct {
	fs    *flag.FlagSet
	paths map[string]*string // secret flag name -> file path
}

// Register adds --<name>-file to fs for every secret flag fs already has
// (IsSecret). Call Resolve once the flags are parsed.
func Register(fs *flag.FlagSet) *Files {
	f := &Files{fs: fs, paths: map[string]*string{}}
	var names []string
	fs.VisitAll(func(fl *flag.Flag) {
		if IsSecret(fl.Name) && fs.Lookup(fl.Name+FileSuffix) == nil {
			names = append(names, fl.Name)
		}
	})
	for _, n := range names {
		f.paths[n] = fs.String(n+FileSuffix, "", "read --"+n+" from this file (keeps it out of ps)")
	}
	return f
}

// Resolve sets each secret flag whose file flag is set from the file's
// content. Setting both a secret and its file (on the command line or in
// the environment, once envflag has applied it) is an error, so that a
// stale value never silently wins.
func (f *Files) Resolve() error {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for name, path := range f.paths {
		if *path == "" {
			continue
		}
		if set[name] {
			return fmt.Errorf("set --%s or --%s%s, not both", name, name, FileSuffix)
		}
		v, err := Read(*path)
		if err != nil {
			return fmt.Errorf("--%s%s: %w", name, FileSuffix, err)
		}
		if err := f.fs.Set(name, v); err != nil {
			return fmt.Errorf("--%s%s: %w", name, FileSuffix, err)
		}
	}
	return nil
}

// Read returns the secret held in the regular file at path, without the
// trailing newline editors and `echo` add. It refuses an empty secret: a
// token file that was not filled in must not turn authentication off.
func Read(path string) (string, error) {
	b, err := boundedread.ReadFile(path, MaxBytes)
	if err != nil {
		return "", err
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return "", errors.New(path + " is empty")
	}
	return string(b), nil
}
