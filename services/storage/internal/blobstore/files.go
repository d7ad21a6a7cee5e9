// Package blobstore keeps content-addressed blobs (screenshots,
// accessibility trees, recordings) in pack files under a directory or in an
// S3-compatible bucket. Keys are lowercase hex SHA-256 digests and are
// checked before they become a path or an object key, and the locations the
// index keeps are parsed strictly, so nothing can name a file outside the
// store.
package blobstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// ErrNotFound reports a missing blob.
var ErrNotFound = errors.New("blob not found")

// ErrBadKey reports a key that is not a lowercase hex SHA-256.
var ErrBadKey = errors.New("blob key is not a lowercase hex sha256")

// ErrBadLoc reports a location that this store did not hand out.
var ErrBadLoc = errors.New("malformed blob location")

// ErrCorrupt reports stored bytes that are not the blob the index
// recorded: content that does not hash to its key, a blob cut short by a
// truncated pack, or a pack that is not a regular file.
var ErrCorrupt = errors.New("stored blob is damaged")

// Verify checks that data hashes to key.
func Verify(key string, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != key {
		return fmt.Errorf("blob %s: content hashes to %s: %w", key, got, ErrCorrupt)
	}
	return nil
}

// DescribeLoc names the pack file and offset of a location, for logs and
// reports; a blob stored one file each (location "") has neither.
func DescribeLoc(loc string) (pack string, offset int64) {
	id, off, err := parseLoc(loc)
	if err != nil {
		return loc, 0
	}
	return packName(id), off
}

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

// Files stores blobs in append-only pack files, <root>/packs/NNNNNNNN.pack.
// Write returns the blob's location ("<pack>:<offset>"), which the index
// keeps with the blob's record; Open and Delete take it back. A written
// blob is durable once a Sync that started after its Write returned has
// returned: the ingest syncs once per group commit, just before the index
// commit, rather than once per blob.
//
// Why packs rather than a file per blob: creating an inode, a directory
// entry and dirty page-cache pages for every 200 KB screenshot cost about
// 0.7 ms of CPU per blob on a 2-core machine, a third of the budget of a
// 2,000 steps/s ingest. A pack write is one pwrite at an offset reserved
// under a mutex, done with O_DIRECT so the data goes from our buffer to the
// disk without a page-cache copy, and one fdatasync per pack written since
// the last Sync serves every blob (group commit). docs/benchmarks.md has
// the before and after.
//
// Blobs start at 4 KiB-aligned offsets and never share a block, so Delete
// returns a blob's space to the file system by punching a hole. Each
// process appends to a new pack, so bytes written but never acknowledged
// (a crash before the index commit) are never overwritten nor referenced.
// Blobs stored by earlier releases as <root>/<h>/<sha> (location "") are
// still read and deleted there.
type Files struct {
	root  string
	packs string
	// packBytes is where a pack is closed and the next one started.
	packBytes int64
	// buffered turns O_DIRECT off (tests of the fallback).
	buffered bool

	// firstID is the first pack this process writes; packs below it are
	// never written again.
	firstID uint64

	mu     sync.Mutex
	cur    *pack // nil until the first Write
	nextID uint64
	// dirty lists the packs written since the last Sync started.
	dirty  []*pack
	sync   coalescer
	chunks sync.Pool // *[]byte, blockSize-aligned, chunkBytes long
}

const (
	// blockSize aligns offsets and lengths for O_DIRECT and hole punching.
	blockSize = 4096
	// chunkBytes bounds the staging buffer of one O_DIRECT write; a larger
	// blob is written in several.
	chunkBytes = 256 << 10
	// defaultPackBytes is the size at which a pack is closed.
	defaultPackBytes = 1 << 30
	// preallocBytes is how far ahead a pack's space is reserved at once
	// (fallocate), so concurrent writes do not each extend the file.
	preallocBytes = 64 << 20
)

// pack is one pack file open for appending.
type pack struct {
	id     uint64
	f      *os.File
	direct bool
	// guarded by Files.mu:
	size    int64 // bytes handed out
	alloc   int64 // bytes preallocated; 0 where fallocate is unsupported
	noAlloc bool
	refs    int  // writes in progress
	dirty   bool // in Files.dirty
	syncing bool // being flushed by a Sync run
	retired bool // no longer written; closed once refs is 0 and it is synced
}

// NewFiles opens (creating) a file blob store rooted at dir.
func NewFiles(dir string) (*Files, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	f := &Files{root: abs, packs: filepath.Join(abs, "packs"), packBytes: defaultPackBytes}
	if err := os.MkdirAll(f.packs, 0o750); err != nil {
		return nil, fmt.Errorf("create blob directory: %w", err)
	}
	// The packs directory must survive a crash before a blob in it is
	// acknowledged.
	for _, d := range []string{f.packs, abs, filepath.Dir(abs)} {
		if err := syncDir(d); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(f.packs)
	if err != nil {
		return nil, fmt.Errorf("list packs: %w", err)
	}
	for _, e := range entries {
		if id, ok := parsePackName(e.Name()); ok && id >= f.nextID {
			f.nextID = id + 1
		}
	}
	f.firstID = f.nextID
	f.sync.fn = f.syncDirty
	f.chunks.New = func() any {
		b := alignedBuffer(chunkBytes)
		return &b
	}
	return f, nil
}

func packName(id uint64) string { return fmt.Sprintf("%08d.pack", id) }

func parsePackName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".pack")
	if !ok || len(digits) < 8 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

func formatLoc(id uint64, off int64) string {
	return strconv.FormatUint(id, 10) + ":" + strconv.FormatInt(off, 10)
}

// parseLoc reads a location Put returned: two decimal numbers, so it can
// only ever name a pack file in the packs directory.
func parseLoc(loc string) (uint64, int64, error) {
	a, b, ok := strings.Cut(loc, ":")
	if !ok || a == "" || b == "" || strings.Trim(a+b, "0123456789") != "" {
		return 0, 0, fmt.Errorf("%w %q", ErrBadLoc, loc)
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	off, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || off%blockSize != 0 {
		return 0, 0, fmt.Errorf("%w %q", ErrBadLoc, loc)
	}
	return id, off, nil
}

func alignUp(n int64) int64 { return (n + blockSize - 1) &^ (blockSize - 1) }

// alignedBuffer returns n bytes starting at a blockSize-aligned address, as
// O_DIRECT requires.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+blockSize)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & (blockSize - 1)); r != 0 {
		skip = blockSize - r
	}
	return b[skip : skip+n : skip+n]
}

// Put stores data under key and returns its location once it is durable:
// Write and Sync.
func (f *Files) Put(ctx context.Context, key string, data []byte) (string, error) {
	loc, err := f.Write(ctx, key, data)
	if err != nil {
		return "", err
	}
	return loc, f.Sync(ctx)
}

// Write stores data under key and returns its location; the blob is durable
// after the next Sync. Every Write writes a new copy; callers store a key
// once (the ingest pins it), and a stray second copy is only wasted space.
func (f *Files) Write(_ context.Context, key string, data []byte) (string, error) {
	if !ValidKey(key) {
		return "", ErrBadKey
	}
	p, off, err := f.reserve(int64(len(data)))
	if err != nil {
		return "", err
	}
	err = f.write(p, off, data)
	f.release(p)
	if err != nil {
		return "", err
	}
	return formatLoc(p.id, off), nil
}

// Sync makes every blob whose Write returned before the call durable. One
// run serves every caller waiting when it starts.
func (f *Files) Sync(context.Context) error { return f.sync.do() }

// syncDirty flushes the packs written since the last run, and closes those
// that are full and idle.
func (f *Files) syncDirty() error {
	f.mu.Lock()
	packs := f.dirty
	f.dirty = nil
	files := make([]*os.File, len(packs))
	for i, p := range packs {
		p.dirty, p.syncing = false, true
		files[i] = p.f
	}
	f.mu.Unlock()
	var first error
	for i, fh := range files {
		if err := datasync(fh); err != nil && first == nil {
			first = fmt.Errorf("flush pack %s: %w", packName(packs[i].id), err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range packs {
		p.syncing = false
		if first != nil && !p.dirty {
			// Flush it again next time rather than lose track of it.
			p.dirty = true
			f.dirty = append(f.dirty, p)
		}
		f.closeIfDone(p)
	}
	return first
}

// closeIfDone closes a retired pack that nothing writes, flushes or waits
// to flush. f.mu must be held.
func (f *Files) closeIfDone(p *pack) {
	if p.retired && p.refs == 0 && !p.dirty && !p.syncing && p.f != nil {
		p.f.Close()
		p.f = nil
	}
}

// reserve hands out the next aligned span of the current pack, starting a
// new pack when it is full.
func (f *Files) reserve(n int64) (*pack, int64, error) {
	span := alignUp(n)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil || (f.cur.size > 0 && f.cur.size+span > f.packBytes) {
		if err := f.rotate(); err != nil {
			return nil, 0, err
		}
	}
	p := f.cur
	off := p.size
	if end := off + span; end > p.alloc && !p.noAlloc {
		grow := max(preallocBytes, alignUp(end-p.alloc))
		switch err := preallocate(p.f, p.alloc, grow); {
		case errors.Is(err, errors.ErrUnsupported):
			p.noAlloc = true
		case err != nil:
			return nil, 0, fmt.Errorf("reserve blob space: %w", err)
		default:
			p.alloc += grow
		}
	}
	p.size += span
	p.refs++
	return p, off, nil
}

// rotate starts a new pack; the old one is closed once its last write has
// ended and been flushed.
func (f *Files) rotate() error {
	id := f.nextID
	fh, direct, err := createPack(filepath.Join(f.packs, packName(id)), !f.buffered)
	if err != nil {
		return err
	}
	f.nextID++
	// The new file's name must be durable before a blob in it is
	// acknowledged; once per pack, so cheap.
	if err := syncDir(f.packs); err != nil {
		fh.Close()
		return err
	}
	p := &pack{id: id, f: fh, direct: direct}
	if old := f.cur; old != nil {
		old.retired = true
		f.closeIfDone(old)
	}
	f.cur = p
	return nil
}

// release ends a write: the pack now needs a flush.
func (f *Files) release(p *pack) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p.refs--
	if !p.dirty {
		p.dirty = true
		f.dirty = append(f.dirty, p)
	}
}

// write copies data into the reserved span. O_DIRECT needs block-aligned
// memory, offsets and lengths. Go allocates large slices (a received
// screenshot) on page boundaries, so the whole blocks of data are usually
// written straight from it; what is not aligned, and the zero-padded last
// block, go through an aligned staging chunk.
func (f *Files) write(p *pack, off int64, data []byte) error {
	if !p.direct {
		if _, err := p.f.WriteAt(data, off); err != nil {
			return fmt.Errorf("write blob: %w", err)
		}
		return nil
	}
	if whole := len(data) &^ (blockSize - 1); whole > 0 && aligned(data) {
		if _, err := p.f.WriteAt(data[:whole], off); err != nil {
			return fmt.Errorf("write blob: %w", err)
		}
		data, off = data[whole:], off+int64(whole)
	}
	if len(data) == 0 {
		return nil
	}
	bp := f.chunks.Get().(*[]byte)
	defer f.chunks.Put(bp)
	buf := *bp
	for len(data) > 0 {
		n := copy(buf, data)
		w := int(alignUp(int64(n)))
		clear(buf[n:w])
		if _, err := p.f.WriteAt(buf[:w], off); err != nil {
			return fmt.Errorf("write blob: %w", err)
		}
		data, off = data[n:], off+int64(w)
	}
	return nil
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))&(blockSize-1) == 0 }

// legacyPath is where releases before packs stored a blob.
func (f *Files) legacyPath(key string) string {
	return filepath.Join(f.root, key[:1], key)
}

// Open returns a reader of the size bytes stored at loc under key.
func (f *Files) Open(_ context.Context, key, loc string, size int64) (io.ReadCloser, error) {
	if !ValidKey(key) {
		return nil, ErrBadKey
	}
	if loc == "" {
		return openFile(key, f.legacyPath(key))
	}
	id, off, err := parseLoc(loc)
	if err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("blob %s: negative size %d", key, size)
	}
	fh, err := openFile(key, filepath.Join(f.packs, packName(id)))
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("open blob: %w", err)
	}
	if st.Size() < off+size {
		fh.Close()
		return nil, fmt.Errorf("blob %s: truncated: pack %s holds %d bytes, the blob ends at %d: %w", key, packName(id), st.Size(), off+size, ErrCorrupt)
	}
	return packReader{io.NewSectionReader(fh, off, size), fh}, nil
}

// openFile opens a pack or a legacy blob file. Something other than a
// regular file in its place (a FIFO would block a reader for ever, a device
// never ends) is damage, not a blob.
func openFile(key, path string) (*os.File, error) {
	fh, err := boundedread.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", key, ErrNotFound)
	}
	if errors.Is(err, boundedread.ErrNotRegular) {
		return nil, fmt.Errorf("blob %s: %w: %w", key, err, ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	return fh, nil
}

// openPackForWrite opens an existing pack to punch holes in it. O_NONBLOCK
// keeps the open of a FIFO in a pack's place from waiting for a reader for
// ever (it fails at once), and anything but a regular file is refused.
func openPackForWrite(path string) (*os.File, error) {
	fh, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		// What a FIFO without a reader answers.
		return nil, fmt.Errorf("%s: %w: %w", path, boundedread.ErrNotRegular, ErrCorrupt)
	}
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err == nil {
		err = boundedread.CheckMode(path, st.Mode(), false)
	}
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	return fh, nil
}

type packReader struct {
	*io.SectionReader
	f *os.File
}

func (r packReader) Close() error { return r.f.Close() }

// Delete frees a blob's space; a missing blob is not an error. In a pack
// that is a hole punched over the blob's blocks, which no other blob
// shares; where the file system cannot punch holes the space stays used.
func (f *Files) Delete(_ context.Context, key, loc string, size int64) error {
	if !ValidKey(key) {
		return ErrBadKey
	}
	if loc == "" {
		if err := os.Remove(f.legacyPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete blob: %w", err)
		}
		return nil
	}
	id, off, err := parseLoc(loc)
	if err != nil {
		return err
	}
	if size <= 0 {
		return nil
	}
	fh, err := openPackForWrite(filepath.Join(f.packs, packName(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete blob: %w", err)
	}
	defer fh.Close()
	if err := punchHole(fh, off, alignUp(size)); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	return nil
}

// Reclaim frees the space in packs of earlier processes that no stored
// blob uses: the unused end of a pack's preallocation, and blobs that were
// written but never committed (a crash or a failed commit between the two).
// each calls its argument with the location and size of every blob the
// index holds. Packs this process writes are left alone, and no later
// commit can name a byte of an earlier pack that the index did not already
// name, so Reclaim may run while the store is in use. An earlier pack that
// no stored blob uses is removed (but the newest, which keeps pack numbers
// from being used twice): punched empty, it would hold an inode and a
// directory entry for ever. It returns the bytes it punched out or
// removed, holes already there included.
func (f *Files) Reclaim(ctx context.Context, each func(fn func(loc string, size int64) error) error) (int64, error) {
	used := map[uint64][][2]int64{} // pack -> [start, end) of its blobs
	err := each(func(loc string, size int64) error {
		if loc == "" {
			return nil
		}
		id, off, err := parseLoc(loc)
		if err != nil {
			return err
		}
		if id < f.firstID {
			used[id] = append(used[id], [2]int64{off, off + alignUp(size)})
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list stored blobs: %w", err)
	}
	entries, err := os.ReadDir(f.packs)
	if err != nil {
		return 0, fmt.Errorf("list packs: %w", err)
	}
	var freed int64
	for _, e := range entries {
		id, ok := parsePackName(e.Name())
		if !ok || id >= f.firstID {
			continue
		}
		if err := ctx.Err(); err != nil {
			return freed, err
		}
		var n int64
		// The newest earlier pack stays, if only as an empty file: the next
		// process numbers its packs after the highest on disk, and a pack
		// number used twice could let a stale location (an index restored
		// from an old backup) read another blob's bytes.
		if spans := used[id]; len(spans) > 0 || id+1 == f.firstID {
			n, err = f.reclaimPack(id, spans)
		} else {
			n, err = f.removePack(id)
		}
		freed += n
		if err != nil {
			return freed, err
		}
	}
	return freed, nil
}

// removePack deletes a pack no stored blob uses. A reader that opened it
// before its last blob was deleted keeps reading its open file.
func (f *Files) removePack(id uint64) (int64, error) {
	path := filepath.Join(f.packs, packName(id))
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove unused pack %s: %w", packName(id), err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("remove unused pack %s: %w", packName(id), err)
	}
	return alignUp(st.Size()), nil
}

// reclaimPack punches a hole over every range of the pack that spans do
// not cover.
func (f *Files) reclaimPack(id uint64, spans [][2]int64) (int64, error) {
	fh, err := openPackForWrite(filepath.Join(f.packs, packName(id)))
	if err != nil {
		return 0, fmt.Errorf("reclaim pack %s: %w", packName(id), err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return 0, fmt.Errorf("reclaim pack %s: %w", packName(id), err)
	}
	slices.SortFunc(spans, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var freed, at int64
	gap := func(end int64) error {
		if end <= at {
			return nil
		}
		err := punchHole(fh, at, end-at)
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reclaim pack %s: %w", packName(id), err)
		}
		freed += end - at
		return nil
	}
	for _, sp := range spans {
		if err := gap(sp[0]); err != nil {
			return freed, err
		}
		at = max(at, sp[1])
	}
	return freed, gap(alignUp(st.Size()))
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open blob directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync blob directory %s: %w", dir, err)
	}
	return nil
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
