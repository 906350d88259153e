package httplimit

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc returns the key a request is limited by: each key has its own
// bucket. An error matching ErrNoKey means the request carries no key (a
// missing API key, say); the Middleware answers it through its error handler,
// by default with 400 Bad Request. Any other error is answered with 500.
//
// A key may be any non-empty string. The Middleware stores it as it is when
// it is short and plain; a key longer than fits in a bucket name
// (throttle.MaxKeyLen), or holding '{', '}' or control characters, or
// starting with '#', is replaced by "#" and its SHA-256, so a client cannot
// choose its Redis Cluster slot or break the key layout.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is matched by the error a KeyFunc returns for a request that
// carries no key.
var ErrNoKey = errors.New("httplimit: request has no rate-limit key")

// ByIP keys a request by the address of its peer, r.RemoteAddr: "ip:" and the
// IPv4 address, or the IPv6 address's /64 network (one host usually holds a
// whole /64, so keying by the full address would give it 2^64 buckets).
// Behind a reverse proxy every request comes from the proxy: use
// ByForwardedIP. A RemoteAddr that is not an IP address (a Unix socket) is
// an error, answered with 500.
func ByIP(r *http.Request) (string, error) {
	a, err := peerAddr(r)
	if err != nil {
		return "", err
	}
	return ipKey(a), nil
}

// ByForwardedIP keys a request by its client's address as ByIP does, reading
// X-Forwarded-For when the request comes through a proxy in trusted.
//
// A client can write anything into X-Forwarded-For; only what trusted proxies
// appended can be believed. So the header is read only when the peer
// (RemoteAddr) is in trusted, from the right, each proxy's entry naming the
// hop before it, and the client is the first address that is not in trusted.
// If every address is trusted, it is the leftmost; an entry that is not an IP
// address ends the walk at the last good one. A request whose peer is not
// trusted is keyed by its peer, whatever its header says. Several
// X-Forwarded-For fields count as one list, in order; entries may carry a
// port. The Forwarded field (RFC 7239) is not read.
func ByForwardedIP(trusted ...netip.Prefix) KeyFunc {
	nets := make([]netip.Prefix, 0, len(trusted))
	for _, p := range trusted {
		if p.IsValid() {
			nets = append(nets, normPrefix(p))
		}
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		client, err := peerAddr(r)
		if err != nil {
			return "", err
		}
		if !isTrusted(client) {
			return ipKey(client), nil
		}
		fields := r.Header.Values("X-Forwarded-For")
	walk:
		for i := len(fields) - 1; i >= 0; i-- {
			list := fields[i]
			for list != "" {
				entry := list
				if j := strings.LastIndexByte(list, ','); j >= 0 {
					entry, list = list[j+1:], list[:j]
				} else {
					list = ""
				}
				entry = strings.TrimSpace(entry)
				if entry == "" {
					continue
				}
				a, ok := parseHop(entry)
				if !ok {
					break walk
				}
				client = a
				if !isTrusted(a) {
					break walk
				}
			}
		}
		return ipKey(client), nil
	}
}

// normPrefix is p masked, and an IPv4-mapped IPv6 prefix ("::ffff:10.0.0.0/104")
// as its IPv4 form, since addresses are compared unmapped.
func normPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// parseHop parses one X-Forwarded-For entry: an address, with or without a
// port ("192.0.2.1:5000", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}

func peerAddr(r *http.Request) (netip.Addr, error) {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("httplimit: RemoteAddr %q is not an IP address", r.RemoteAddr)
	}
	return a.WithZone("").Unmap(), nil
}

// ipKey is the key of address a: the address itself for IPv4, its /64 for IPv6.
func ipKey(a netip.Addr) string {
	if a.Is4() {
		return "ip:" + a.String()
	}
	p, _ := a.Prefix(64)
	return "ip:" + p.String()
}

// ByHeader keys a request by the value of its header field name, such as
// "X-API-Key": requests with the same value share a bucket. The value is
// never stored: the key is "hdr:", the canonical field name, ":" and the
// SHA-256 of the value, so secrets do not appear in the store's key names.
//
// A request without the field, or with only spaces in it, has no key
// (ErrNoKey), and by default gets 400 Bad Request. To limit such requests
// by address instead, use FirstOf(ByHeader(name), ByIP); to let them through
// unlimited, WithExempt.
func ByHeader(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := strings.TrimSpace(r.Header.Get(name))
		if v == "" {
			return "", fmt.Errorf("%w: header %s is missing or empty", ErrNoKey, name)
		}
		return "hdr:" + name + ":" + digest(v), nil
	}
}

// FirstOf keys a request by the first of keys that finds one: a KeyFunc that
// fails with ErrNoKey passes the request to the next, any other error is
// returned at once. If none finds a key, the request has none (ErrNoKey).
// The keys of ByIP and ByHeader never collide, so FirstOf(ByHeader("X-API-Key"),
// ByIP) keeps callers with a key apart from callers without.
func FirstOf(keys ...KeyFunc) KeyFunc {
	keys = append([]KeyFunc(nil), keys...)
	return func(r *http.Request) (string, error) {
		err := ErrNoKey
		for _, f := range keys {
			if f == nil {
				continue
			}
			var k string
			k, err = f(r)
			if err == nil {
				return k, nil
			}
			if !errors.Is(err, ErrNoKey) {
				return "", err
			}
		}
		return "", err
	}
}

// digest is the SHA-256 of s in unpadded URL-safe base64: 43 bytes.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// bucketName is the bucket of key under the policy name: name + ":" + key,
// with key replaced by "#" and its digest when it would not fit in
// maxLen bytes or holds anything that could change the key's layout.
func bucketName(name, key string, maxLen int) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
	}
	if len(name)+1+len(key) > maxLen || !plainKey(key) {
		key = "#" + digest(key)
	}
	return name + ":" + key, nil
}

// plainKey reports whether key can go into a bucket name as it is: it does
// not start with '#' (hashed keys do) and holds no hash-tag braces or
// control characters.
func plainKey(key string) bool {
	if key[0] == '#' {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == '{' || c == '}' {
			return false
		}
	}
	return true
}
