package throttle

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The quickstart runs on miniredis (its Lua is gopher-lua, not Redis's), so the
// scripts must decide the same there. This is a compatibility check for that
// embedded default; the real-Redis run above is the one that proves the design.
func TestConformanceMiniredis(t *testing.T) {
	_, rdb := miniredisClient(t)
	runConformance(t, func(c clock) Store { return NewRedisStore(rdb, WithClock(c)) }, "mini:")
}

// miniredisClient is a miniredis of the test's own and a client of it, both
// closed with the test.
func miniredisClient(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return mr, rdb
}
