package throttle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/redistest"
)

// Faults between the limiter and Redis: every call must return by its
// deadline, with an error and never a grant, and leave no goroutine behind.

// slack is how far past its deadline a call may return: scheduling, not I/O.
// Generous, so a loaded machine does not fail the test; a call bounded only by
// go-redis's own 3 s read timeout would still be caught.
const slack = 500 * time.Millisecond

func TestFaultLatencyAndBlackHoleHonourDeadlines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })

	srv := redistest.Start(t)
	proxy := faultproxy.Start(t, srv.Addr())
	// Built as a user must build it: go-redis defaults, with ContextTimeoutEnabled.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	store := NewRedisStore(rdb)
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
	t.Cleanup(func() {
		store.Close()
		rdb.Close()
		proxy.Close()
	})
	l := Limit{Rate: 1000, Burst: 1000}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	call := func(deadline time.Duration) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := lim.Acquire(cctx, "k", l, 1)
		return time.Since(start), err
	}

	proxy.SetLatency(150 * time.Millisecond) // 300 ms a round trip
	took, err := call(100 * time.Millisecond)
	assert.ErrorIs(t, err, ErrUnavailable, "slower than the deadline: an error, not a grant")
	assert.Less(t, took, 100*time.Millisecond+slack)
	_, err = call(3 * time.Second)
	assert.NoError(t, err, "a deadline longer than the latency is served")
	proxy.SetLatency(0)

	proxy.BlackHole(true)
	for range 3 {
		took, err := call(150 * time.Millisecond)
		assert.ErrorIs(t, err, ErrUnavailable)
		assert.Less(t, took, 150*time.Millisecond+slack)
	}
	proxy.BlackHole(false)
	require.Eventually(t, func() bool {
		_, err := call(time.Second)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "works again once traffic flows")
}

func TestFaultScriptFlushUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)))
	l := Limit{Rate: 1e5, Burst: 1000}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := lim.TryAcquire(context.Background(), "k", l, 1)
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					t.Errorf("call failed during SCRIPT FLUSH: %v", err)
					return
				}
			}
		}()
	}
	flushes := 0
	for ctx.Err() == nil {
		require.NoError(t, rdb.ScriptFlush(context.Background()).Err())
		flushes++
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d calls, %d SCRIPT FLUSHes", calls.Load(), flushes)
	assert.Equal(t, int64(0), failures.Load())
	assert.Greater(t, flushes, 10)
}

// Acquire budgets its wait from the deadline before the round trip, and its
// slot comes after it: when latency pushes the slot past the deadline, it
// gives the tokens back and fails at once rather than sleeping just to fail.
func TestFaultAcquireChecksItsSlotAgainstTheDeadline(t *testing.T) {
	srv := redistest.Start(t)
	proxy := faultproxy.Start(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)))
	l := Limit{Rate: 1, Burst: 1}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	proxy.SetLatency(150 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 1050*time.Millisecond)
	defer cancel()
	err := lim.Acquire(cctx, "k", l, 1)
	assert.ErrorIs(t, err, ErrLimited)
	assert.NoError(t, cctx.Err(), "it slept towards the deadline instead of failing at once")
}
