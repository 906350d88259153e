package main

import (
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
)

// hostList is the --allow-host flag: names, repeatable or comma-separated.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		if name = normHost(name); name != "" {
			*h = append(*h, name)
		}
	}
	return nil
}

// Repeatable lets SLUICE_ALLOW_HOST hold several (cli.Flags).
func (h *hostList) Repeatable() {}

// allowedHosts are the names a request to the dashboard on addr may give in
// its Host header: the loopback names, addr's host, and extra
// (--allow-host). For a wildcard addr (0.0.0.0, [::] or no host) that is
// the machine's name and the addresses of its interfaces.
func allowedHosts(addr string, extra []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, normHost(name))
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	} else {
		hosts = append(hosts, normHost(host))
	}
	for _, h := range extra {
		hosts = append(hosts, normHost(h))
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// normHost is a Host header's name as allowedHosts lists it: without the
// port, the brackets of an IPv6 address and a trailing dot, in lower case.
func normHost(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.ToLower(h)
}

// checkHost answers 403 to a request whose Host is not in hosts: a page on
// another site that rebinds its own name to this address (DNS rebinding)
// sends its own name, so it reads nothing.
func checkHost(hosts []string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(hosts, normHost(r.Host)) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("sluice dashboard: this host name is not allowed; start the dashboard with --allow-host NAME to serve it under NAME\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
