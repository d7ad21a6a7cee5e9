// Package dial opens the runner's outbound gRPC connections (coordinator,
// gateway, storage): plaintext by default, with an optional bearer token
// on every call and message size limits fit for screenshots.
package dial

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessage bounds messages both ways (screenshots and recordings ride
// inside them).
const MaxMessage = 64 << 20

// Conn opens a connection to addr (host:port). It does not block.
func Conn(addr, token string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
	}
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
// network unless a proxy adds TLS.
func (bearer) RequireTransportSecurity() bool { return false }
