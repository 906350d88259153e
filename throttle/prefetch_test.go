package throttle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// prefetchLimiter is a Limiter with WithPrefetch(n) over the shared
// redis-server on clock, its script calls counted, prefetched grants fresh
// for an hour unless the test says otherwise.
func prefetchLimiter(t *testing.T, clock clock, n int) (*Limiter, *gate) {
	rdb := redistest.Shared(t).Client(t)
	g := newGate()
	rdb.AddHook(g)
	l := NewLimiter(NewRedisStore(rdb, WithClock(clock)), WithKeyPrefix(redistest.Prefix(t)), WithPrefetch(n))
	prefetcherOf(l).fresh = freshFor(time.Hour)
	// Load the scripts, so that each call below is one EVALSHA.
	warm := Limit{Rate: 1, Burst: 1}
	_, err := l.TryAcquire(context.Background(), "warm", warm, 1)
	require.NoError(t, err)
	_, err = l.Peek(context.Background(), "warm", warm)
	require.NoError(t, err)
	for _, s := range bucketScripts[scriptGiveBack] {
		require.NoError(t, s.Load(context.Background(), rdb).Err())
	}
	g.scripts.Store(0)
	return l, g
}

// A shape's first call books only its own grant; a call that comes within
// the freshness of the last booking books extras after its own; the calls
// that follow take them without a round trip; the next booking asks for
// twice the demand plus one, at most n; stale extras of the latest booking
// are given back, and a call after a stale booking books no extra.
func TestPrefetchBooksAndServes(t *testing.T) {
	lim, g := prefetchLimiter(t, newFakeClock(), 8)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 100}
	try := func() {
		t.Helper()
		res, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	left := func() int {
		t.Helper()
		st, err := lim.Peek(ctx, "k", l)
		require.NoError(t, err)
		g.scripts.Add(-1) // Peek's own call
		return st.Remaining
	}

	try() // no demand known: its own grant alone
	assert.Equal(t, int64(1), g.scripts.Load())
	assert.Equal(t, 99, left())
	try() // within the freshness of the last booking: its own and one extra
	assert.Equal(t, int64(2), g.scripts.Load())
	assert.Equal(t, 97, left())
	try() // the extra
	assert.Equal(t, int64(2), g.scripts.Load(), "taken without a round trip")
	try() // a booking of 1 + 3 (one taken: 2·1+1)
	assert.Equal(t, int64(3), g.scripts.Load())
	assert.Equal(t, 93, left())
	for range 3 {
		try()
	}
	assert.Equal(t, int64(3), g.scripts.Load())
	try() // 1 + 7 (2·3+1)
	assert.Equal(t, 85, left())
	try()
	prefetcherOf(lim).fresh = freshFor(0) // the six extras left go stale, and so does the booking
	try()                                 // the stale ones given back first (their timer is an hour off); its own grant alone
	assert.Equal(t, int64(6), g.scripts.Load(), "the give-back and its own booking")
	assert.Equal(t, 90, left(), "the six stale extras, still the bucket's latest, given back")
	try() // calls sparser than the freshness book nothing extra
	assert.Equal(t, 89, left())
}

// A booking takes no extra that would leave the bucket below half of its
// burst: near its limit the bucket is booked one call at a time, as
// without prefetch.
func TestPrefetchKeepsHalfTheBurst(t *testing.T) {
	lim, g := prefetchLimiter(t, newFakeClock(), 8)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 10}
	step := func(calls int64, left int) {
		t.Helper()
		res, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		assert.Equal(t, calls, g.scripts.Load(), "script calls")
		st, err := lim.Peek(ctx, "k", l)
		require.NoError(t, err)
		g.scripts.Add(-1) // Peek's own
		assert.Equal(t, left, st.Remaining)
	}
	step(1, 9) // its own grant alone
	step(2, 7) // its own and one extra (2·0+1; 9 left, 4 above half)
	step(2, 7) // the extra
	step(3, 4) // its own and two (2·1+1 = 3, but 7 left is 2 above half)
	step(3, 4)
	step(3, 4)
	step(4, 3) // 4 left: at half, nothing extra (it would have booked its own and 3)
	step(5, 2) // and so on, one call at a time
}

// Extras nobody takes are given back when their freshness ends (their
// timer), while they are still the bucket's latest bookings; once another
// process's booking stands on them they stay spent, and nothing is given
// back twice.
func TestPrefetchGivesBackUnused(t *testing.T) {
	clock := newFakeClock()
	lim, g := prefetchLimiter(t, clock, 8)
	other := NewLimiter(NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)), WithKeyPrefix(lim.cfg.prefix))
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 100}
	left := func() int {
		t.Helper()
		st, err := other.Peek(ctx, "k", l)
		require.NoError(t, err)
		return st.Remaining
	}
	given := func() int {
		prefetcherOf(lim).mu.Lock()
		defer prefetcherOf(lim).mu.Unlock()
		return prefetcherOf(lim).given
	}
	expired := func() int {
		prefetcherOf(lim).mu.Lock()
		defer prefetcherOf(lim).mu.Unlock()
		return prefetcherOf(lim).expired
	}
	prefetcherOf(lim).fresh = freshFor(50 * time.Millisecond)
	for range 2 { // the second books one extra
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
	}
	assert.Equal(t, 97, left())
	require.Eventually(t, func() bool { return given() == 1 }, 5*time.Second, 5*time.Millisecond, "the unused extra given back")
	assert.Equal(t, 98, left())
	assert.Equal(t, int64(3), g.scripts.Load(), "two bookings and one give-back")

	for range 2 { // a stale last booking: the first books alone, the second one extra
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
	}
	assert.Equal(t, 95, left())
	_, err := other.TryAcquire(ctx, "k", l, 1) // another process books after the extra
	require.NoError(t, err)
	assert.Equal(t, 94, left())
	require.Eventually(t, func() bool { return expired() == 2 }, 5*time.Second, 5*time.Millisecond, "the extra's timer ran")
	assert.Equal(t, 1, given(), "an extra another booking stands on is not given back")
	assert.Equal(t, 94, left(), "it stays spent")
}

// Shapes whose last booking went stale are swept out of the Limiter once
// the map has doubled, so a process that touches many keys keeps none idle.
func TestPrefetchSweepsIdleShapes(t *testing.T) {
	lim, _ := prefetchLimiter(t, newFakeClock(), 8)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 10}
	prefetcherOf(lim).fresh = freshFor(0)
	for i := range 200 {
		_, err := lim.TryAcquire(ctx, fmt.Sprint("tenant:", i), l, 1)
		require.NoError(t, err)
	}
	prefetcherOf(lim).mu.Lock()
	defer prefetcherOf(lim).mu.Unlock()
	assert.Less(t, len(prefetcherOf(lim).stashes), 64, "swept")
}

// Under prefetch, many concurrent callers on a bucket of 50 get exactly 50
// grants between them: extras are grants the bucket made, never more.
func TestPrefetchNeverGrantsMore(t *testing.T) {
	lim, _ := prefetchLimiter(t, newFakeClock(), 16)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 50}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				res, err := lim.TryAcquire(ctx, "k", l, 1)
				assert.NoError(t, err)
				if res.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(50), allowed.Load(), "exactly the burst")
	st, err := lim.Peek(ctx, "k", l)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Remaining)
}

// A bucket that cannot grant at once books no extra: a waiting call goes to
// the store alone, its grant at its own slot.
func TestPrefetchNothingUnderContention(t *testing.T) {
	lim, g := prefetchLimiter(t, newFakeClock(), 8)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Hour, Burst: 1}
	r, err := lim.Reserve(ctx, "k", l, 1, -1)
	require.NoError(t, err)
	assert.Equal(t, int64(0), r.d.wait)
	r, err = lim.Reserve(ctx, "k", l, 1, 3*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, int64(3600e6), r.d.wait, "the next turn, an hour on: no extra took it")
	assert.Equal(t, int64(2), g.scripts.Load())
}

// A give-back never lets the fleet have more than the policy allows, and
// gives back what an unused extra took on every policy: another process
// then gets exactly what the two calls served left. (The sliding log's
// rollback puts a stand-in at t − Window for the latest entry, out of every
// window that can still matter, so it gives back too. A bucket of 10⁹ a
// second refills what an extra took within nanoseconds, so its extras are not given back:
// TestPrefetchNoGiveBackWhenRefilled.)
func TestPrefetchGiveBackEveryPolicy(t *testing.T) {
	for _, p := range []Policy{
		Limit{Rate: 1, Period: time.Hour, Burst: 20},
		FixedWindow{Max: 20, Window: time.Hour},
		SlidingWindow{Max: 20, Window: time.Hour, Slots: 4},
		SlidingLog{Max: 20, Window: time.Hour},
	} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			clock := newFakeClock()
			lim, _ := prefetchLimiter(t, clock, 8)
			other := NewLimiter(NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)), WithKeyPrefix(lim.cfg.prefix))
			ctx := context.Background()
			prefetcherOf(lim).fresh = freshFor(20 * time.Millisecond)
			for range 2 { // the second books one extra
				res, err := lim.TryAcquire(ctx, "k", p, 1)
				require.NoError(t, err)
				require.True(t, res.Allowed)
			}
			require.Eventually(t, func() bool {
				prefetcherOf(lim).mu.Lock()
				defer prefetcherOf(lim).mu.Unlock()
				return prefetcherOf(lim).given == 1
			}, 5*time.Second, 5*time.Millisecond, "the unused extra given back")
			rest := 0
			for range 30 {
				res, err := other.TryAcquire(ctx, "k", p, 1)
				require.NoError(t, err)
				if res.Allowed {
					rest++
				}
			}
			assert.Equal(t, 18, rest, "20 less the two grants served")
		})
	}
}

// Extras of a bucket that has refilled what they took by the time they go
// stale (its reset, as of their booking, has passed) are not given back:
// nothing would come of the call. Here a limit of a million a second.
func TestPrefetchNoGiveBackWhenRefilled(t *testing.T) {
	lim, g := prefetchLimiter(t, newFakeClock(), 8)
	ctx := context.Background()
	l := Limit{Rate: 1e6, Burst: 100}
	prefetcherOf(lim).fresh = freshFor(20 * time.Millisecond)
	for range 2 { // the second books one extra; the bucket is full again 2 µs later
		_, err := lim.TryAcquire(ctx, "k", l, 1)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		prefetcherOf(lim).mu.Lock()
		defer prefetcherOf(lim).mu.Unlock()
		return prefetcherOf(lim).expired == 1
	}, 5*time.Second, 5*time.Millisecond, "the extra's timer ran")
	prefetcherOf(lim).mu.Lock()
	given := prefetcherOf(lim).given
	prefetcherOf(lim).mu.Unlock()
	assert.Equal(t, 0, given)
	assert.Equal(t, int64(2), g.scripts.Load(), "two bookings, no give-back")
}

// freshFor is a prefetcher's freshness fixed at d, whatever the bucket.
func freshFor(d time.Duration) func(Bucket) time.Duration {
	return func(Bucket) time.Duration { return d }
}

// A prefetched grant stays fresh for a 64th of the time its bucket takes to
// give back all it grants at once, from a millisecond to 20 ms.
func TestPrefetchFreshness(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want time.Duration
	}{
		{Limit{Rate: 1000, Burst: 20}, time.Millisecond},                       // 20 ms to refill: floor
		{Limit{Rate: 1000, Burst: 640}, 10 * time.Millisecond},                 // 640 ms
		{Limit{Rate: 1e6, Burst: 1 << 20}, 16384 * time.Microsecond},           // 1.048576 s
		{Limit{Rate: 10, Burst: 10}, 15625 * time.Microsecond},                 // 1 s
		{Limit{Rate: 1, Period: time.Minute, Burst: 5}, 20 * time.Millisecond}, // 5 min: ceiling
		{LeakyBucket{Rate: 100, Capacity: 128}, 20 * time.Millisecond},
		{FixedWindow{Max: 100, Window: 640 * time.Millisecond}, 10 * time.Millisecond},
		{SlidingWindow{Max: 100, Window: time.Second}, 15625 * time.Microsecond},
		{SlidingLog{Max: 100, Window: 32 * time.Millisecond}, time.Millisecond},
	} {
		assert.Equal(t, c.want, freshness(Bucket{Key: "k", Limit: c.p}), "%v", c.p)
	}
}

// prefetcherOf is l's prefetch layer, or nil if stack gave it none.
func prefetcherOf(l *Limiter) *prefetcher {
	p, _ := l.seam.(*prefetcher)
	return p
}
