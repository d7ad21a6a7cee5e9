// Package blobstore keeps content-addressed blobs (screenshots,
// accessibility trees, recordings) in a directory tree or in an
// S3-compatible bucket. Keys are lowercase hex SHA-256 digests and are
// checked before they become a path or an object key, so no key can name
// anything outside the store.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrNotFound reports a missing blob.
var ErrNotFound = errors.New("blob not found")

// ErrBadKey reports a key that is not a lowercase hex SHA-256.
var ErrBadKey = errors.New("blob key is not a lowercase hex sha256")

// ValidKey reports whether key is 64 lowercase hex digits.
func ValidKey(key string) bool {
	if len(key) != 64 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Files stores blobs as files under a root directory: <root>/<a>/<sha>,
// with the 16 fan-out directories made when the store opens. Few
// directories keep concurrent creates in few ext4 block groups, and an
// htree directory holds millions of entries without trouble.
//
// Durability is group-committed: a Put writes its data to a new file that has
// no name yet (O_TMPFILE), waits for a flush of the whole file system
// (syncfs), links the file to its final name and waits for a second flush. One flush
// serves every Put waiting when it starts, so 64 concurrent screenshots cost
// two journal commits rather than 64 file fsyncs and their directory
// fsyncs (docs/benchmarks.md has the before and after).
// The price is that a flush also writes back whatever else is dirty on the
// same file system, so the data directory belongs on its own volume in
// production.
type Files struct {
	root  string
	flush coalescer
}

// NewFiles opens (creating) a file blob store rooted at dir.
func NewFiles(dir string) (*Files, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("create blob directory: %w", err)
	}
	f := &Files{root: abs}
	f.flush.fn = func() error { return syncFS(abs) }
	for i := 0; i < 16; i++ {
		err := os.Mkdir(filepath.Join(abs, fmt.Sprintf("%x", i)), 0o750)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create blob directory: %w", err)
		}
	}
	// The fan-out directories' entries must survive a crash too.
	if err := f.flush.do(); err != nil {
		return nil, err
	}
	return f, nil
}

// coalescer runs fn so that every caller of do is served by a run that
// started after the call, and one run serves every caller waiting when it
// starts.
type coalescer struct {
	fn      func() error
	mu      sync.Mutex
	running bool
	next    *flushRun // the run that callers arriving now wait for
}

type flushRun struct {
	done chan struct{}
	err  error
}

func (c *coalescer) do() error {
	c.mu.Lock()
	if c.next == nil {
		c.next = &flushRun{done: make(chan struct{})}
	}
	r := c.next
	if !c.running {
		c.running = true
		go c.loop()
	}
	c.mu.Unlock()
	<-r.done
	return r.err
}

func (c *coalescer) loop() {
	for {
		c.mu.Lock()
		r := c.next
		c.next = nil
		if r == nil {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		r.err = c.fn()
		close(r.done)
	}
}

// Root returns the directory blobs live under.
func (f *Files) Root() string { return f.root }

func (f *Files) path(key string) (string, error) {
	if !ValidKey(key) {
		return "", ErrBadKey
	}
	return filepath.Join(f.root, key[:1], key), nil
}

// Put stores data under key and returns once it is durable. A blob only
// gets its final name after its data was flushed, so a file under a final
// name is never torn, and Put never replaces one: writing a key again
// keeps the stored copy (the content is the same).
func (f *Files) Put(_ context.Context, key string, data []byte) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	tmp, err := newTemp(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer tmp.discard()
	if _, err := tmp.f.Write(data); err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if err := f.flush.do(); err != nil {
		return err
	}
	if err := tmp.link(p); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("name blob: %w", err)
	}
	return f.flush.do()
}

// temp is a blob being written: an unnamed file where the file system
// supports O_TMPFILE, else a file named .tmp-* in the blob's directory.
type temp struct {
	f    *os.File
	name string // "" for an unnamed file
}

func newNamedTemp(dir string) (*temp, error) {
	fh, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create blob: %w", err)
	}
	return &temp{f: fh, name: fh.Name()}, nil
}

// discard closes the file and removes its temporary name, if it has one.
func (t *temp) discard() {
	t.f.Close()
	if t.name != "" {
		os.Remove(t.name)
	}
}

// Open returns a reader of the blob.
func (f *Files) Open(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	return fh, nil
}

// Delete removes a blob; a missing blob is not an error.
func (f *Files) Delete(_ context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob: %w", err)
	}
	return nil
}
