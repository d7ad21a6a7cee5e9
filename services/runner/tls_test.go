package runner_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds/tlstest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

// TestPeerTLS runs a coordinator and a gateway that require client
// certificates (mutual TLS): a runner with --peer-tls-ca, --peer-tls-cert
// and --peer-tls-key says hello on its Work stream; one without a client
// certificate never gets a stream.
func TestPeerTLS(t *testing.T) {
	pki := tlstest.New(t)
	scfg, err := tlscreds.Server(pki.ServerCert, pki.ServerKey, pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(scfg)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	coord := &testCoordinator{streams: make(chan *coordStream, 4)}
	s := grpc.NewServer(grpc.Creds(creds))
	rmv1.RegisterCoordinatorServer(s, coord)
	go s.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(s.Stop)

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
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: glis, Logger: genv.Logger, Registry: genv.Registry, Creds: creds}, gw)
	}()
	t.Cleanup(func() { cancel(); <-served })

	start := func(tc tlscreds.Client) {
		t.Helper()
		env := daemontest.Env(t)
		env.Logger = zaptest.NewLogger(t)
		svc, err := runner.New(context.Background(), runner.Config{
			Coordinator: lis.Addr().String(), Gateway: glis.Addr().String(), Slots: 1, RunnerID: "tls-runner", PeerTLS: tc,
		}, env)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close(context.Background()) })
	}

	start(tlscreds.Client{CA: pki.CA})
	select {
	case <-coord.streams:
		t.Fatal("a runner without a client certificate reached the coordinator")
	case <-time.After(time.Second):
	}

	start(tlscreds.Client{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey})
	select {
	case cs := <-coord.streams:
		cs.expect(t, "hello", func(m *rmv1.WorkRequest) bool { return m.GetHello() != nil })
	case <-time.After(10 * time.Second):
		t.Fatal("the runner with a client certificate did not reach the coordinator over mutual TLS")
	}
}
