package command

import (
	"os"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
)

// TestMain removes the desktopd that desktopdOnPath built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if desktopdDir != "" {
		os.RemoveAll(desktopdDir)
	}
	os.Exit(code)
}

// dialMesh connects to one service of an embedded mesh, closed when the
// test ends.
func dialMesh(t *testing.T, m *mesh.Mesh, service string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(m.Addr(service), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
