package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds/tlstest"
)

// runDaemon runs the echo service through Run with args and returns its
// address once it answers a health check over creds.
func runDaemon(t *testing.T, args []string, creds credentials.TransportCredentials) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	spec := Spec{Name: "echo", GRPCAddr: addr, Start: func(context.Context, Env) (Service, error) { return newEcho(), nil }}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, spec, append([]string{"--log-level", "error", "--drain-timeout", "1s"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil after drain", err)
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		ccancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("service did not come up: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("Run() = %v before serving", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func echoOver(t *testing.T, addr string, creds credentials.TransportCredentials, md metadata.MD) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 3*time.Second)
	defer cancel()
	return conn.Invoke(ctx, "/test.Echo/Echo", wrapperspb.String("x"), new(wrapperspb.StringValue))
}

func clientCreds(t *testing.T, c tlscreds.Client) credentials.TransportCredentials {
	t.Helper()
	creds, err := c.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func TestRunServesTLS(t *testing.T) {
	p := tlstest.New(t)
	withCA := clientCreds(t, tlscreds.Client{CA: p.CA})
	addr := runDaemon(t, []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}, withCA)

	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{name: "client with the CA", creds: withCA, ok: true},
		{name: "plaintext client", creds: insecure.NewCredentials()},
		{name: "client trusting another CA", creds: clientCreds(t, tlscreds.Client{CA: p.OtherCA})},
	}
	for _, tt := range tests {
		err := echoOver(t, addr, tt.creds, nil)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Echo err = %v, want success %v", tt.name, err, tt.ok)
		}
	}
	healthcheck := func(args ...string) error {
		return Run(context.Background(), Spec{Name: "echo", GRPCAddr: addr}, append([]string{"healthcheck", "--addr", addr, "--timeout", "2s"}, args...))
	}
	if err := healthcheck("--tls-ca", p.CA); err != nil {
		t.Errorf("healthcheck --tls-ca: %v", err)
	}
	// A container's health check has the service's environment only.
	t.Setenv("ROLLOUTMESH_TLS_CERT", p.ServerCert)
	t.Setenv("ROLLOUTMESH_TLS_KEY", p.ServerKey)
	if err := healthcheck(); err != nil {
		t.Errorf("healthcheck with the service's environment: %v", err)
	}
	if err := healthcheck("--tls-ca", ""); err == nil {
		t.Error("plaintext healthcheck of a TLS server succeeded")
	}
}

func TestRunServesMutualTLS(t *testing.T) {
	p := tlstest.New(t)
	full := clientCreds(t, tlscreds.Client{CA: p.CA, Cert: p.ClientCert, Key: p.ClientKey})
	addr := runDaemon(t, []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA}, full)

	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{name: "client certificate signed by the CA", creds: full, ok: true},
		{name: "no client certificate", creds: clientCreds(t, tlscreds.Client{CA: p.CA})},
		{name: "client certificate of another CA", creds: clientCreds(t, tlscreds.Client{CA: p.CA, Cert: p.OtherClientCert, Key: p.OtherClKey})},
		{name: "plaintext client", creds: insecure.NewCredentials()},
	}
	for _, tt := range tests {
		err := echoOver(t, addr, tt.creds, nil)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Echo err = %v, want success %v", tt.name, err, tt.ok)
		}
	}
	healthcheck := func(args ...string) error {
		return Run(context.Background(), Spec{Name: "echo", GRPCAddr: addr}, append([]string{"healthcheck", "--addr", addr, "--timeout", "2s"}, args...))
	}
	if err := healthcheck("--tls-ca", p.CA, "--tls-cert", p.ClientCert, "--tls-key", p.ClientKey); err != nil {
		t.Errorf("healthcheck with a client certificate: %v", err)
	}
	if err := healthcheck("--tls-ca", p.CA); err == nil {
		t.Error("healthcheck without a client certificate succeeded against mutual TLS")
	}
	t.Setenv("ROLLOUTMESH_TLS_CERT", p.ServerCert)
	t.Setenv("ROLLOUTMESH_TLS_KEY", p.ServerKey)
	t.Setenv("ROLLOUTMESH_TLS_CLIENT_CA", p.CA)
	if err := healthcheck(); err != nil {
		t.Errorf("healthcheck with the service's environment: %v", err)
	}
}

func TestRunAuthTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := runDaemon(t, []string{"--auth-token-file", tokenFile}, insecure.NewCredentials())
	tests := []struct {
		name string
		md   metadata.MD
		want codes.Code
	}{
		{name: "no token", want: codes.Unauthenticated},
		{name: "wrong token", md: metadata.Pairs("authorization", "Bearer s3cre"), want: codes.Unauthenticated},
		{name: "token", md: metadata.Pairs("authorization", "Bearer s3cret"), want: codes.OK},
	}
	for _, tt := range tests {
		if got := status.Code(echoOver(t, addr, insecure.NewCredentials(), tt.md)); got != tt.want {
			t.Errorf("%s: code %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRunRefusesBadSecretAndTLSFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "token")
	if err := os.WriteFile(full, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "echo", GRPCAddr: "127.0.0.1:0", Start: func(context.Context, Env) (Service, error) {
		t.Error("started despite bad flags")
		return newEcho(), nil
	}}
	for _, args := range [][]string{
		{"--auth-token-file", empty},
		{"--auth-token-file", "/dev/zero"},
		{"--auth-token-file", dir},
		{"--auth-token-file", full, "--auth-token", "x"},
		{"--tls-cert", filepath.Join(dir, "nope.pem")},
		{"--tls-cert", full, "--tls-key", full},
		{"--tls-client-ca", full},
	} {
		if err := Run(context.Background(), spec, args); err == nil {
			t.Errorf("Run(%q) = nil, want an error", args)
		}
	}
}
