package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

var (
	leaky3 = LeakyBucket{Rate: 10, Capacity: 3}                      // T = 100 ms
	leaky5 = LeakyBucket{Rate: 10, Period: time.Second, Capacity: 5} // T = 100 ms
)

func init() {
	conformance = append(conformance,
		confCase{"leaky bucket: one every T, a full bucket refused", []step{
			{at: 0, op: opTake, pol: leaky3, key: "k", n: 1, granted: true, remaining: 2, reset: 100000},
			{at: 0, op: opTake, pol: leaky3, key: "k", n: 1, granted: true, wait: 100000, remaining: 1, reset: 200000},
			{at: 0, op: opTake, pol: leaky3, key: "k", n: 1, granted: true, wait: 200000, remaining: 0, reset: 300000},
			// Full: back when one has leaked out (it then waits 200 ms)...
			{at: 0, op: opTake, pol: leaky3, key: "k", n: 1, granted: false, wait: 100000, remaining: 0, reset: 300000},
			// ... or, with no wait allowed, when it would be granted at once.
			{at: 0, op: opTry, pol: leaky3, key: "k", n: 1, granted: false, wait: 300000, remaining: 0, reset: 300000},
			{at: 50000, op: opTake, pol: leaky3, key: "k", n: 1, granted: false, wait: 50000, remaining: 0, reset: 250000},
			{at: 100000, op: opTake, pol: leaky3, key: "k", n: 1, granted: true, wait: 200000, remaining: 0, reset: 300000},
			{at: 400000, op: opTry, pol: leaky3, key: "k", n: 1, granted: true, remaining: 2, reset: 100000},
		}},
		confCase{"leaky bucket: n at once, within maxWait", []step{
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 2, granted: true, remaining: 3, reset: 200000},
			{at: 0, op: opTry, maxWait: 150000, pol: leaky5, key: "k", n: 1, granted: false, wait: 200000, remaining: 3, reset: 200000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 3, granted: true, wait: 200000, remaining: 0, reset: 500000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: false, wait: 100000, remaining: 0, reset: 500000},
			{at: 150000, op: opTry, maxWait: 400000, pol: leaky5, key: "k", n: 1, granted: true, wait: 350000, remaining: 0, reset: 450000},
			// Full, and the wait beyond the budget too: when it would be granted at once.
			{at: 150000, op: opTry, maxWait: 100000, pol: leaky5, key: "k", n: 2, granted: false, wait: 450000, remaining: 0, reset: 450000},
			{at: 150000, op: opTake, pol: leaky5, key: "k", n: 2, granted: false, wait: 150000, remaining: 0, reset: 450000},
		}},
		confCase{"leaky bucket: a cancelled turn goes to a later caller, rolled back or as a hole", []step{
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, remaining: 4, reset: 100000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 100000, remaining: 3, reset: 200000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 200000, remaining: 2, reset: 300000},
			{at: 10000, op: opCancel, ref: 2, refunded: true},
			{at: 10000, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 190000, remaining: 2, reset: 290000},
			{at: 20000, op: opCancel, ref: 1, refunded: true}, // the turn after it stands: a hole at 100 ms
			{at: 20000, op: opTry, pol: leaky5, key: "k", n: 1, granted: false, wait: 80000, remaining: 2, reset: 280000},
			{at: 30000, op: opCancel, ref: 2, refunded: false},
			{at: 300000, op: opCancel, ref: 4, refunded: false},
		}},
		confCase{"leaky bucket: a cancelled turn of two under a later one goes one at a time, never at once", []step{
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, remaining: 4, reset: 100000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 2, granted: true, wait: 100000, remaining: 2, reset: 300000},
			{at: 0, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 300000, remaining: 1, reset: 400000},
			// The turn of two from 100 to 300 ms is a hole: one token takes
			// 100 ms, and the next the turn after it, 200 ms; never both at
			// 100 ms, on top of each other.
			{at: 10000, op: opCancel, ref: 1, refunded: true},
			{at: 10000, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 90000, remaining: 1, reset: 390000},
			{at: 10000, op: opTake, pol: leaky5, key: "k", n: 1, granted: true, wait: 190000, remaining: 1, reset: 390000},
			{at: 10000, op: opTry, pol: leaky5, key: "k", n: 1, granted: false, wait: 390000, remaining: 1, reset: 390000},
		}},
	)
}

func TestLeakyBucketInvalidBeforeIO(t *testing.T) {
	ok := LeakyBucket{Rate: 10, Capacity: 5}
	cases := []struct {
		name string
		pol  LeakyBucket
		n    int
		is   error
	}{
		{"zero value", LeakyBucket{}, 1, ErrInvalid},
		{"zero rate", LeakyBucket{Capacity: 1}, 1, ErrInvalid},
		{"negative rate", LeakyBucket{Rate: -1, Capacity: 1}, 1, ErrInvalid},
		{"NaN rate", LeakyBucket{Rate: math.NaN(), Capacity: 1}, 1, ErrInvalid},
		{"infinite rate", LeakyBucket{Rate: math.Inf(1), Capacity: 1}, 1, ErrInvalid},
		{"negative period", LeakyBucket{Rate: 1, Period: -time.Second, Capacity: 1}, 1, ErrInvalid},
		{"zero capacity", LeakyBucket{Rate: 1}, 1, ErrInvalid},
		{"negative capacity", LeakyBucket{Rate: 1, Capacity: -2}, 1, ErrInvalid},
		{"huge capacity", LeakyBucket{Rate: 1e6, Capacity: maxBurst + 1}, 1, ErrInvalid},
		{"faster than a token per nanosecond", LeakyBucket{Rate: 2e9, Capacity: 1}, 1, ErrInvalid},
		{"slower than the state can span", LeakyBucket{Rate: 1, Period: 1000 * time.Hour, Capacity: 100000}, 1, ErrInvalid},
		{"too slow for an int64 of microseconds", LeakyBucket{Rate: 1e-20, Capacity: 1}, 1, ErrInvalid},
		{"zero n", ok, 0, ErrInvalid},
		{"negative n", ok, -1, ErrInvalid},
		{"n above capacity", ok, 6, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkBeforeIO(t, "k", c.pol, c.n, c.is) })
	}
	assert.NoError(t, ok.validate())
	assert.ErrorIs(t, ok.check(6), ErrTooLarge)
	assert.NotErrorIs(t, ok.check(0), ErrTooLarge)
}

func TestLeakyBucketQuotaAndShare(t *testing.T) {
	b := LeakyBucket{Rate: 3, Capacity: 6} // T = 333333.333334 µs, rounded up to a picosecond
	m, d := b.quota()
	assert.Equal(t, 6, m)
	assert.Equal(t, 2000001*time.Microsecond, d, "six T, rounded up to a µs")
	assert.Equal(t, "3/1s leaky bucket, capacity 6", b.String())
	assert.Equal(t, LeakyBucket{Rate: 1, Capacity: 2}, b.share(3))
	assert.Equal(t, LeakyBucket{Rate: 0.5, Capacity: 1}, b.share(6).(LeakyBucket).share(1))
}

// Every write leaves a TTL on the meter, and it vanishes once the bucket is empty.
func TestLeakyBucketRedisKey(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	prefix := redistest.Prefix(t)
	lim := NewLimiter(store, WithKeyPrefix(prefix))
	ctx := context.Background()
	pol := LeakyBucket{Rate: 20, Capacity: 4} // T = 50 ms
	key := stateKey(prefix, "k", pol)

	written := func(msg string) {
		t.Helper()
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err, msg)
		assert.Greater(t, ttl, time.Duration(0), msg+": PTTL")
		assert.LessOrEqual(t, ttl, 200*time.Millisecond+ttlSlack, msg+": PTTL")
	}
	var rs []*Reservation
	for i := range 4 {
		r, err := lim.Reserve(ctx, "k", pol, 1, time.Second)
		require.NoError(t, err)
		rs = append(rs, r)
		written(fmt.Sprintf("reservation %d", i))
	}
	_, err := lim.Reserve(ctx, "k", pol, 1, time.Second)
	var le *LimitedError
	require.ErrorAs(t, err, &le, "a full bucket")
	assert.Greater(t, le.RetryAfter, time.Duration(0))
	assert.LessOrEqual(t, le.RetryAfter, 50*time.Millisecond)
	require.NoError(t, rs[3].Cancel(ctx))
	written("refund")

	time.Sleep(250*time.Millisecond + ttlSlack)
	n, err := rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the meter outlived its queue")
}

// The acceptance load: 32 goroutines in Acquire on one leaky bucket, on a
// real redis-server. Grants are exactly T apart (the queue is never empty, and
// 32 waiters fit in Capacity 64: none is refused); nearly all of Rate is used;
// about one round trip per grant.
func TestPolicyLoadLeakyBucket(t *testing.T) {
	pol := LeakyBucket{Rate: 100, Period: time.Second, Capacity: 64}
	load := runPolicyLoad(t, pol, 2500*time.Millisecond)
	T := wholeT(t, pol.limit())
	lo, hi := gaps(load.slots)
	last := load.slots[len(load.slots)-1]
	used := float64(len(load.slots)) / float64((last-load.start)/T+1)
	t.Logf("%v: %d grants; gaps between grants from %d to %d µs (T = %d µs); %.2f%% of Rate used; %.3f round trips per grant",
		pol, len(load.slots), lo, hi, T, 100*used, load.roundTripsPerGrant())
	require.Equal(t, T, lo, "the closest grants")
	require.Equal(t, T, hi, "the farthest apart grants")
	require.GreaterOrEqual(t, used, 0.95)
	require.Less(t, load.roundTripsPerGrant(), 1.2)
}

// gaps is the least and greatest distance between consecutive sorted slots.
func gaps(slots []int64) (lo, hi int64) {
	lo = math.MaxInt64
	for i := 1; i < len(slots); i++ {
		g := slots[i] - slots[i-1]
		lo, hi = min(lo, g), max(hi, g)
	}
	return lo, hi
}

// More waiters than the bucket holds: 32 goroutines on Capacity 8. Those that
// do not fit are refused at once with a RetryAfter of at most T (enough leaks
// out within one turn), come back then, and the pace stays even; no grant
// ever waits more than (Capacity−1)·T, so the bucket never holds more than Capacity.
func TestLeakyBucketFullUnderLoad(t *testing.T) {
	const workers = 32
	pol := LeakyBucket{Rate: 100, Period: time.Second, Capacity: 8}
	T := wholeT(t, pol.limit())
	rdb := redistest.Shared(t).Client(t)
	var commands atomic.Int64
	rdb.AddHook(countHook{&commands})
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var (
		mu                 sync.Mutex
		slots              []int64
		start              int64 = -1
		longest            int64
		refused            int
		retryMin, retryMax time.Duration = math.MaxInt64, 0
		firstErr           error
		wg                 sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// No bound on the wait: every refusal is a full bucket's.
				r, err := lim.Reserve(ctx, "load", pol, 1, -1)
				var le *LimitedError
				switch {
				case errors.As(err, &le):
					mu.Lock()
					refused++
					retryMin, retryMax = min(retryMin, le.RetryAfter), max(retryMax, le.RetryAfter)
					mu.Unlock()
					select {
					case <-time.After(le.RetryAfter):
					case <-ctx.Done():
					}
					continue
				case err != nil:
					if ctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				if r.Wait(ctx) != nil {
					return
				}
				mu.Lock()
				slots = append(slots, r.d.slot())
				longest = max(longest, r.d.wait)
				if start < 0 || r.d.now < start {
					start = r.d.now
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, firstErr)
	require.NotEmpty(t, slots)
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	lo, hi := gaps(slots)
	last := slots[len(slots)-1]
	used := float64(len(slots)) / float64((last-start)/T+1)
	t.Logf("%v, %d waiters: %d grants, %d refusals (RetryAfter %v to %v); longest wait %d µs (bound %d); gaps %d to %d µs; %.2f%% of Rate used; %.2f round trips per grant",
		pol, workers, len(slots), refused, retryMin, retryMax, longest, int64(pol.Capacity-1)*T, lo, hi, 100*used, float64(commands.Load())/float64(len(slots)))
	require.Positive(t, refused, "refusals")
	assert.Positive(t, retryMin, "RetryAfter")
	assert.LessOrEqual(t, retryMax, micros(T), "RetryAfter")
	assert.LessOrEqual(t, longest, int64(pol.Capacity-1)*T, "the longest wait: the bucket held more than Capacity")
	assert.Equal(t, T, lo, "the closest grants")
	assert.GreaterOrEqual(t, used, 0.95)
}

// Random takes, cancels and pauses on every store in lockstep (see
// runRandom), with turns of a second or more: all give the same answers at
// every step, and leakyBucketRandom's invariants hold.
func TestLeakyBucketRandomAgreesAndHolds(t *testing.T) {
	pols := []LeakyBucket{{Rate: 1, Capacity: 1}, {Rate: 1, Capacity: 5}, {Rate: 3, Period: 10 * time.Second, Capacity: 4}, {Rate: 7, Period: time.Minute, Capacity: 9}}
	for seed := uint64(1); seed <= 24; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			leakyBucketRandom(t, p, seed, p.limit().pace().ceil()) // a busy bucket: many turns cancelled under later ones
		})
	}
}

// Random calls agree on the memory store, a real redis-server and miniredis,
// whose keys expire by their TTLs (see runRandom), down to turns of 1 µs;
// leakyBucketRandom's invariants hold.
func TestLeakyBucketRandomExpiry(t *testing.T) {
	pols := []LeakyBucket{{Rate: 1e6, Capacity: 3}, {Rate: 1000, Capacity: 2}, {Rate: 3, Capacity: 4}}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			leakyBucketRandom(t, p, seed, p.limit().pace().times(int64(p.Capacity)).ceil()) // pauses that often empty the bucket
		})
	}
}

// leakyBucketRandom is a random run under p, with pauses around unit µs (see
// runRandom): no grant waits longer than the bucket holds, (Capacity−n)·T; a
// refusal always has a RetryAfter; and the turns that stand (granted and not
// cancelled), each n·T long, never overlap: the pace is never faster than T.
// A slot is its turn's instant rounded up to a whole µs, so a wait w > 0
// means the bucket held more than (w − 1) µs; the instant of a turn is its
// handle, the TAT before it, or the earliest instant that rounds up to its
// slot if that is later (tatModule.commit).
func leakyBucketRandom(t *testing.T, p LeakyBucket, seed uint64, unit int64) {
	T, c := p.limit().pace(), int64(p.Capacity)
	stand := standing(runRandom(t, p, seed, unit, true, func(s lockstepStep) {
		switch {
		case s.req == nil:
		case s.d.granted:
			if s.d.wait > 0 {
				held := whole(s.d.wait - 1).add(T.times(int64(s.req.one.N)))
				require.True(t, held.less(T.times(c)), s.msg+" the bucket holds more than Capacity")
			}
		default:
			require.Positive(t, s.d.wait, s.msg+" RetryAfter")
		}
	}))
	require.NotEmpty(t, stand)
	instant := func(g *windowGrant) pico { return maxPico(g.d.handle, before1(g.d.slot())) }
	sort.SliceStable(stand, func(i, j int) bool { return instant(stand[i]).less(instant(stand[j])) })
	for i, g := range stand {
		require.Equal(t, g.d.slot(), instant(g).ceil(), "turn %d's slot is its instant rounded up", i)
		if i > 0 {
			prev := stand[i-1]
			end := instant(prev).add(T.times(int64(prev.req.one.N)))
			require.False(t, instant(g).less(end), "turn %d starts before turn %d has gone through", i, i-1)
		}
	}
}

// wholeT is l's T, which the test needs to be a whole number of µs.
func wholeT(t *testing.T, l Limit) int64 {
	t.Helper()
	T := l.pace()
	require.Zero(t, T.ps, "T of %v is not a whole number of µs", l)
	return T.us
}
