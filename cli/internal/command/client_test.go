package command

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
)

// TestClientTokenFile: the inspection commands send the token read from
// --auth-token-file, so it need not be on the command line.
func TestClientTokenFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const token = "file-token"
	m, err := mesh.Start(ctx, mesh.Options{DataDir: t.TempDir(), Model: "fake-model", AuthToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROLLOUTMESH_AUTH_TOKEN", "")
	tests := []struct {
		name      string
		args      []string
		wantErr   string
		wantUsage bool
	}{
		{"token file", []string{"--auth-token-file", good}, "", false},
		{"no token", nil, "Unauthenticated", false},
		{"wrong token file", []string{"--auth-token-file", bad}, "Unauthenticated", false},
		{"token and file", []string{"--auth-token", token, "--auth-token-file", good}, "give one", true},
		{"missing file", []string{"--auth-token-file", filepath.Join(dir, "nope")}, "--auth-token-file", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"rollouts", "--coordinator", m.Addr(mesh.Coordinator), "--json"}, tt.args...)
			err := Run(ctx, args, &stdout, &stderr)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("rollout rollouts: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if got := errors.As(err, new(usageError)); got != tt.wantUsage {
				t.Errorf("usage error %v, want %v", got, tt.wantUsage)
			}
		})
	}
}

// TestUpListensOnLoopback: rollout up serves on 127.0.0.1 unless asked for
// more, and its banner names every address, the OpenAI port included.
func TestUpListensOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"up", "--data-dir", t.TempDir(), "--num-vms", "1", "--port-offset", "12000",
			"--fake-script", filepath.Join("..", "..", "..", "examples", "fakellm", "demo.jsonl")}, out, out)
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "Ctrl+C") {
		select {
		case err := <-done:
			t.Fatalf("rollout up ended: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout up did not come up:\n%s", out.String())
		}
	}
	banner := out.String()
	for _, want := range []string{"grpc 127.0.0.1:62052", "http 127.0.0.1:21102", "OpenAI-compatible HTTP 127.0.0.1:20000"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if strings.Contains(banner, "grpc :") || strings.Contains(banner, "0.0.0.0") {
		t.Errorf("banner shows an address open to every interface:\n%s", banner)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("rollout up: %v", err)
	}
}

// syncBuffer is a bytes.Buffer that a command may write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
