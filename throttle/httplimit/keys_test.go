package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func request(remote string, header ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return req
}

func TestByIP(t *testing.T) {
	cases := []struct {
		remote, want string
	}{
		{"192.0.2.1:1234", "ip:192.0.2.1"},
		{"192.0.2.1", "ip:192.0.2.1"}, // no port
		{"[::ffff:192.0.2.1]:1234", "ip:192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "ip:2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:443", "ip:fe80::/64"},
	}
	for _, c := range cases {
		got, err := ByIP(request(c.remote))
		require.NoError(t, err, c.remote)
		assert.Equal(t, c.want, got, c.remote)
	}
	for _, remote := range []string{"", "@", "example.com:80"} {
		_, err := ByIP(request(remote))
		assert.Error(t, err, remote)
		assert.NotErrorIs(t, err, ErrNoKey, remote)
	}
}

func TestByForwardedIP(t *testing.T) {
	key := ByForwardedIP(
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("2001:db8:ffff::/48"),
		netip.MustParsePrefix("::ffff:172.16.0.0/108"), // mapped: trusted as 172.16.0.0/12
	)
	cases := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer: header ignored", "198.51.100.7:1", []string{"203.0.113.9"}, "ip:198.51.100.7"},
		{"untrusted peer: spoofed private hop ignored", "198.51.100.7:1", []string{"10.1.1.1"}, "ip:198.51.100.7"},
		{"trusted peer", "10.0.0.1:1", []string{"203.0.113.9"}, "ip:203.0.113.9"},
		{"trusted peer, no header", "10.0.0.1:1", nil, "ip:10.0.0.1"},
		{"client-written hops left of the real one", "10.0.0.1:1", []string{"1.1.1.1, 2.2.2.2, 203.0.113.9"}, "ip:203.0.113.9"},
		{"chain of trusted proxies", "10.0.0.1:1", []string{"203.0.113.9, 10.0.0.3, 10.0.0.2"}, "ip:203.0.113.9"},
		{"several fields form one list", "10.0.0.1:1", []string{"1.1.1.1, 203.0.113.9", "10.0.0.2"}, "ip:203.0.113.9"},
		{"all trusted: leftmost", "10.0.0.1:1", []string{"10.0.0.3, 10.0.0.2"}, "ip:10.0.0.3"},
		{"garbage ends the walk", "10.0.0.1:1", []string{"203.0.113.9, junk, 10.0.0.2"}, "ip:10.0.0.2"},
		{"empty entries skipped", "10.0.0.1:1", []string{" , 203.0.113.9 ,, "}, "ip:203.0.113.9"},
		{"entries with ports", "10.0.0.1:1", []string{"[2001:db8::9]:5555, 10.0.0.2:80"}, "ip:2001:db8::/64"},
		{"IPv6 proxy", "[2001:db8:ffff::1]:1", []string{"203.0.113.9"}, "ip:203.0.113.9"},
		{"mapped prefix", "172.16.5.5:1", []string{"203.0.113.9"}, "ip:203.0.113.9"},
		{"mapped peer", "[::ffff:10.0.0.1]:1", []string{"203.0.113.9"}, "ip:203.0.113.9"},
	}
	for _, c := range cases {
		req := request(c.remote)
		for _, v := range c.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		got, err := key(req)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}

	none := ByForwardedIP()
	got, err := none(request("10.0.0.1:1", "X-Forwarded-For", "203.0.113.9"))
	require.NoError(t, err)
	assert.Equal(t, "ip:10.0.0.1", got, "no trusted proxies: the header is never read")
}

func TestByHeader(t *testing.T) {
	key := ByHeader("x-api-key")
	a, err := key(request("192.0.2.1:1", "X-Api-Key", "secret-1"))
	require.NoError(t, err)
	assert.Equal(t, "hdr:X-Api-Key:"+digest("secret-1"), a)
	assert.NotContains(t, a, "secret")
	b, err := key(request("192.0.2.1:1", "X-Api-Key", " secret-1 "))
	require.NoError(t, err)
	assert.Equal(t, a, b, "surrounding spaces do not count")

	for _, v := range []string{"", "  "} {
		_, err := key(request("192.0.2.1:1", "X-Api-Key", v))
		assert.ErrorIs(t, err, ErrNoKey)
	}
	_, err = key(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, ErrNoKey)
}

func TestFirstOf(t *testing.T) {
	key := FirstOf(nil, ByHeader("X-API-Key"), ByIP)
	got, err := key(request("192.0.2.1:1", "X-API-Key", "k"))
	require.NoError(t, err)
	assert.Equal(t, "hdr:X-Api-Key:"+digest("k"), got)
	got, err = key(request("192.0.2.1:1"))
	require.NoError(t, err)
	assert.Equal(t, "ip:192.0.2.1", got)

	_, err = FirstOf(ByHeader("A"), ByHeader("B"))(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, ErrNoKey)
	_, err = FirstOf()(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, ErrNoKey)

	boom := errors.New("boom")
	calls := 0
	_, err = FirstOf(
		func(*http.Request) (string, error) { return "", boom },
		func(*http.Request) (string, error) { calls++; return "x", nil },
	)(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, 0, calls, "an error other than ErrNoKey stops the search")
}
