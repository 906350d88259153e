package throttle

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisCluster runs the store against a Redis Cluster of three masters,
// each with one replica. The subtests share the cluster and run in order; the
// last one kills a master.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	rdb := c.Client(t)

	t.Run("single buckets spread over the masters", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		ctx := context.Background()
		l := Limit{Rate: 1, Period: time.Minute, Burst: 3}
		masters := make(map[string]int)
		for i := range 30 {
			name := "k" + strconv.Itoa(i)
			for want := 2; want >= 0; want-- {
				res, err := lim.TryAcquire(ctx, name, l, 1)
				require.NoError(t, err, "key %s", name)
				assert.True(t, res.Allowed, "key %s: a token of the burst", name)
				assert.Equal(t, want, res.Remaining, "key %s", name)
			}
			res, err := lim.TryAcquire(ctx, name, l, 1)
			require.NoError(t, err, "key %s", name)
			assert.False(t, res.Allowed, "key %s: empty", name)
			assert.InDelta(t, time.Minute, res.RetryAfter, float64(time.Second), "key %s", name)

			// The bucket's key is on the master that owns its slot, and only there.
			key := prefix + "{" + name + "}"
			m := c.Master(t, key)
			masters[m.Addr()]++
			n, err := m.Client(t).Exists(ctx, key).Result()
			require.NoError(t, err, "key %s: its master serves it", name)
			assert.Equal(t, int64(1), n, "key %s is on %s", name, m.Addr())
		}
		assert.GreaterOrEqual(t, len(masters), 2, "30 buckets land on several masters: %v", masters)
		t.Logf("30 buckets per master: %v", masters)

		// Acquire sleeps until its slot, and fails at once past its deadline.
		fast := Limit{Rate: 20, Burst: 1}
		require.NoError(t, lim.Acquire(ctx, "wait", fast, 1))
		start := time.Now()
		require.NoError(t, lim.Acquire(ctx, "wait", fast, 1))
		assert.InDelta(t, 50*time.Millisecond, time.Since(start), float64(40*time.Millisecond), "slept until the next token")
		dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, lim.Acquire(dctx, "wait", fast, 1), ErrLimited)
	})

	t.Run("every policy, with reservations and refunds", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		ctx := context.Background()
		policies := []Policy{
			FixedWindow{Max: 2, Window: time.Minute},
			SlidingLog{Max: 2, Window: time.Minute},
			SlidingWindow{Max: 2, Window: time.Minute, Slots: 6},
			LeakyBucket{Rate: 1, Period: time.Minute, Capacity: 3},
		}
		for i, pol := range policies {
			for j := range 10 { // keys over several slots, some with a tag of their own
				name := fmt.Sprintf("p%d-%d", i, j)
				if j%2 == 1 {
					name = "{acct}:" + name
				}
				res, err := lim.TryAcquire(ctx, name, pol, 1)
				require.NoError(t, err, "%v %s", pol, name)
				assert.True(t, res.Allowed, "%v %s", pol, name)
				// A booking into the future, cancelled: the refund's marker
				// key must share the state key's slot.
				r, err := lim.Reserve(ctx, name, pol, 2, time.Hour)
				require.NoError(t, err, "%v %s", pol, name)
				assert.Positive(t, r.Delay(), "%v %s: booked ahead", pol, name)
				require.NoError(t, r.Cancel(ctx), "%v %s", pol, name)
			}
		}
	})

	t.Run("every policy: mixed buckets, a turn given back in any order, a cooldown", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		ctx := context.Background()
		for i, p := range policiesPer(time.Minute) { // slots far ahead of the real clock
			name := fmt.Sprintf("{t%d}:own", i)
			// A tenant bucket of p with a token bucket beside it, in one call.
			mix := []Bucket{{Key: name, Limit: p}, {Key: fmt.Sprintf("{t%d}:global", i), Limit: Limit{Rate: 1000, Burst: 100}}}
			var rs []*Reservation
			for range 4 {
				r, err := lim.ReserveAll(ctx, mix, time.Hour)
				require.NoError(t, err, "%T", p)
				rs = append(rs, r)
			}
			// The second booking goes back under two later ones: a hole
			// (its keys in the bucket's slot), which the next caller takes.
			require.NoError(t, rs[1].Cancel(ctx), "%T", p)
			r, err := lim.ReserveAll(ctx, mix, time.Hour)
			require.NoError(t, err, "%T", p)
			assert.Less(t, r.Time(), rs[2].Time(), "%T: the cancelled turn, before the later bookings", p)

			_, err = lim.Cooldown(ctx, name, p, time.Minute)
			require.NoError(t, err, "%T", p)
			left, err := lim.CooldownLeft(ctx, name)
			require.NoError(t, err, "%T", p)
			assert.Greater(t, left, 59*time.Second, "%T", p)
			res, err := lim.TryAcquire(ctx, name, p, 1)
			require.NoError(t, err, "%T", p)
			assert.False(t, res.Allowed, "%T: cooling down", p)
			assert.Greater(t, res.RetryAfter, 59*time.Second, "%T", p)
			require.NoError(t, lim.Reset(ctx, name, p), "%T", p)
		}
	})

	t.Run("hash-tagged buckets are taken together", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		ctx := context.Background()
		tenant := func(i int) Bucket {
			return Bucket{Key: "{acct}:tenant:" + strconv.Itoa(i), Limit: Limit{Rate: 1, Period: time.Minute, Burst: 2}}
		}
		global := Bucket{Key: "{acct}:global", Limit: Limit{Rate: 1, Period: time.Minute, Burst: 3}}
		assert.Same(t, c.Master(t, prefix+tenant(1).Key), c.Master(t, prefix+global.Key), "one slot, one master")

		for i := range 2 {
			require.NoError(t, lim.AcquireAll(ctx, []Bucket{tenant(1), global}), "AcquireAll %d", i)
		}
		res, err := lim.TryAcquireAll(ctx, []Bucket{tenant(1), global})
		require.NoError(t, err)
		assert.False(t, res.Allowed, "tenant 1 is empty")
		assert.Equal(t, 0, res.Remaining)

		// Nothing was taken from the global bucket by the refusal: its last token is there.
		res, err = lim.TryAcquire(ctx, global.Key, global.Limit, 1)
		require.NoError(t, err)
		assert.True(t, res.Allowed, "the refused call left the global bucket alone")

		// Now the global bucket is empty: tenant 2 gets nothing, and keeps its burst.
		res, err = lim.TryAcquireAll(ctx, []Bucket{tenant(2), global})
		require.NoError(t, err)
		assert.False(t, res.Allowed, "global is empty")
		res, err = lim.TryAcquire(ctx, tenant(2).Key, tenant(2).Limit, 2)
		require.NoError(t, err)
		assert.True(t, res.Allowed, "the refused call left tenant 2 full")

		// A cancelled multi-bucket reservation gives back to both.
		fast := []Bucket{
			{Key: "{job}:a", Limit: Limit{Rate: 10, Burst: 1}},
			{Key: "{job}:b", Limit: Limit{Rate: 10, Burst: 1}},
		}
		require.NoError(t, lim.AcquireAll(ctx, fast))
		r, err := lim.ReserveAll(ctx, fast, time.Second)
		require.NoError(t, err)
		assert.Greater(t, r.Delay(), time.Duration(0))
		require.NoError(t, r.Cancel(ctx))
		r2, err := lim.ReserveAll(ctx, fast, time.Second)
		require.NoError(t, err)
		assert.InDelta(t, r.Delay(), r2.Delay(), float64(20*time.Millisecond), "the next caller takes the cancelled slot")
	})

	t.Run("buckets in different slots", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		counting := c.Client(t)
		var calls atomic.Int64
		counting.AddHook(countHook{&calls})
		lim := NewLimiter(NewRedisStore(counting), WithKeyPrefix(prefix))
		ctx := context.Background()
		l := Limit{Rate: 10, Burst: 5}
		apart := []Bucket{{Key: "tenant:1", Limit: l}, {Key: "global", Limit: l}}

		assert.ErrorIs(t, lim.AcquireAll(ctx, apart), ErrCrossSlot)
		_, err := lim.TryAcquireAll(ctx, apart)
		assert.ErrorIs(t, err, ErrCrossSlot)
		_, err = lim.ReserveAll(ctx, apart, time.Second)
		assert.ErrorIs(t, err, ErrCrossSlot)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, int64(0), calls.Load(), "refused before any round trip")

		// The limiter never sends such a call, but the store maps the server's
		// refusal the same way: a request built past the limiter's check.
		store := NewRedisStore(counting)
		req := request{prefix: prefix, one: apart[0], more: apart[1:], maxWait: -1}
		require.NotEqual(t,
			counting.ClusterKeySlot(ctx, redisKey(prefix, apart[0].Key)).Val(),
			counting.ClusterKeySlot(ctx, redisKey(prefix, apart[1].Key)).Val(), "the keys are in different slots")
		before := calls.Load()
		_, err = store.reserve(ctx, req)
		require.Error(t, err)
		assert.Equal(t, before+1, calls.Load(), "this one went to Redis")
		assert.ErrorIs(t, err, ErrCrossSlot, "Redis's CROSSSLOT: %v", err)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.NotErrorIs(t, err, ErrUnavailable)
		t.Logf("server-side: %v", err)
		for _, b := range apart {
			n, err := rdb.Exists(ctx, redisKey(prefix, b.Key)).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "%s: nothing written", b.Key)
		}
	})

	// Figures only: on a small machine the client and all six servers share
	// the CPUs, and more masters need not mean more calls per second.
	t.Run("throughput on one key and over three masters", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		l := Limit{Rate: 1e6, Burst: 1e6} // never denies: every call is one script run
		names := make([]string, 300)
		masters := make(map[string]int)
		for i := range names {
			names[i] = "tp" + strconv.Itoa(i)
			masters[c.Master(t, redisKey(prefix, names[i])).Addr()]++
		}
		require.Len(t, masters, 3, "300 buckets over all three masters: %v", masters)

		one := measure(t, lim, l, names[:1])
		many := measure(t, lim, l, names)
		t.Logf("TryAcquire, 32 goroutines, 1 s, %d CPUs: 1 key %.0f ops/s; 300 keys over 3 masters %.0f ops/s (%.2fx); keys per master %v",
			runtime.NumCPU(), one, many, many/one, masters)
	})

	t.Run("script cache flushed on every node", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		ctx := context.Background()
		l := Limit{Rate: 10, Burst: 2}
		for round := range 2 {
			for _, node := range c.Nodes() {
				require.NoError(t, node.Client(t).ScriptFlush(ctx).Err(), "round %d: %s", round, node.Addr())
			}
			for i := range 20 {
				name := "sf" + strconv.Itoa(i)
				_, err := lim.TryAcquire(ctx, name, l, 1)
				require.NoError(t, err, "round %d: TryAcquire %s after SCRIPT FLUSH", round, name)
			}
			_, err := lim.Cooldown(ctx, "sf-cool", l, time.Millisecond)
			require.NoError(t, err, "round %d: Cooldown after SCRIPT FLUSH", round)
			r, err := lim.Reserve(ctx, "sf0", l, 2, time.Second)
			require.NoError(t, err, "round %d: Reserve", round)
			require.NoError(t, r.Cancel(ctx), "round %d: Cancel (refund script) after SCRIPT FLUSH", round)
		}
		// EVAL put the script back on each master that served a bucket (a
		// Limit's reserve is lua/reserve_tat.lua).
		for i := range 20 {
			m := c.Master(t, redisKey(prefix, "sf"+strconv.Itoa(i)))
			ok, err := m.Client(t).ScriptExists(ctx, reserveTBScript.Hash()).Result()
			require.NoError(t, err)
			assert.Equal(t, []bool{true}, ok, "%s has the script again", m.Addr())
		}
	})

	t.Run("a least-privilege user", func(t *testing.T) {
		ctx := context.Background()
		// ACLs are per node: set the user on every one. A cluster client also
		// asks for the slot map (CLUSTER SLOTS, needed) and once for the command
		// table (COMMAND: go-redis ignores a refusal, but ACL LOG records it).
		rules := append(append([]any{"ACL", "SETUSER", "sluice-cluster"}, anys(limiterACL)...), "+cluster|slots", "+command")
		for _, node := range c.Nodes() {
			require.NoError(t, node.Client(t).Do(ctx, rules...).Err(), node.Addr())
		}
		user := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs(), Username: "sluice-cluster", Password: "secret", ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = user.Close() })
		lim := NewLimiter(NewRedisStore(user), WithKeyPrefix(DefaultKeyPrefix+redistest.Prefix(t)))
		l := Limit{Rate: 10, Burst: 2}
		for i := range 20 {
			_, err := lim.TryAcquire(ctx, "acl"+strconv.Itoa(i), l, 1)
			require.NoError(t, err, "bucket %d", i)
		}
		require.NoError(t, lim.AcquireAll(ctx, []Bucket{{Key: "{a}:x", Limit: l}, {Key: "{a}:y", Limit: l}}))
		for _, node := range c.Nodes() {
			log, err := node.Client(t).Do(ctx, "ACL", "LOG").Slice()
			require.NoError(t, err)
			assert.Empty(t, log, "%s denied nothing", node.Addr())
		}
	})

	// Last: it kills a master.
	t.Run("failover", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		ctx := context.Background()
		// go-redis learns a failover from a MOVED reply or by reloading its slot
		// map, every 60 s by default, and a dead master sends no MOVED: the
		// store asks for a reload on every network error. A client with
		// go-redis's default options must therefore recover by itself.
		lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
		l := Limit{Rate: 1000, Burst: 1000}
		const name = "fo"
		old := c.Master(t, redisKey(prefix, name))
		other := "fo-other" // a bucket on another master, to see what else stops
		for i := 0; c.Master(t, redisKey(prefix, other)) == old; i++ {
			other = "fo-other" + strconv.Itoa(i)
		}
		_, err := lim.TryAcquire(ctx, name, l, 1)
		require.NoError(t, err)

		old.Kill(t)
		killed := time.Now()
		var down, otherDown int
		var lastErr, otherErrs error
		deadline := killed.Add(20 * time.Second)
		for {
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			start := time.Now()
			_, err := lim.TryAcquire(cctx, name, l, 1)
			elapsed := time.Since(start)
			cancel()
			octx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, otherErr := lim.TryAcquire(octx, other, l, 1)
			cancel()
			if otherErr != nil {
				otherDown++
				require.ErrorIs(t, otherErr, ErrUnavailable, "another master's bucket")
				if otherErrs == nil || otherErr.Error() != otherErrs.Error() {
					otherErrs = otherErr
					t.Logf("%v after the kill, a bucket on another master: %v", time.Since(killed).Round(10*time.Millisecond), otherErr)
				}
			}
			if err == nil {
				break
			}
			down++
			lastErr = err
			require.ErrorIs(t, err, ErrUnavailable, "while the master is down: a store error")
			require.Less(t, elapsed, time.Second, "a call never outlives its ctx by much")
			if time.Now().After(deadline) {
				t.Fatalf("no failover within %v of killing %s; last error: %v\n%s", deadline.Sub(killed), old.Addr(), err, clusterNodes(c))
			}
			time.Sleep(50 * time.Millisecond)
		}
		recovered := time.Since(killed)
		t.Logf("killed master %s: %d calls failed (last: %v), served again after %v; a bucket on another master failed %d times meanwhile",
			old.Addr(), down, lastErr, recovered.Round(10*time.Millisecond), otherDown)
		assert.Positive(t, down, "calls failed while no node served the slot")

		promoted := c.Master(t, redisKey(prefix, name))
		assert.NotSame(t, old, promoted, "the replica took over")
		for i := range 10 {
			_, err = lim.TryAcquire(ctx, name, l, 1)
			require.NoError(t, err, "call %d after failover", i)
		}
		require.NoError(t, lim.Acquire(ctx, name, l, 1))
	})
}

// measure runs TryAcquire from 32 goroutines for about a second, spread over
// names, and returns calls per second.
func measure(t *testing.T, lim *Limiter, l Limit, names []string) float64 {
	t.Helper()
	const workers = 32
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var ops, errs atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i += workers {
				_, err := lim.TryAcquire(ctx, names[i%len(names)], l, 1)
				switch {
				case err == nil:
					ops.Add(1)
				case ctx.Err() == nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, errs.Load(), "errors, the first: %v", firstErr.Load())
	return float64(ops.Load()) / elapsed.Seconds()
}

// countHook counts the commands a client sends.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

var _ redis.Hook = countHook{}

func anys(s []string) []any {
	a := make([]any, len(s))
	for i, x := range s {
		a[i] = x
	}
	return a
}

// clusterNodes returns CLUSTER NODES as the first node to answer sees it, for a failure message.
func clusterNodes(c *redistest.Cluster) string {
	for _, node := range c.Nodes() {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		out, err := rdb.ClusterNodes(ctx).Result()
		cancel()
		_ = rdb.Close()
		if err == nil {
			return "--- CLUSTER NODES from " + node.Addr() + " ---\n" + out
		}
	}
	return "(no node answered CLUSTER NODES)"
}
