package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFilesRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("screenshot")
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	for i := 0; i < 2; i++ { // a second put of the same content is harmless
		if err := f.Put(ctx, key, data); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, key[:1], key)); err != nil {
		t.Errorf("blob not at its content address: %v", err)
	}
	r, err := f.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("Open = %q, want %q", got, data)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, key[:1], "*")); len(names) != 1 {
		t.Errorf("fan-out directory holds %v, want only the blob", names)
	}
	if err := f.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Open(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Delete = %v, want ErrNotFound", err)
	}
}

func TestFilesRefusesBadKeys(t *testing.T) {
	ctx := context.Background()
	f, err := NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"", "..", "../../etc/passwd", strings.Repeat("A", 64), strings.Repeat("a", 63),
		"../" + strings.Repeat("a", 61), strings.Repeat("a", 62) + "/.",
	} {
		if err := f.Put(ctx, key, []byte("x")); !errors.Is(err, ErrBadKey) {
			t.Errorf("Put(%q) = %v, want ErrBadKey", key, err)
		}
		if _, err := f.Open(ctx, key); !errors.Is(err, ErrBadKey) {
			t.Errorf("Open(%q) = %v, want ErrBadKey", key, err)
		}
		if err := f.Delete(ctx, key); !errors.Is(err, ErrBadKey) {
			t.Errorf("Delete(%q) = %v, want ErrBadKey", key, err)
		}
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
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		data := bytes.Repeat([]byte{byte(i)}, 1000+i)
		sum := sha256.Sum256(data)
		keys[i] = hex.EncodeToString(sum[:])
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Put(ctx, keys[i], data); err != nil {
				t.Errorf("Put %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i, key := range keys {
		r, err := f.Open(ctx, key)
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != key {
			t.Errorf("blob %d: content does not match its key", i)
		}
	}
}

func TestFilesPutKeepsStoredCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := NewFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("stored")
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	if err := f.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	// A second put under the same key never replaces the stored file, so
	// a crash during it cannot tear a blob that was acknowledged.
	if err := f.Put(ctx, key, []byte("other")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, key[:1], key))
	if err != nil || string(got) != "stored" {
		t.Errorf("blob = %q, %v; want %q", got, err, "stored")
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

// TestNamedTempLeavesNothing covers the path for file systems without
// O_TMPFILE: the temporary name is gone once the blob is named.
func TestNamedTempLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	tmp, err := newNamedTemp(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, "blob")
	if err := tmp.link(final); err != nil {
		t.Fatal(err)
	}
	if err := tmp.link(final); !errors.Is(err, os.ErrExist) {
		t.Errorf("second link = %v, want ErrExist", err)
	}
	tmp.discard()
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 1 || names[0] != final {
		t.Errorf("directory holds %v, want only %s", names, final)
	}
}
