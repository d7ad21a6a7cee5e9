package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func keyOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func readAll(t *testing.T, f *Files, key, loc string, size int64) []byte {
	t.Helper()
	r, err := f.Open(context.Background(), key, loc, size)
	if err != nil {
		t.Fatalf("Open(%s): %v", loc, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", loc, err)
	}
	return got
}

// allocated is the disk space a file uses.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestFilesRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%t", buffered), func(t *testing.T) {
			dir := t.TempDir()
			f, err := NewFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			f.buffered = buffered
			// Sizes around the block and the staging chunk, where padding
			// and multi-chunk writes could go wrong.
			sizes := []int{0, 1, blockSize - 1, blockSize, blockSize + 1, chunkBytes, chunkBytes + 5, 3*chunkBytes + 777}
			locs := map[string]bool{}
			type stored struct {
				data     []byte
				key, loc string
			}
			var all []stored
			for i := range 2 * len(sizes) {
				n := sizes[i/2]
				// Each size once block-aligned in memory, which O_DIRECT
				// writes straight from data, and once not, which goes
				// through the staging chunk.
				data := alignedBuffer(n + 1)[:n]
				if i%2 == 1 {
					data = alignedBuffer(n + 1)[1:]
				}
				for j := range data {
					data[j] = byte(i)
				}
				key := keyOf(data)
				loc, err := f.Put(ctx, key, data)
				if err != nil {
					t.Fatalf("Put(%d bytes): %v", n, err)
				}
				if n > 0 {
					if locs[loc] {
						t.Errorf("location %s handed out twice", loc)
					}
					locs[loc] = true
				}
				all = append(all, stored{data, key, loc})
			}
			for _, s := range all {
				if got := readAll(t, f, s.key, s.loc, int64(len(s.data))); !bytes.Equal(got, s.data) {
					t.Errorf("Open(%s) = %d bytes, want the %d stored", s.loc, len(got), len(s.data))
				}
			}
			pack := filepath.Join(dir, "packs", packName(0))
			before := allocated(t, pack)
			big := all[len(all)-1]
			if err := f.Delete(ctx, big.key, big.loc, int64(len(big.data))); err != nil {
				t.Fatal(err)
			}
			if freed := before - allocated(t, pack); freed < alignUp(int64(len(big.data))) {
				t.Errorf("Delete freed %d bytes, want at least %d", freed, alignUp(int64(len(big.data))))
			}
			// Its neighbours are intact.
			for _, s := range all[:len(all)-1] {
				if got := readAll(t, f, s.key, s.loc, int64(len(s.data))); !bytes.Equal(got, s.data) {
					t.Errorf("after Delete, Open(%s) = %d bytes, want the %d stored", s.loc, len(got), len(s.data))
				}
			}
		})
	}
}

func TestFilesRefusesBadKeysAndLocations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"", "..", "../../etc/passwd", strings.Repeat("A", 64), strings.Repeat("a", 63),
		"../" + strings.Repeat("a", 61), strings.Repeat("a", 62) + "/.",
	} {
		if _, err := f.Put(ctx, key, []byte("x")); !errors.Is(err, ErrBadKey) {
			t.Errorf("Put(%q) = %v, want ErrBadKey", key, err)
		}
		if _, err := f.Open(ctx, key, "", 1); !errors.Is(err, ErrBadKey) {
			t.Errorf("Open(%q) = %v, want ErrBadKey", key, err)
		}
		if err := f.Delete(ctx, key, "", 1); !errors.Is(err, ErrBadKey) {
			t.Errorf("Delete(%q) = %v, want ErrBadKey", key, err)
		}
	}
	key := keyOf([]byte("x"))
	for _, loc := range []string{
		":", "0:", ":0", "0", "../0:0", "0:../0", "0:-4096", "-1:0", "0:12", "0:4096:1", "0x1:0", " 0:0",
		"99999999999999999999:0", "0:99999999999999999999",
	} {
		if _, err := f.Open(ctx, key, loc, 1); !errors.Is(err, ErrBadLoc) {
			t.Errorf("Open(loc %q) = %v, want ErrBadLoc", loc, err)
		}
		if err := f.Delete(ctx, key, loc, 1); !errors.Is(err, ErrBadLoc) {
			t.Errorf("Delete(loc %q) = %v, want ErrBadLoc", loc, err)
		}
	}
	if _, err := f.Open(ctx, key, "7:0", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open in a missing pack = %v, want ErrNotFound", err)
	}
}

// TestFilesTruncatedPack: a pack shorter than the index says is an error,
// never a silently short blob.
func TestFilesTruncatedPack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("z"), 10_000)
	loc, err := f.Put(ctx, keyOf(data), data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "packs", packName(0)), 5000); err != nil {
		t.Fatal(err)
	}
	if r, err := f.Open(ctx, keyOf(data), loc, int64(len(data))); err == nil {
		r.Close()
		t.Error("Open of a blob past the end of its pack succeeded")
	}
}

// TestFilesPacksRotateAndReopen: full packs are closed and new ones
// started, and a reopened store appends to a new pack, never over bytes an
// earlier process may have written.
func TestFilesPacksRotateAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.packBytes = 3 * blockSize
	type stored struct {
		data []byte
		loc  string
	}
	var all []stored
	put := func(f *Files, i int) {
		data := bytes.Repeat([]byte{byte(i)}, blockSize+i)
		loc, err := f.Put(ctx, keyOf(data), data)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, stored{data, loc})
	}
	for i := range 5 {
		put(f, i)
	}
	g, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	put(g, 5)
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	// Blob 0 spans 4 KiB, the others 8 KiB, and a pack holds 12 KiB:
	// packs 0 (blobs 0 and 1), 1, 2 and 3 from the first store, 4 from the
	// second.
	if len(packs) != 5 {
		t.Errorf("packs = %v, want 5", packs)
	}
	if id, _, _ := parseLoc(all[5].loc); id != 4 {
		t.Errorf("reopened store wrote to pack %d, want a new pack 4", id)
	}
	for _, s := range all {
		if got := readAll(t, g, keyOf(s.data), s.loc, int64(len(s.data))); !bytes.Equal(got, s.data) {
			t.Errorf("Open(%s): content differs", s.loc)
		}
	}
}

// TestFilesLegacyLayout: blobs stored as one file each by releases before
// packs are read and deleted where they are.
func TestFilesLegacyLayout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("old screenshot")
	key := keyOf(data)
	path := filepath.Join(dir, key[:1], key)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f, key, "", int64(len(data))); !bytes.Equal(got, data) {
		t.Errorf("Open = %q, want %q", got, data)
	}
	if err := f.Delete(ctx, key, "", int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Open(ctx, key, "", int64(len(data))); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Delete = %v, want ErrNotFound", err)
	}
}

func TestParseS3URL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
		wantErr            bool
	}{
		{"s3://b/p/q", "b", "p/q/", false},
		{"s3://b", "b", "", false},
		{"s3://b/", "b", "", false},
		{"http://b/p", "", "", true},
		{"s3:///p", "", "", true},
	} {
		b, p, err := ParseS3URL(tc.in)
		if (err != nil) != tc.wantErr || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseS3URL(%q) = %q, %q, %v; want %q, %q, error %v", tc.in, b, p, err, tc.bucket, tc.prefix, tc.wantErr)
		}
	}
}

func TestFilesConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	f, err := NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	datas := make([][]byte, n)
	locs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		datas[i] = bytes.Repeat([]byte{byte(i)}, 1000+i*997)
		wg.Add(1)
		go func() {
			defer wg.Done()
			loc, err := f.Put(ctx, keyOf(datas[i]), datas[i])
			if err != nil {
				t.Errorf("Put %d: %v", i, err)
			}
			locs[i] = loc
		}()
	}
	wg.Wait()
	for i, loc := range locs {
		if got := readAll(t, f, keyOf(datas[i]), loc, int64(len(datas[i]))); !bytes.Equal(got, datas[i]) {
			t.Errorf("blob %d at %s: content differs", i, loc)
		}
	}
}

// TestCoalescerServesFromLaterRun checks the durability contract: every
// caller returns only after a run that started after it called.
func TestCoalescerServesFromLaterRun(t *testing.T) {
	var clock, lastStart, runs atomic.Int64
	c := coalescer{fn: func() error {
		runs.Add(1)
		lastStart.Store(clock.Add(1))
		time.Sleep(time.Millisecond)
		return nil
	}}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				called := clock.Add(1)
				if err := c.do(); err != nil {
					t.Error(err)
					return
				}
				if got := lastStart.Load(); got <= called {
					t.Errorf("served by a run that started at %d, before the call at %d", got, called)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := runs.Load(); got >= 32*20 {
		t.Errorf("%d runs for %d calls: nothing was coalesced", got, 32*20)
	}
}

func TestCoalescerReportsError(t *testing.T) {
	want := errors.New("disk on fire")
	c := coalescer{fn: func() error { return want }}
	if err := c.do(); !errors.Is(err, want) {
		t.Errorf("do = %v, want %v", err, want)
	}
}

// TestFilesSyncFlushesEveryWrittenPack: writes land in several packs; a
// full pack stays open until a Sync has flushed it, and Sync leaves nothing
// dirty.
func TestFilesSyncFlushesEveryWrittenPack(t *testing.T) {
	ctx := context.Background()
	f, err := NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.packBytes = 2 * blockSize
	for i := range 5 {
		data := bytes.Repeat([]byte{byte(i)}, blockSize+1) // two blocks: one pack each
		if _, err := f.Write(ctx, keyOf(data), data); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	dirty := slices.Clone(f.dirty)
	f.mu.Unlock()
	if len(dirty) != 5 {
		t.Fatalf("%d dirty packs after 5 writes to 5 packs, want 5", len(dirty))
	}
	for _, p := range dirty {
		if p.f == nil {
			t.Errorf("pack %d closed before it was flushed", p.id)
		}
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dirty) != 0 {
		t.Errorf("%d packs dirty after Sync", len(f.dirty))
	}
	for _, p := range dirty[:4] {
		if p.f != nil {
			t.Errorf("full pack %d still open after Sync", p.id)
		}
	}
	if dirty[4].f == nil || dirty[4] != f.cur {
		t.Error("the current pack was closed")
	}
}

// TestFilesSyncWhilePacksRotate: Syncs running while writers fill and
// rotate small packs never flush a closed file, and every blob reads back.
func TestFilesSyncWhilePacksRotate(t *testing.T) {
	ctx := context.Background()
	f, err := NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.packBytes = 4 * blockSize
	const writers, each = 8, 40
	locs := make([][]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				data := bytes.Repeat([]byte{byte(w), byte(i)}, blockSize/2+i)
				loc, err := f.Write(ctx, keyOf(data), data)
				if err == nil {
					err = f.Sync(ctx)
				}
				if err != nil {
					t.Errorf("writer %d blob %d: %v", w, i, err)
					return
				}
				locs[w] = append(locs[w], loc)
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		for i, loc := range locs[w] {
			data := bytes.Repeat([]byte{byte(w), byte(i)}, blockSize/2+i)
			if got := readAll(t, f, keyOf(data), loc, int64(len(data))); !bytes.Equal(got, data) {
				t.Fatalf("writer %d blob %d at %s: content differs", w, i, loc)
			}
		}
	}
}

// TestFilesReclaim: space in earlier processes' packs that no stored blob
// uses (an uncommitted blob, the unused preallocation) is punched out; the
// stored blobs and the current process's pack are untouched.
func TestFilesReclaim(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	type blob struct {
		data []byte
		loc  string
	}
	put := func(f *Files, b byte, n int) blob {
		data := bytes.Repeat([]byte{b}, n)
		loc, err := f.Put(ctx, keyOf(data), data)
		if err != nil {
			t.Fatal(err)
		}
		return blob{data, loc}
	}
	kept1, orphan, kept2 := put(old, 1, 3*blockSize), put(old, 2, 5*blockSize+7), put(old, 3, blockSize)
	cur, err := NewFiles(dir) // the next process
	if err != nil {
		t.Fatal(err)
	}
	fresh := put(cur, 4, 2*blockSize)
	oldPack, curPack := filepath.Join(dir, "packs", packName(0)), filepath.Join(dir, "packs", packName(1))
	oldBefore, curBefore := allocated(t, oldPack), allocated(t, curPack)
	index := []blob{kept1, kept2} // the orphan never reached the index
	freed, err := cur.Reclaim(ctx, func(fn func(string, int64) error) error {
		for _, b := range index {
			if err := fn(b.loc, int64(len(b.data))); err != nil {
				return err
			}
		}
		// The current process's blobs are in the index too; their pack
		// must be left alone anyway.
		return fn(fresh.loc, int64(len(fresh.data)))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The orphan's 6 blocks and the rest of the 64 MiB preallocation.
	if want := int64(preallocBytes) - 4*blockSize; freed != want {
		t.Errorf("Reclaim punched %d bytes, want %d", freed, want)
	}
	if got := oldBefore - allocated(t, oldPack); got < 6*blockSize {
		t.Errorf("old pack shrank by %d bytes, want at least the orphan's %d", got, 6*blockSize)
	}
	if got := allocated(t, curPack); got != curBefore {
		t.Errorf("current pack's allocation changed from %d to %d", curBefore, got)
	}
	for _, b := range []blob{kept1, kept2, fresh} {
		if got := readAll(t, cur, keyOf(b.data), b.loc, int64(len(b.data))); !bytes.Equal(got, b.data) {
			t.Errorf("blob at %s damaged by Reclaim", b.loc)
		}
	}
	if got := readAll(t, cur, keyOf(orphan.data), orphan.loc, int64(len(orphan.data))); bytes.Equal(got, orphan.data) {
		t.Error("the orphan's bytes are still there")
	}
	if _, err := cur.Reclaim(ctx, func(fn func(string, int64) error) error { return fn("../x:0", 1) }); !errors.Is(err, ErrBadLoc) {
		t.Errorf("Reclaim with a bad location = %v, want ErrBadLoc", err)
	}
}

// TestFilesReclaimRemovesUnusedPacks: an earlier pack that no stored blob
// uses is removed, except the newest earlier one, which stays empty so that
// pack numbers are never used twice.
func TestFilesReclaimRemovesUnusedPacks(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		indexed   []int // which of the three processes' blobs the index holds
		wantPacks []string
	}{
		{"nothing stored", nil, []string{packName(1), packName(2)}},
		{"the oldest blob stored", []int{0}, []string{packName(0), packName(1), packName(2)}},
		{"the middle blob stored", []int{1}, []string{packName(1), packName(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var locs []string
			var datas [][]byte
			var cur *Files
			for p := range 3 { // three processes, one after another
				f, err := NewFiles(dir)
				if err != nil {
					t.Fatal(err)
				}
				data := bytes.Repeat([]byte{byte(p + 1)}, blockSize+p)
				loc, err := f.Put(ctx, keyOf(data), data)
				if err != nil {
					t.Fatal(err)
				}
				locs, datas, cur = append(locs, loc), append(datas, data), f
			}
			_, err := cur.Reclaim(ctx, func(fn func(string, int64) error) error {
				for _, i := range append(tt.indexed, 2) {
					if err := fn(locs[i], int64(len(datas[i]))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(filepath.Join(dir, "packs"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, tt.wantPacks) {
				t.Errorf("packs after Reclaim = %v, want %v", got, tt.wantPacks)
			}
			for _, i := range append(tt.indexed, 2) {
				if b := readAll(t, cur, keyOf(datas[i]), locs[i], int64(len(datas[i]))); !bytes.Equal(b, datas[i]) {
					t.Errorf("blob %d at %s damaged by Reclaim", i, locs[i])
				}
			}
			// The next process numbers its pack after every pack so far.
			next, err := NewFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			data := []byte("next")
			loc, err := next.Put(ctx, keyOf(data), data)
			if err != nil {
				t.Fatal(err)
			}
			if id, _, err := parseLoc(loc); err != nil || id != 3 {
				t.Errorf("next process wrote to %q, want pack 3", loc)
			}
		})
	}
}
