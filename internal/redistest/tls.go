package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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

// TLSFiles are PEM files for a redis-server with TLS on loopback.
type TLSFiles struct {
	CA   string // the CA certificate that signed Cert
	Cert string // the server's certificate, for 127.0.0.1 and localhost
	Key  string // the server's private key
}

// NewTLSFiles makes a CA and a server certificate it signed, valid for a
// day, in a directory of tb's own.
func NewTLSFiles(tb testing.TB) TLSFiles {
	tb.Helper()
	dir := tb.TempDir()
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	now := time.Now()
	template := func(serial int64, name string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	}
	caKey := newKey(tb)
	ca := template(1, "snowtoken test CA")
	ca.KeyUsage, ca.BasicConstraintsValid, ca.IsCA = x509.KeyUsageCertSign, true, true
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		tb.Fatal(err)
	}
	key := newKey(tb)
	srv := template(2, "redis-server")
	srv.KeyUsage, srv.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	srv.DNSNames, srv.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	for _, w := range []struct {
		path, typ string
		der       []byte
	}{
		{f.CA, "CERTIFICATE", caDER},
		{f.Cert, "CERTIFICATE", srvDER},
		{f.Key, "PRIVATE KEY", keyDER},
	} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der}), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// ClientConfig is a TLS configuration that trusts the CA, for a test's own
// clients of the server.
func (f TLSFiles) ClientConfig(tb testing.TB) *tls.Config {
	tb.Helper()
	b, err := os.ReadFile(f.CA)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		tb.Fatalf("%s holds no certificate", f.CA)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
