package storage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// Environment variables naming the real dependencies the suite runs against.
const (
	envPostgresDSN = "ROLLOUTMESH_TEST_POSTGRES_DSN"
	envS3Server    = "ROLLOUTMESH_TEST_S3_SERVER"
)

// needDependency skips, or fails under CI, when a dependency is missing.
func needDependency(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required when CI is set", what)
	}
	t.Skipf("%s not set; skipping (CI fails instead)", what)
}

// backend is one index × blob store combination.
type backend struct {
	name string
	// config returns a Config for a fresh, isolated store.
	config func(t *testing.T) storage.Config
}

func backends() []backend {
	sqlite := func(t *testing.T) string { return filepath.Join(t.TempDir(), "index.db") }
	files := func(t *testing.T) string { return filepath.Join(t.TempDir(), "blobs") }
	return []backend{
		{"sqlite+files", func(t *testing.T) storage.Config {
			return storage.Config{Index: sqlite(t), Blobs: files(t)}
		}},
		{"sqlite+s3", func(t *testing.T) storage.Config {
			c := startS3(t)
			c.Index = sqlite(t)
			return c
		}},
		{"postgres+files", func(t *testing.T) storage.Config {
			return storage.Config{Index: postgresSchema(t), Blobs: files(t)}
		}},
		{"postgres+s3", func(t *testing.T) storage.Config {
			c := startS3(t)
			c.Index = postgresSchema(t)
			return c
		}},
	}
}

// postgresSchema creates a schema of its own for the test in the database
// named by ROLLOUTMESH_TEST_POSTGRES_DSN and returns a DSN that uses it.
func postgresSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(envPostgresDSN)
	if dsn == "" {
		needDependency(t, envPostgresDSN)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	schema := "t_" + hex.EncodeToString(suffix[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		db.Close()
		t.Fatalf("create schema (is PostgreSQL running at %s?): %v", envPostgresDSN, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		db.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", envPostgresDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// startS3 runs the S3-compatible server named by ROLLOUTMESH_TEST_S3_SERVER
// (versitygw) on a free loopback port over a temporary directory, with one
// bucket, and returns a Config pointing at it.
func startS3(t *testing.T) storage.Config {
	t.Helper()
	bin := os.Getenv(envS3Server)
	if bin == "" {
		needDependency(t, envS3Server)
	}
	root := t.TempDir()
	// versitygw's posix backend treats top-level directories as buckets.
	if err := os.Mkdir(filepath.Join(root, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	const access, secret = "rolloutmesh", "rolloutmesh-secret"
	cmd := exec.Command(bin, "--access", access, "--secret", secret, "--port", addr, "--quiet", "posix", root)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("S3 server did not listen on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	return storage.Config{Blobs: "s3://blobs/test", S3Endpoint: "http://" + addr}
}

// pngBytes returns a small valid PNG whose pixels encode seed.
func pngBytes(t testing.TB, seed int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for i := 0; i < 16*16; i++ {
		img.Set(i%16, i/16, color.NRGBA{R: byte(seed), G: byte(seed >> 8), B: byte(i), A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(data []byte) string {
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

func nan() float64 { return math.NaN() }
