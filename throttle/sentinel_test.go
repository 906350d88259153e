package throttle

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Sentinel-managed failover: a master, a replica and three sentinels. The
// limiter works through a go-redis failover client (used as it is: a copy
// would not follow its master switches), fails cleanly while no master
// answers, and works again once the sentinels promote the replica.
func TestRedisSentinelFailover(t *testing.T) {
	master := redistest.Start(t)
	_, port, err := net.SplitHostPort(master.Addr())
	require.NoError(t, err)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", port)
	var sentinels []string
	for range 3 {
		sentinels = append(sentinels, redistest.StartSentinel(t, "sluice", master.Addr(), 2).Addr())
	}
	ctx := context.Background()
	require.Eventually(t, func() bool {
		info, err := replica.Client(t).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 50*time.Millisecond, "the replica syncs")

	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "sluice", SentinelAddrs: sentinels, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { rdb.Close() })
	store := NewRedisStore(rdb)
	assert.Same(t, rdb, store.rdb, "a failover client is used as it is")
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	l := Limit{Rate: 1000, Burst: 1000}
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	master.Kill(t)
	killed := time.Now()
	var down int
	require.Eventually(t, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := lim.TryAcquire(cctx, "k", l, 1)
		if err != nil {
			down++
			assert.ErrorIs(t, err, ErrUnavailable, "while no master answers: a store error")
		}
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "served again after the failover")
	t.Logf("master killed: %d calls failed, served again after %v", down, time.Since(killed).Round(10*time.Millisecond))

	role, err := replica.Client(t).Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	assert.Equal(t, "master", role[0], "the replica was promoted")
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))
}
