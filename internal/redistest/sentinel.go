package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// StartSentinel starts a Redis Sentinel on a free loopback port, monitoring
// the master at masterAddr under name with the given quorum. It declares the
// master down after 1 s without an answer and fails over within 3 s, so
// failover tests stay short. tb.Cleanup stops it.
func StartSentinel(tb testing.TB, name, masterAddr string, quorum int) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatalf("redistest: sentinel: master address %q: %v", masterAddr, err)
	}
	s, err := startWith([]string{"--sentinel"}, func(s *Server) error {
		s.conf = filepath.Join(s.dir, "sentinel.conf")
		conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[4]d\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 3000\n"+
			"sentinel parallel-syncs %[1]s 1\n", name, host, port, quorum)
		return os.WriteFile(s.conf, []byte(conf), 0o644)
	})
	if err != nil {
		tb.Fatalf("redistest: sentinel: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}
