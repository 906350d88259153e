package redistest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
)

// maxNameLen bounds the test-name part of a prefix.
const maxNameLen = 48

var (
	// prefixBase starts each test binary's sequence at a random point, so that
	// two binaries on one server are unlikely to collide.
	prefixBase = rand.Uint32()
	prefixSeq  atomic.Uint32
)

// Prefix returns a key prefix of the form "t:<test name>:<6 hex digits>:",
// unique within the test binary, for keeping a test's keys apart on a shared
// server. The name is tb.Name() with characters other than letters, digits and
// "_-./" replaced by '_', cut to 48 bytes; the prefix never holds '{' or '}',
// so callers can add their own Cluster hash tags.
func Prefix(tb testing.TB) string {
	tb.Helper()
	n := (prefixBase + prefixSeq.Add(1)) & 0xffffff
	return fmt.Sprintf("t:%s:%06x:", sanitize(tb.Name()), n)
}

// sanitize keeps letters, digits and "_-./" and replaces anything else with '_'.
func sanitize(name string) string {
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("_-./", r):
			return r
		default:
			return '_'
		}
	}, name)
}
