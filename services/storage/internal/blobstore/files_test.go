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
	"testing"
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
	left, _ := filepath.Glob(filepath.Join(dir, key[:1], "*.tmp-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
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
