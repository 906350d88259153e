package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSServer is a redis-server that accepts only TLS connections, with a
// certificate authority made for it at start. Its embedded Server's Addr,
// Client, Pause, Kill, Restart and Stop work as usual, Client over TLS.
type TLSServer struct {
	*Server
	CAFile   string // PEM certificate of the CA that signed the server's certificate
	CertFile string // PEM server certificate, for 127.0.0.1, ::1 and localhost
	KeyFile  string // PEM server private key

	roots *x509.CertPool
}

// StartTLS starts a redis-server, as Start does, that listens for TLS on a
// free loopback port and not at all for plain TCP. A CA, and a server
// certificate it signs, are generated for the server and written to its
// directory. Clients need no certificate of their own (--tls-auth-clients no;
// args may say otherwise). args are appended to the command line, for example
// "--requirepass", "secret", or an ACL user as separate words:
// "--user", "app", "on", ">pw", "~app:*", "+@all".
func StartTLS(tb testing.TB, args ...string) *TLSServer {
	tb.Helper()
	t := &TLSServer{}
	s, err := startWith(args, t.setup)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Stop)
	t.Server = s
	return t
}

// setup writes the certificates to s's directory and arranges for s to serve TLS.
func (t *TLSServer) setup(s *Server) error {
	t.CAFile = filepath.Join(s.dir, "ca.crt")
	t.CertFile = filepath.Join(s.dir, "redis.crt")
	t.KeyFile = filepath.Join(s.dir, "redis.key")
	ca, err := writeCerts(t.CAFile, t.CertFile, t.KeyFile)
	if err != nil {
		return fmt.Errorf("make TLS certificates: %w", err)
	}
	t.roots = x509.NewCertPool()
	t.roots.AddCert(ca)
	tlsArgs := []string{
		"--tls-cert-file", t.CertFile,
		"--tls-key-file", t.KeyFile,
		"--tls-ca-cert-file", t.CAFile,
		"--tls-auth-clients", "no",
	}
	s.args = append(tlsArgs, s.args...) // the caller's args come last and win
	s.tls = t.TLSConfig()
	return nil
}

// TLSConfig returns a new client configuration that trusts the server's CA
// and expects the name 127.0.0.1, which the server's certificate carries.
func (t *TLSServer) TLSConfig() *tls.Config {
	return &tls.Config{
		RootCAs:    t.roots,
		ServerName: "127.0.0.1",
		MinVersion: tls.VersionTLS12,
	}
}

// URL returns "rediss://user:password@127.0.0.1:PORT/0", without the
// user-info part if both are empty. redis.ParseURL reads it; the options it
// returns still need TLSConfig's RootCAs to trust the server.
func (t *TLSServer) URL(user, password string) string {
	u := url.URL{Scheme: "rediss", Host: t.Addr(), Path: "/0"}
	if user != "" || password != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// certLifetime is how long generated certificates are valid; a test needs minutes.
const certLifetime = 24 * time.Hour

// writeCerts makes a CA and a server certificate signed by it, writes the
// CA certificate, the server certificate and the server key as PEM, and
// returns the CA certificate.
func writeCerts(caFile, certFile, keyFile string) (*x509.Certificate, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "redistest server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}

	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{caFile, "CERTIFICATE", caDER, 0o644},
		{certFile, "CERTIFICATE", der, 0o644},
		{keyFile, "PRIVATE KEY", keyDER, 0o600},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})
		if err := os.WriteFile(f.path, data, f.mode); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

// serial returns a random 128-bit certificate serial number.
func serial() *big.Int {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return new(big.Int).SetBytes(b[:])
}
