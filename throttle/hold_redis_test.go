package throttle

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The semaphore's key keeps its name's hash tag and always has a TTL: the
// time until its last lease ends.
func TestHoldRedisKeyAndTTL(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(prefix))
	ctx := context.Background()
	c := Concurrency{Max: 2, Lease: 10 * time.Second}

	l, err := lim.Hold(ctx, "{acct}:exports", c)
	require.NoError(t, err)
	key := prefix + "{acct}:exports:sem"
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 9*time.Second+ttlSlack)
	assert.LessOrEqual(t, ttl, 10*time.Second+ttlSlack)
	assert.Equal(t, "acct", hashTag(key), "the name's hash tag is kept")

	l2, err := lim.Hold(ctx, "plain", Concurrency{Max: 1, Lease: time.Second})
	require.NoError(t, err)
	ttl, err = rdb.PTTL(ctx, prefix+"{plain}:sem").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, time.Second+ttlSlack)

	require.NoError(t, l.Release(ctx))
	require.NoError(t, l2.Release(ctx))
	n, err := rdb.Exists(ctx, key, prefix+"{plain}:sem").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "an empty semaphore leaves no key")
}

// Many goroutines Hold and Release one key in a loop: at no moment are more
// than Max of them holding it, every one is served, and the slots are busy
// most of the time.
func TestHoldRedisNeverOverMax(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	const workers, slots = 32, 4
	const work = 5 * time.Millisecond
	c := Concurrency{Max: slots, Lease: 5 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var inFlight, peak, busy atomic.Int64
	grants := make([]int, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := lim.Hold(ctx, "k", c)
				if err != nil {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					return
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				t0 := time.Now()
				time.Sleep(work)
				busy.Add(int64(time.Since(t0)))
				inFlight.Add(-1)
				assert.NoError(t, l.Release(context.Background()))
				grants[w]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	assert.LessOrEqual(t, peak.Load(), int64(slots), "holders at once")
	util := float64(busy.Load()) / float64(slots*elapsed)
	total := 0
	for w, n := range grants {
		total += n
		assert.Positive(t, n, "worker %d was never served", w)
	}
	t.Logf("%d workers, Max %d, %v of work per hold: %d grants in %v, peak %d holders, utilisation %.0f%%, grants per worker %d..%d",
		workers, slots, work, total, elapsed.Round(time.Millisecond), peak.Load(), 100*util, slices.Min(grants), slices.Max(grants))
	assert.Greater(t, util, 0.5, "the slots are busy most of the time")
}

// A Hold blocked on a full semaphore gets the slot within a few
// milliseconds of a Release in another goroutine.
func TestHoldRedisWakeLatency(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: time.Minute}

	const rounds = 50
	lat := make([]time.Duration, 0, rounds)
	for i := range rounds {
		held, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		type grant struct {
			at time.Time
			l  *Lease
		}
		got := make(chan grant, 1)
		go func() {
			l, err := lim.Hold(ctx, "k", c)
			assert.NoError(t, err)
			got <- grant{time.Now(), l}
		}()
		waitWaiters(t, store, lim, "k", 1)
		start := time.Now()
		require.NoError(t, held.Release(ctx))
		select {
		case g := <-got:
			require.NotNil(t, g.l)
			lat = append(lat, g.at.Sub(start))
			require.NoError(t, g.l.Release(ctx))
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter was not woken", i)
		}
	}
	slices.Sort(lat)
	p50, p90, top := lat[rounds/2], lat[rounds*9/10], lat[rounds-1]
	t.Logf("wake latency, Release called to waiting Hold returned, over %d rounds: p50 %v, p90 %v, max %v", rounds, p50, p90, top)
	assert.Less(t, p50, 200*time.Millisecond, "a waiter wakes within a few ms of a release")
}

// Each grant costs about one hold script: a blocked Hold asks again only
// when a release wakes it, and a Hold that finds others of its process
// waiting queues behind them without asking.
func TestHoldRedisRoundTripsPerGrant(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	var calls atomic.Int64
	counts := &scriptCounts{}
	rdb.AddHook(countHook{&calls})
	rdb.AddHook(counts)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	const workers, slots, each = 16, 2, 40
	c := Concurrency{Max: slots, Lease: 10 * time.Second}

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				l, err := lim.Hold(context.Background(), "k", c)
				if !assert.NoError(t, err) {
					return
				}
				time.Sleep(time.Millisecond)
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
	grants := workers * each
	holds, releases, renews := counts.get(holdScript), counts.get(releaseScript), counts.get(renewScript)
	t.Logf("%d workers, Max %d, %d grants: %.2f hold scripts per grant, %.2f commands per grant in all (%d holds, %d releases, %d renewals, %d total)",
		workers, slots, grants, float64(holds)/float64(grants), float64(calls.Load())/float64(grants), holds, releases, renews, calls.Load())
	assert.Equal(t, int64(grants), releases)
	assert.Less(t, float64(holds)/float64(grants), 2.0, "about one hold script per grant")
}

// scriptCounts counts the script calls a client sends, by script.
type scriptCounts struct {
	mu sync.Mutex
	n  map[string]int64 // by SHA
}

func (s *scriptCounts) get(sc *redis.Script) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[sc.Hash()]
}

func (s *scriptCounts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptCounts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if name := fmt.Sprint(args[0]); (name == "evalsha" || name == "eval") && len(args) > 1 {
			sha := fmt.Sprint(args[1])
			if name == "eval" {
				sha = redis.NewScript(sha).Hash()
			}
			if name == "evalsha" && redis.HasErrorPrefix(err, "NOSCRIPT") {
				return err // the EVAL that follows counts
			}
			s.mu.Lock()
			if s.n == nil {
				s.n = make(map[string]int64)
			}
			s.n[sha]++
			s.mu.Unlock()
		}
		return err
	}
}

func (s *scriptCounts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A Hold waiting through a Redis restart hears releases again once the
// store's subscription is back: the resubscription makes it ask again.
func TestHoldRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store)
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: time.Minute}

	held, err := lim.Hold(ctx, "k", c)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := lim.Hold(ctx, "k", c)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitWaiters(t, store, lim, "k", 1)

	// The restarted server is empty: the slot is free, and no release will
	// say so. The waiter learns it from its subscription's return.
	srv.Restart(t)
	select {
	case err := <-got:
		assert.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter did not ask again after the subscription came back")
	}
	_ = held.Release(ctx)
}

// On a Redis Cluster the semaphore lives in its name's slot, and a release
// on one master wakes a Hold whose subscription is on any node.
func TestHoldRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := redistest.StartCluster(t, 3, 0)
	rdb := cl.Client(t)
	prefix := redistest.Prefix(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(prefix))
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: time.Minute}

	for i := range 6 {
		name := fmt.Sprintf("{acct%d}:jobs", i)
		held, err := lim.Hold(ctx, name, c)
		require.NoError(t, err, name)
		key := prefix + name + ":sem"
		n, err := cl.Master(t, key).Client(t).Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "%s is on its slot's master", key)

		got := make(chan error, 1)
		go func() {
			l, err := lim.Hold(ctx, name, c)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		waitWaiters(t, store, lim, name, 1)
		start := time.Now()
		require.NoError(t, held.Release(ctx))
		select {
		case err := <-got:
			assert.NoError(t, err, name)
			t.Logf("%s: woken %v after the release", name, time.Since(start).Round(time.Microsecond))
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the waiter was not woken", name)
		}
	}
}

// A Hold whose server stalls just as it begins to wait (a partition, a
// server hung) returns when its ctx ends: it does not wait for the
// subscription it needs, which cannot be made until the server is back.
func TestHoldRedisStallBoundedByCtx(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var stall atomic.Bool
	rdb.AddHook(afterScript{func() {
		if stall.CompareAndSwap(true, false) {
			srv.Pause(t)
		}
	}})
	store := NewRedisStore(rdb)
	lim := NewLimiter(store)
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: time.Minute}
	held, err := lim.Hold(ctx, "k", c)
	require.NoError(t, err)

	stall.Store(true) // after the next script: the Hold's denied ask
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = lim.Hold(cctx, "k", c)
	took := time.Since(start)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, subTimeout, "Hold returned %v after its ctx ended", took-200*time.Millisecond)

	srv.Resume(t)
	require.NoError(t, held.Release(ctx))
	require.NoError(t, store.Close())
}

// afterScript is a hook that calls f after each script call a client makes.
type afterScript struct{ f func() }

func (h afterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := fmt.Sprint(cmd.Args()[0]); name == "evalsha" || name == "eval" {
			h.f()
		}
		return err
	}
}

func (h afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
