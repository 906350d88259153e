package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
)

const goodToken = "0123456789abcdef-token"

// Every route answers only a Host the dashboard is known by: a DNS-rebinding
// page (Host: evil.example) reads nothing.
func TestDashboardRefusesOtherHosts(t *testing.T) {
	hs, _ := newDashboard(t, goodToken, "--allow-host", "dash.example.com,other.example")
	get := func(path, host string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "dash.example.com.evil"} {
		for _, path := range []string{"/api/state", "/", "/app.js"} {
			resp, body := get(path, host)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s", host, path)
			assert.NotContains(t, body, "worker-one", "%s %s", host, path)
			assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), "%s %s", host, path)
		}
	}
	for _, host := range []string{"", "localhost", "LOCALHOST:8080", "127.0.0.1:9", "[::1]:8080", "dash.example.com", "other.example:443", "dash.example.com."} {
		resp, body := get("/api/state", host)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%q", host)
		assert.Contains(t, body, "worker-one", "%q", host)
	}
	_, body := get("/api/state", "evil.example")
	assert.Contains(t, body, "--allow-host", "the refusal says how to allow a name")
}

// Every response forbids framing.
func TestDashboardHeaders(t *testing.T) {
	hs, _ := newDashboard(t, "")
	for _, path := range []string{"/", "/api/state", "/nope"} {
		resp, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
	}
}

// A token shorter than 16 bytes is refused at start, with exit 2.
func TestDashboardShortToken(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("SLUICE_TOKEN", "")
	r := runArgs("dashboard", "--redis", srv.URL(), "--token", "s3cret")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "sluice: --token is 6 bytes: want at least 16")
	assert.NotContains(t, r.stderr, "s3cret", "the token is not echoed")
	t.Setenv("SLUICE_TOKEN", "short")
	r = runArgs("dashboard", "--redis", srv.URL())
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "want at least 16")

	t.Setenv("SLUICE_TOKEN", "")
	r = runArgs("dashboard", "--redis", srv.URL(), "--tls-cert", "x.pem")
	assert.Equal(t, cli.ExitUsage, r.code)
	assert.Contains(t, r.stderr, "--tls-cert and --tls-key go together")
}

// Wrong tokens from one address slow it down: after one, that address waits
// (429 with Retry-After) even with the right token, longer after each; the
// right token after the wait works and forgives. Other addresses are not held.
func TestDashboardWrongTokens(t *testing.T) {
	hs, _ := newDashboard(t, goodToken)
	post := func(token string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/api/action", strings.NewReader(`{"op": "cooldown", "key": "sleep", "duration": "1s"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusUnauthorized, post("wrong-token-0000000").StatusCode)
	resp := post(goodToken)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "held after a wrong token, whatever the token")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	time.Sleep(lockoutBase + 50*time.Millisecond)
	assert.Equal(t, http.StatusOK, post(goodToken).StatusCode, "the right token after the wait")
	assert.Equal(t, http.StatusUnauthorized, post("wrong-token-0000000").StatusCode, "forgiven: one wrong token is one wait")
}

func TestLockout(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLockout(func() time.Time { return now })
	ip := "192.0.2.7"
	for i, want := range []time.Duration{lockoutBase, 2 * lockoutBase, 4 * lockoutBase} {
		assert.Zero(t, l.wait(ip), "step %d: free before the wrong token", i)
		l.failed(ip)
		assert.Equal(t, want, l.wait(ip), "step %d", i)
		assert.Zero(t, l.wait("192.0.2.8"), "step %d: another address is not held", i)
		now = now.Add(want)
	}
	for range 20 {
		l.failed(ip)
		now = now.Add(l.wait(ip))
	}
	l.failed(ip)
	assert.Equal(t, lockoutMax, l.wait(ip), "capped")
	now = now.Add(lockoutMax)
	l.succeeded(ip)
	l.failed(ip)
	assert.Equal(t, lockoutBase, l.wait(ip), "a right token forgives")

	// Addresses of one IPv6 /64 count as one.
	l.failed("2001:db8::1")
	assert.NotZero(t, l.wait("2001:db8::2"))
	assert.Zero(t, l.wait("2001:db8:0:1::2"))

	// The table is bounded.
	for i := range lockoutEntries + 100 { // each insertion into a full table evicts: a few are enough
		l.failed(big.NewInt(int64(i)).String())
	}
	assert.LessOrEqual(t, l.size(), lockoutEntries)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve runs serveDashboard until the test ends and returns its output once
// it serves.
func serve(t *testing.T, d *dashboard) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- serveDashboard(ctx, d, &out) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dashboard on") }, 5*time.Second, 10*time.Millisecond)
	return out.String()
}

// Listening beyond loopback without TLS warns; with --tls-cert and
// --tls-key it serves HTTPS.
func TestDashboardTLS(t *testing.T) {
	_, f := newDashboard(t, "")
	out := serve(t, newDashboardFor(f, options{addr: "127.0.0.1:0"}, io.Discard))
	assert.NotContains(t, out, "warning")

	out = serve(t, newDashboardFor(f, options{addr: "0.0.0.0:0"}, io.Discard))
	assert.Contains(t, out, "warning: serving on 0.0.0.0:0 without TLS")

	cert, key := selfSigned(t)
	out = serve(t, newDashboardFor(f, options{addr: "127.0.0.1:0", tlsCert: cert, tlsKey: key}, io.Discard))
	assert.NotContains(t, out, "warning")
	_, rest, ok := strings.Cut(out, "dashboard on https://")
	require.True(t, ok, out)
	addr, _, _ := strings.Cut(rest, "/")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + "/api/state")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certPath, keyPath
}
