// Package dial opens the runner's outbound gRPC connections (coordinator,
// gateway, storage): plaintext by default or TLS (optionally with a client
// certificate), with an optional bearer token on every call, message
// size limits fit for screenshots and the mesh's fixed flow-control windows.
package dial

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
)

// MaxMessage bounds messages both ways (screenshots and recordings ride
// inside them).
const MaxMessage = 64 << 20

// Conn opens a plaintext connection to addr (host:port). It does not
// block.
func Conn(addr, token string) (*grpc.ClientConn, error) {
	return ConnWith(addr, token, nil)
}

// ConnWith is Conn over the given transport credentials (TLS, from
// tlscreds.Client); nil dials plaintext.
func ConnWith(addr, token string, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
	}
	opts = append(opts, grpcserver.PeerDialOptions()...)
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the mesh runs plaintext inside its
// network unless --peer-tls-ca (or a proxy) adds TLS.
func (bearer) RequireTransportSecurity() bool { return false }
