package coordinator_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds/tlstest"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// TestPeerTLS: with --peer-tls-* the coordinator reaches a gateway that
// requires mutual TLS, and without a client certificate it does not.
func TestPeerTLS(t *testing.T) {
	pki := tlstest.New(t)
	scfg, err := tlscreds.Server(pki.ServerCert, pki.ServerKey, pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	genv := daemontest.Env(t)
	gw, err := modelgateway.New(context.Background(), modelgateway.Config{File: &modelgateway.FileConfig{
		Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: f.URL, Kind: modelgateway.KindVLLM, Model: "fake-model"}},
	}}, genv)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: genv.Logger, Registry: genv.Registry,
			Creds: credentials.NewTLS(scfg)}, gw)
	}()
	t.Cleanup(func() { cancel(); <-served })

	tests := []struct {
		name   string
		tls    tlscreds.Client
		wantOK bool
	}{
		{"plaintext", tlscreds.Client{}, false},
		{"no client certificate", tlscreds.Client{CA: pki.CA}, false},
		{"mutual TLS", tlscreds.Client{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, coordinator.Config{Gateway: lis.Addr().String(), PeerTLS: tt.tls})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			up, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 1, UpdateGateway: true})
			if got := err == nil && up.GetGateway().GetVersion() == 1; got != tt.wantOK {
				t.Fatalf("UpdateModelVersion through the gateway: ok %v (%v, err %v), want ok %v", got, up, err, tt.wantOK)
			}
		})
	}
}
