// Package tlscreds builds gRPC transport credentials from PEM files: the
// server side (certificate, key, and a client CA for mutual TLS) that
// daemon serves with, and the client side (a CA to verify the server, and a
// certificate and key when the server asks for one) that peers dial with.
// Without files, clients dial in plaintext, which the mesh does by default
// inside its own network.
package tlscreds

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// maxPEMBytes bounds a certificate, key or CA bundle file.
const maxPEMBytes = 1 << 20

// Server returns a TLS config that serves certFile and keyFile. When
// clientCAFile is set, every client must present a certificate signed by
// one of its CAs (mutual TLS).
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate and a key")
	}
	cert, err := keyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pool, err := certPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client holds the files a client dials TLS with. The zero value dials
// plaintext.
type Client struct {
	// CA verifies the server's certificate; setting it turns TLS on.
	CA string
	// Cert and Key are presented to servers that require client
	// certificates (mutual TLS).
	Cert, Key string
	// ServerName overrides the name checked against the server's
	// certificate; default the host part of the address dialled.
	ServerName string
}

// RegisterFlags adds --<prefix>tls-ca, --<prefix>tls-cert,
// --<prefix>tls-key and --<prefix>tls-server-name to fs.
func (c *Client) RegisterFlags(fs *flag.FlagSet, prefix string) {
	fs.StringVar(&c.CA, prefix+"tls-ca", "", "PEM CA bundle that verifies the servers dialled; setting it dials TLS")
	fs.StringVar(&c.Cert, prefix+"tls-cert", "", "PEM client certificate for servers that require one (mutual TLS)")
	fs.StringVar(&c.Key, prefix+"tls-key", "", "PEM key of the client certificate")
	fs.StringVar(&c.ServerName, prefix+"tls-server-name", "", "name expected in the server certificates; default the dialled host")
}

// Enabled reports whether the client dials TLS.
func (c Client) Enabled() bool { return c.CA != "" }

// Credentials returns TLS credentials when CA is set, and plaintext ones
// otherwise. A client certificate without a CA is an error rather than a
// silent plaintext connection.
func (c Client) Credentials() (credentials.TransportCredentials, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return insecure.NewCredentials(), nil
	}
	return credentials.NewTLS(cfg), nil
}

// Config returns the client TLS config, or nil for plaintext.
func (c Client) Config() (*tls.Config, error) {
	if c.CA == "" {
		if c.Cert != "" || c.Key != "" {
			return nil, errors.New("a TLS client certificate needs a TLS CA too")
		}
		return nil, nil
	}
	pool, err := certPool(c.CA)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.Cert != "" || c.Key != "" {
		if c.Cert == "" || c.Key == "" {
			return nil, errors.New("a TLS client certificate needs both a certificate and a key")
		}
		cert, err := keyPair(c.Cert, c.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func keyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := boundedread.ReadFile(certFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := boundedread.ReadFile(keyFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS key pair %s, %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

func certPool(caFile string) (*x509.CertPool, error) {
	b, err := boundedread.ReadFile(caFile, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}
