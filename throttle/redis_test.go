package throttle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// ttlSlack is what lua/int.lua's ms adds to every TTL a script sets.
const ttlSlack = time.Second

func TestRedisKeysCarryATTLAndVanishWhenFull(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	ctx := context.Background()
	l := Limit{Rate: 50, Burst: 5} // full again 20 ms per token taken

	require.NoError(t, lim.Acquire(ctx, "api", l, 5))
	ttl, err := rdb.PTTL(ctx, prefix+"{api}").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, ttlSlack, "every key has a TTL, with the slack")
	assert.LessOrEqual(t, ttl, 100*time.Millisecond+ttlSlack, "TTL is the time to refill to full, and the slack")

	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, prefix+"{api}").Result()
		return err == nil && n == 0
	}, 2*time.Second+ttlSlack, 5*time.Millisecond, "a full bucket's key expires")
}

func TestRedisIdleBucketMemory(t *testing.T) {
	srv := redistest.Start(t) // its own server: these keys use the default prefix
	rdb := srv.Client(t)
	ctx := context.Background()
	lim := NewLimiter(NewRedisStore(rdb))
	l := Limit{Rate: 1, Period: time.Hour, Burst: 10}
	for _, name := range []string{"api", "stripe:charges", "tenant:4711:email"} {
		require.NoError(t, lim.Acquire(ctx, name, l, 1))
		key := DefaultKeyPrefix + "{" + name + "}"
		used, err := rdb.MemoryUsage(ctx, key).Result()
		require.NoError(t, err)
		t.Logf("MEMORY USAGE %s: %d bytes", key, used)
		assert.LessOrEqual(t, used, int64(100), key)
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, key+" has a TTL")
	}
}

func TestRedisScriptCacheFlushIsInvisible(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)))
	ctx := context.Background()
	l := Limit{Rate: 1000, Burst: 1000}
	for i := range 20 {
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err, "call %d after SCRIPT FLUSH", i)
		_, err = lim.Cooldown(ctx, "c", l, time.Millisecond)
		require.NoError(t, err, "cooldown %d after SCRIPT FLUSH", i)
	}
}

func TestRedisPausedServerHonoursDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	// A client as users must build it: ContextTimeoutEnabled (see NewRedisStore).
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store)
	l := Limit{Rate: 100, Burst: 10}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	srv.Pause(t)
	for range 3 {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := lim.Acquire(cctx, "k", l, 1)
		elapsed := time.Since(start)
		cancel()
		require.Error(t, err, "a paused Redis never grants")
		assert.ErrorIs(t, err, ErrUnavailable)
		// Bounded by the ctx, not by go-redis's 3 s read timeout and retries.
		assert.Less(t, elapsed, 2*time.Second, "returned after %v", elapsed)
	}
	srv.Resume(t)
	require.NoError(t, lim.Acquire(ctx, "k", l, 1), "works again without a restart")
}

func TestRedisRestartLosesNothingButState(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	lim := NewLimiter(NewRedisStore(rdb))
	l := Limit{Rate: 100, Burst: 10}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	srv.Kill(t)
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := lim.Acquire(cctx, "k", l, 1)
	cancel()
	assert.ErrorIs(t, err, ErrUnavailable, "down: a clean error")

	srv.Restart(t)
	require.Eventually(t, func() bool {
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	for range 5 {
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
		assert.NotContains(t, errString(err), "NOSCRIPT")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The store uses the caller's client as it is: the caller's hooks see its
// calls, and no second pool opens.
func TestRedisStoreUsesCallersPoolAndHooks(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	var seen atomic.Int64
	rdb.AddHook(countingHook{&seen})
	store := NewRedisStore(rdb)
	assert.Same(t, rdb, store.rdb)

	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	_, err := lim.TryAcquire(context.Background(), "k", Limit{Rate: 1, Burst: 1}, 1)
	require.NoError(t, err)
	assert.Positive(t, seen.Load(), "the caller's hook saw the store's call")
	assert.Positive(t, rdb.PoolStats().TotalConns, "the call used the caller's pool")

	require.NoError(t, store.Close())
	require.NoError(t, rdb.Ping(context.Background()).Err(), "the caller's client stays open")
	require.NoError(t, rdb.Close())
}

// A client that would let a call outlive its deadline is refused, with the
// fix in the message, before any I/O.
func TestRedisStoreRefusesClientWithoutDeadlines(t *testing.T) {
	var seen atomic.Int64
	for _, rdb := range []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
		redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}),
	} {
		rdb.AddHook(countingHook{&seen})
		lim := NewLimiter(NewRedisStore(rdb))
		require.ErrorIs(t, lim.Err(), ErrInvalid, "%T", rdb)
		assert.Contains(t, lim.Err().Error(), "ContextTimeoutEnabled: true", "%T", rdb)
		_, err := lim.TryAcquire(context.Background(), "k", Limit{Rate: 1, Burst: 1}, 1)
		assert.ErrorIs(t, err, ErrInvalid, "%T", rdb)
		require.NoError(t, rdb.Close())
	}
	assert.Zero(t, seen.Load(), "no I/O")
}

// countingHook counts the commands a client processes.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
