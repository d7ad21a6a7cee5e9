package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
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
)

// testPKI is a CA with a server and a client certificate, written as PEM
// files in a temporary directory.
type testPKI struct {
	dir                                  string
	ca, serverCert, serverKey            string
	clientCert, clientKey                string
	otherCA, otherClientCert, otherClKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	p := testPKI{dir: dir}
	caCert, caKey := makeCert(t, nil, nil, "test CA", true, nil)
	p.ca = writePEM(t, dir, "ca.pem", caCert, nil)
	srv, srvKey := makeCert(t, caCert, caKey, "localhost", false,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	p.serverCert = writePEM(t, dir, "server.pem", srv, nil)
	p.serverKey = writePEM(t, dir, "server-key.pem", nil, srvKey)
	cl, clKey := makeCert(t, caCert, caKey, "client", false, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.clientCert = writePEM(t, dir, "client.pem", cl, nil)
	p.clientKey = writePEM(t, dir, "client-key.pem", nil, clKey)
	// A client certificate from a CA the server does not trust.
	otherCA, otherKey := makeCert(t, nil, nil, "other CA", true, nil)
	p.otherCA = writePEM(t, dir, "other-ca.pem", otherCA, nil)
	ocl, oclKey := makeCert(t, otherCA, otherKey, "intruder", false, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.otherClientCert = writePEM(t, dir, "other-client.pem", ocl, nil)
	p.otherClKey = writePEM(t, dir, "other-client-key.pem", nil, oclKey)
	return p
}

func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool, eku []x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: eku, BasicConstraintsValid: true,
	}
	if isCA {
		tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	} else {
		tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, dir, name string, cert *x509.Certificate, key *ecdsa.PrivateKey) string {
	t.Helper()
	var block *pem.Block
	if cert != nil {
		block = &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}
	} else {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

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
	p := newTestPKI(t)
	withCA := clientCreds(t, tlscreds.Client{CA: p.ca})
	addr := runDaemon(t, []string{"--tls-cert", p.serverCert, "--tls-key", p.serverKey}, withCA)

	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{name: "client with the CA", creds: withCA, ok: true},
		{name: "plaintext client", creds: insecure.NewCredentials()},
		{name: "client trusting another CA", creds: clientCreds(t, tlscreds.Client{CA: p.otherCA})},
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
	if err := healthcheck("--tls-ca", p.ca); err != nil {
		t.Errorf("healthcheck --tls-ca: %v", err)
	}
	// A container's health check has the service's environment only.
	t.Setenv("ROLLOUTMESH_TLS_CERT", p.serverCert)
	t.Setenv("ROLLOUTMESH_TLS_KEY", p.serverKey)
	if err := healthcheck(); err != nil {
		t.Errorf("healthcheck with the service's environment: %v", err)
	}
	if err := healthcheck("--tls-ca", ""); err == nil {
		t.Error("plaintext healthcheck of a TLS server succeeded")
	}
}

func TestRunServesMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	full := clientCreds(t, tlscreds.Client{CA: p.ca, Cert: p.clientCert, Key: p.clientKey})
	addr := runDaemon(t, []string{"--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.ca}, full)

	tests := []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{name: "client certificate signed by the CA", creds: full, ok: true},
		{name: "no client certificate", creds: clientCreds(t, tlscreds.Client{CA: p.ca})},
		{name: "client certificate of another CA", creds: clientCreds(t, tlscreds.Client{CA: p.ca, Cert: p.otherClientCert, Key: p.otherClKey})},
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
	if err := healthcheck("--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.clientKey); err != nil {
		t.Errorf("healthcheck with a client certificate: %v", err)
	}
	if err := healthcheck("--tls-ca", p.ca); err == nil {
		t.Error("healthcheck without a client certificate succeeded against mutual TLS")
	}
	t.Setenv("ROLLOUTMESH_TLS_CERT", p.serverCert)
	t.Setenv("ROLLOUTMESH_TLS_KEY", p.serverKey)
	t.Setenv("ROLLOUTMESH_TLS_CLIENT_CA", p.ca)
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
