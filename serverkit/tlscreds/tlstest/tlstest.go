// Package tlstest makes certificates for tests of TLS servers and
// clients: a CA, a server certificate and client certificates, in Go, so
// that tests need no openssl.
package tlstest

import (
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
)

// PKI is a CA with a server and a client certificate, and a second CA
// with a client certificate of its own, written as PEM files in a
// temporary directory. The server certificate names localhost and
// 127.0.0.1 and may also be used as a client certificate, as
// scripts/make-test-ca.sh makes it.
type PKI struct {
	Dir                                  string
	CA, ServerCert, ServerKey            string
	ClientCert, ClientKey                string
	OtherCA, OtherClientCert, OtherClKey string
}

// New writes a fresh PKI into a temporary directory of t.
func New(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	p := PKI{Dir: dir}
	caCert, caKey := makeCert(t, nil, nil, "test CA", true, nil)
	p.CA = writePEM(t, dir, "ca.pem", caCert, nil)
	srv, srvKey := makeCert(t, caCert, caKey, "localhost", false,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	p.ServerCert = writePEM(t, dir, "server.pem", srv, nil)
	p.ServerKey = writePEM(t, dir, "server-key.pem", nil, srvKey)
	cl, clKey := makeCert(t, caCert, caKey, "client", false, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.ClientCert = writePEM(t, dir, "client.pem", cl, nil)
	p.ClientKey = writePEM(t, dir, "client-key.pem", nil, clKey)
	// A client certificate from a CA the server does not trust.
	otherCA, otherKey := makeCert(t, nil, nil, "other CA", true, nil)
	p.OtherCA = writePEM(t, dir, "other-ca.pem", otherCA, nil)
	ocl, oclKey := makeCert(t, otherCA, otherKey, "intruder", false, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	p.OtherClientCert = writePEM(t, dir, "other-client.pem", ocl, nil)
	p.OtherClKey = writePEM(t, dir, "other-client-key.pem", nil, oclKey)
	return p
}

func makeCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool, eku []x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
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

func writePEM(t testing.TB, dir, name string, cert *x509.Certificate, key *ecdsa.PrivateKey) string {
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
