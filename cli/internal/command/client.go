package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"google.golang.org/grpc"

	"github.com/rolloutmesh/rolloutmesh/serverkit/secretflag"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
)

// clientFlags say how the rollout command reaches a running mesh: a bearer
// token, best from a file or the environment since a command line shows in
// ps, and TLS.
type clientFlags struct {
	token, tokenFile string
	tls              tlscreds.Client
}

func (c *clientFlags) register(fs *flag.FlagSet, tokenUsage string) {
	fs.StringVar(&c.token, "auth-token", os.Getenv("ROLLOUTMESH_AUTH_TOKEN"), tokenUsage+"; default $ROLLOUTMESH_AUTH_TOKEN (a value here shows in ps)")
	fs.StringVar(&c.tokenFile, "auth-token-file", "", "read --auth-token from this file")
	c.tls.RegisterFlags(fs, "")
}

// resolve reads --auth-token-file once fs is parsed. The file wins over the
// environment; both on the command line is an error, so a stale value never
// silently wins.
func (c *clientFlags) resolve(fs *flag.FlagSet) error {
	if c.tokenFile == "" {
		return nil
	}
	both := false
	fs.Visit(func(f *flag.Flag) { both = both || f.Name == "auth-token" })
	if both {
		return usageError{errors.New("--auth-token and --auth-token-file: give one")}
	}
	token, err := secretflag.Read(c.tokenFile)
	if err != nil {
		return usageError{fmt.Errorf("--auth-token-file: %w", err)}
	}
	c.token = token
	return nil
}

// bearer sends a token with every call. Without TLS the mesh runs plaintext
// inside a network it trusts, so the token does not demand transport
// security.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

func dial(addr string, c clientFlags) (*grpc.ClientConn, error) {
	creds, err := c.tls.Credentials()
	if err != nil {
		return nil, usageError{fmt.Errorf("TLS: %w", err)}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
