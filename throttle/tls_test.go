package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// limiterACL are the ACL SETUSER rules that give a user the least it needs for
// a Limiter under the default prefix: the two script commands (EVAL is the
// fallback when the script cache is empty) and the commands the scripts call,
// which Redis checks against the same user, holes.lua's included (a turn
// cancelled under a later one). docs/redis-deployment.md quotes them; keep
// the two in step.
var limiterACL = []string{
	"reset", "on", ">secret", "~sluice:*", "resetchannels", "-@all",
	"+evalsha", "+eval", "+get", "+set", "+del", "+time",
	// holes: a turn cancelled under a later one (lua/holes.lua)
	"+zadd", "+zcard", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+pttl", "+pexpire",
}

// policiesACL adds to limiterACL what the other policies and Hold need: their
// scripts' hash, list and sorted-set commands, and Hold's wake-up channel
// (PUBLISH in release.lua, SUBSCRIBE by the store; channels are named like the
// semaphore's key, so the key prefix covers them). docs/redis-deployment.md
// quotes them too.
var policiesACL = []string{
	"reset", "on", ">secret", "~sluice:*", "resetchannels", "&sluice:*", "-@all",
	"+evalsha", "+eval", "+get", "+set", "+del", "+time", "+pexpire", "+pttl", "+exists",
	"+hmget", "+hset", "+hgetall", "+hdel",
	"+llen", "+lindex", "+lrange", "+lpush", "+rpush", "+lrem", "+ltrim",
	"+zadd", "+zcard", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+zscore",
	"+publish", "+subscribe", "+unsubscribe",
}

// startACLServer starts a TLS-only Redis whose default user needs the password
// "admin", with the user "sluice" set up by limiterACL, and returns the server
// and an admin client.
func startACLServer(t *testing.T) (*redistest.TLSServer, *redis.Client) {
	t.Helper()
	srv := redistest.StartTLS(t, "--requirepass", "admin")
	admin := srv.Client(t)
	args := append([]any{"ACL", "SETUSER", "sluice"}, anys(limiterACL)...)
	require.NoError(t, admin.Do(context.Background(), args...).Err())
	return srv, admin
}

// tlsClient returns a client for url as users build one: redis.ParseURL, plus
// the CA to trust. Its options leave ContextTimeoutEnabled off, so a store over
// it makes its own copy; that copy must keep TLS and the credentials.
func tlsClient(t *testing.T, srv *redistest.TLSServer, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	require.NoError(t, err)
	require.NotNil(t, opt.TLSConfig, "rediss:// turns TLS on")
	opt.TLSConfig.RootCAs = srv.TLSConfig().RootCAs
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newTLSLimiter(t *testing.T, rdb *redis.Client, opts ...Option) *Limiter {
	t.Helper()
	store := NewRedisStore(rdb)
	t.Cleanup(func() { _ = store.Close() })
	return NewLimiter(store, opts...)
}

func TestRedisTLSWithLeastPrivilegeUser(t *testing.T) {
	srv, admin := startACLServer(t)
	rdb := tlsClient(t, srv, srv.URL("sluice", "secret"))
	prefix := DefaultKeyPrefix + redistest.Prefix(t)
	lim := newTLSLimiter(t, rdb, WithKeyPrefix(prefix))
	ctx := context.Background()
	l := Limit{Rate: 20, Burst: 2} // a token every 50 ms

	// An empty script cache: the first calls go through the EVAL fallback.
	require.NoError(t, admin.ScriptFlush(ctx).Err())

	require.NoError(t, lim.Acquire(ctx, "api", l, 1), "Acquire")
	res, err := lim.TryAcquire(ctx, "api", l, 1)
	require.NoError(t, err, "TryAcquire")
	assert.True(t, res.Allowed, "second token of the burst")
	res, err = lim.TryAcquire(ctx, "api", l, 1)
	require.NoError(t, err, "TryAcquire on an empty bucket")
	assert.False(t, res.Allowed, "the bucket is empty")
	assert.Greater(t, res.RetryAfter, time.Duration(0))

	r, err := lim.Reserve(ctx, "api", l, 1, time.Second)
	require.NoError(t, err, "Reserve")
	assert.Greater(t, r.Delay(), time.Duration(0), "an empty bucket books a later slot")
	r2, err := lim.Reserve(ctx, "api", l, 1, time.Second)
	require.NoError(t, err, "Reserve behind it")
	require.NoError(t, r.Cancel(ctx), "Cancel under a later booking: a hole")
	r3, err := lim.Reserve(ctx, "api", l, 1, time.Second)
	require.NoError(t, err, "Reserve takes the hole")
	assert.Less(t, r3.Delay(), r2.Delay(), "the hole's turn, before the later booking's")
	require.NoError(t, r2.Cancel(ctx), "Cancel of the latest booking")
	require.NoError(t, r3.Cancel(ctx), "Cancel of the hole's taker")

	// Two buckets, the second fresh: its refund empties the key (DEL).
	tagged := []Bucket{{Key: "{acct}:tenant:1", Limit: Limit{Rate: 1, Burst: 1}}, {Key: "{acct}:global", Limit: Limit{Rate: 1000, Burst: 10}}}
	require.NoError(t, lim.AcquireAll(ctx, tagged[:1]), "AcquireAll")
	r, err = lim.ReserveAll(ctx, tagged, 2*time.Second)
	require.NoError(t, err, "ReserveAll")
	assert.Greater(t, r.Delay(), 500*time.Millisecond, "the tenant bucket is empty")
	require.NoError(t, r.Cancel(ctx), "Cancel of a multi-bucket reservation")
	n, err := admin.Exists(ctx, prefix+"{acct}:global").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the refund left the global bucket full, so it deleted its key")
	r, err = lim.ReserveAll(ctx, tagged, 2*time.Second)
	require.NoError(t, err, "ReserveAll, the global bucket pushed to the tenant's slot")
	require.NoError(t, r.Settle(ctx, "{acct}:global", 0), "Settle of a pushed bucket")

	next, err := lim.Cooldown(ctx, "upstream", l, 300*time.Millisecond)
	require.NoError(t, err, "Cooldown")
	assert.InDelta(t, 300*time.Millisecond, next, float64(50*time.Millisecond))
	res, err = lim.TryAcquire(ctx, "upstream", l, 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "cooling down")

	log, err := admin.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	assert.Empty(t, log, "Redis denied nothing to the limiter's user")
}

func TestRedisACLRefusesKeysOutsideThePrefix(t *testing.T) {
	srv, _ := startACLServer(t)
	rdb := tlsClient(t, srv, srv.URL("sluice", "secret"))
	lim := newTLSLimiter(t, rdb, WithKeyPrefix("other:"))
	ctx := context.Background()
	l := Limit{Rate: 10, Burst: 1}

	start := time.Now()
	_, err := lim.TryAcquire(ctx, "api", l, 1)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnavailable, "a refusal by Redis is a store error")
	var se *storeError
	assert.True(t, errors.As(err, &se), "a *storeError: %v", err)
	assert.True(t, redis.HasErrorPrefix(err, "NOPERM"), "the cause is Redis's NOPERM: %v", err)
	assert.Less(t, time.Since(start), time.Second, "refused at once")
	t.Logf("outside the prefix: %v", err)

	_, err = lim.Cooldown(ctx, "api", l, time.Second)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.True(t, redis.HasErrorPrefix(err, "NOPERM"), "Cooldown: %v", err)
}

func TestRedisWrongPassword(t *testing.T) {
	srv, _ := startACLServer(t)
	ctx := context.Background()
	l := Limit{Rate: 10, Burst: 1}
	for _, tc := range []struct{ name, url, reply string }{
		{"wrong password", srv.URL("sluice", "wrong"), "WRONGPASS"},
		{"unknown user", srv.URL("nobody", "secret"), "WRONGPASS"},
		// Redis answers a client that has not authenticated and sends more
		// than 10 arguments with a protocol error rather than NOAUTH; a
		// Limit's lean script call sends nine (redis.go, reserveLean), so
		// NOAUTH it is (redis.go's refusal check knows both).
		{"no credentials", srv.URL("", ""), "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A refusal is a misconfiguration, not an outage: no policy grants through it.
			for _, policy := range []Option{
				WithFailurePolicy(FailClosed),
				WithFailurePolicy(FailOpen),
				func(c *config) { WithFailurePolicy(FailLocal)(c); WithHosts(fixedHosts(2))(c) },
			} {
				lim := newTLSLimiter(t, tlsClient(t, srv, tc.url), policy)
				start := time.Now()
				res, err := lim.TryAcquire(ctx, "api", l, 1)
				require.Error(t, err, "granted: %+v", res)
				assert.ErrorIs(t, err, ErrUnavailable)
				var se *storeError
				require.ErrorAs(t, err, &se)
				assert.ErrorIs(t, err, ErrRefused, "a refusal, not an outage")
				assert.True(t, redis.HasErrorPrefix(err, tc.reply), "the cause is Redis's %s: %v", tc.reply, err)
				assert.Less(t, time.Since(start), 2*time.Second, "refused promptly")
				assert.Equal(t, ModeShared, lim.Mode(), "a refusal does not switch to fallback")
			}
		})
	}
}

// Every policy and Hold work for a user with policiesACL, and Redis refuses
// nothing to it: not a script command, not the wake-up channel.
func TestRedisACLForEveryPolicy(t *testing.T) {
	srv, admin := startACLServer(t)
	ctx := context.Background()
	args := append([]any{"ACL", "SETUSER", "sluice"}, anys(policiesACL)...)
	require.NoError(t, admin.Do(ctx, args...).Err())
	rdb := tlsClient(t, srv, srv.URL("sluice", "secret"))
	lim := newTLSLimiter(t, rdb, WithKeyPrefix(DefaultKeyPrefix+redistest.Prefix(t)))
	require.NoError(t, admin.ScriptFlush(ctx).Err())

	for _, pol := range []Policy{
		FixedWindow{Max: 1, Window: time.Minute},
		SlidingLog{Max: 1, Window: time.Minute},
		SlidingWindow{Max: 1, Window: time.Minute, Slots: 6},
		LeakyBucket{Rate: 1, Period: time.Minute, Capacity: 2},
	} {
		res, err := lim.TryAcquire(ctx, "api", pol, 1)
		require.NoError(t, err, "%v", pol)
		assert.True(t, res.Allowed, "%v", pol)
		r, err := lim.Reserve(ctx, "api", pol, 1, time.Hour)
		require.NoError(t, err, "%v", pol)
		require.NoError(t, r.Cancel(ctx), "%v", pol)
	}

	// Hold, with a waiter woken by a release: hold, renew, release, PUBLISH
	// and the store's SUBSCRIBE.
	c := Concurrency{Max: 1, Lease: time.Second}
	first, err := lim.Hold(ctx, "export", c)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := lim.Hold(ctx, "export", c)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(500 * time.Millisecond) // past a renewal (every Lease/3), and the waiter subscribed
	require.NoError(t, first.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}

	log, err := admin.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	assert.Empty(t, log, "Redis denied nothing to the limiter's user")
}
