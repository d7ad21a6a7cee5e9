package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/breaker"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/metrics"
)

// closedURL is an http URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}

// TestNoBackendSaysWhy: once the breaker keeps an unreachable backend out of
// routing, no attempt reaches it, and the error must still carry the
// backend's own last error rather than a bare "no backend available".
func TestNoBackendSaysWhy(t *testing.T) {
	met, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{
		Backends: []backend.Config{{ID: "model", BaseURL: closedURL(t), Kind: backend.KindOpenAI, Model: "m"}},
		Retry:    RetryConfig{MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond},
		Breaker:  breaker.Config{FailureThreshold: 1, OpenFor: time.Hour},
	}, &http.Client{Timeout: time.Second}, clock.Real{}, met, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &Request{Model: "m", Body: []byte(`{}`)}
	// The first call reaches the backend and opens the breaker; the second
	// finds no backend to try.
	for i := range 2 {
		_, err := g.Do(ctx, req)
		if !errors.Is(err, ErrNoBackend) {
			t.Fatalf("call %d: Do() error = %v, want ErrNoBackend", i, err)
		}
		if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "backend model") {
			t.Errorf("call %d: Do() error = %q, want the backend's own error (connection refused)", i, err)
		}
	}
}

func TestExplainKeepsSpecificErrors(t *testing.T) {
	g := &Gateway{byModel: map[string][]*backend.Backend{}}
	se := &StatusError{Backend: "b", Code: 503}
	tests := []struct {
		name string
		in   error
		want string
	}{
		{"status error", se, se.Error()},
		{"no backend, nothing known", ErrNoBackend, "no backend available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := g.explain(tt.in, "m").Error(); got != tt.want {
				t.Errorf("explain(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
