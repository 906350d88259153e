package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A token or leaky bucket keeps T and its TAT in µs and picoseconds (pico):
// one representation, exact at every rate from one a year to 10⁹ a second.
// These tests hold both stores to it at rates where a whole-µs T was far off
// (400 k/s, 990 k/s), at a rate that is no whole number of µs (7/s), at the
// fastest (10⁹/s), and check that holes, an Adaptive ceiling and bookings of
// hours work at 10⁸/s.

var (
	gigabit = Limit{Rate: 125e6, Burst: 125000}      // bytes: T = 8 ns, a burst of 1 ms
	perNano = Limit{Rate: 1e9, Burst: 1000}          // T = 1 ns, a burst of 1 µs
	fastLB  = LeakyBucket{Rate: 5e8, Capacity: 1000} // T = 2 ns, 2 µs of capacity
)

// Fast buckets in the conformance table: both stores give these exact answers.
func init() {
	conformance = append(conformance,
		confCase{"fast: a gigabit of bytes, packets after the burst", []step{
			{at: 0, op: opTry, buckets: b("k", gigabit, 125000), granted: true, remaining: 0, reset: 1000},
			// 1500 bytes at 8 ns each: 12 µs.
			{at: 0, op: opTry, buckets: b("k", gigabit, 1500), granted: false, wait: 12, remaining: 0, reset: 1000},
			{at: 12, op: opTry, buckets: b("k", gigabit, 1500), granted: true, remaining: 0, reset: 1000},
			// 1 µs refills 125 bytes: 124 whole ones after taking one.
			{at: 13, op: opTry, buckets: b("k", gigabit, 1), granted: true, remaining: 124, reset: 1000},
		}},
		confCase{"fast: 10⁹ a second, exactly a thousand every µs", []step{
			{at: 0, op: opTry, buckets: b("k", perNano, 1000), granted: true, remaining: 0, reset: 1},
			{at: 0, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 1},
			{at: 1, op: opTry, buckets: b("k", perNano, 1000), granted: true, remaining: 0, reset: 1},
			// Booked at 1.5 and 2 µs, both act at 2 µs.
			{at: 1, op: opTake, buckets: b("k", perNano, 500), granted: true, wait: 1, remaining: 0, reset: 2},
			{at: 1, op: opTake, buckets: b("k", perNano, 500), granted: true, wait: 1, remaining: 0, reset: 2},
			// A cancel under a later booking leaves a hole at its slot...
			{at: 1, op: opCancel, ref: 3, refunded: true},
			{at: 1, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 2},
			// ...and the last one's rolls back, the hole under it with it:
			// the TAT is back at 2 µs, where the burst took it.
			{at: 1, op: opCancel, ref: 4, refunded: true},
			{at: 1, op: opTry, buckets: b("k", perNano, 1), maxWait: 1, granted: true, wait: 1, remaining: 0, reset: 2},
			{at: 2, op: opTry, buckets: b("k", perNano, 999), granted: true, remaining: 0, reset: 1},
		}},
		confCase{"fast: a leaky bucket of 2 ns turns", []step{
			{at: 0, op: opTake, pol: fastLB, key: "k", n: 1, granted: true, remaining: 999, reset: 1},
			{at: 0, op: opTake, pol: fastLB, key: "k", n: 999, granted: true, wait: 1, remaining: 0, reset: 2},
			// Full: beyond a budget of 0 the RetryAfter is the wait...
			{at: 0, op: opTry, pol: fastLB, key: "k", n: 1, granted: false, wait: 2, remaining: 0, reset: 2},
			// ...without one, the time until one more fits (2 ns, a whole µs).
			{at: 0, op: opTake, pol: fastLB, key: "k", n: 1, granted: false, wait: 1, remaining: 0, reset: 2},
			{at: 2, op: opTry, pol: fastLB, key: "k", n: 1000, granted: true, remaining: 0, reset: 2},
		}},
		confCase{"fast: a cooldown holds, then one token, then the pace", []step{
			{at: 0, op: opCooldown, buckets: b("k", perNano, 1), d: 5 * time.Millisecond, next: 5 * time.Millisecond},
			{at: 4999, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 2},
			{at: 5000, op: opTry, buckets: b("k", perNano, 1), granted: true, remaining: 0, reset: 1},
			{at: 5000, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 1},
		}},
		confCase{"7/s: T is 142857.142858 µs, and slots are its multiples rounded up", []step{
			{at: 0, op: opTake, buckets: b("k", sevenPS, 1), granted: true, remaining: 0, reset: 142858},
			{at: 0, op: opTake, buckets: b("k", sevenPS, 1), granted: true, wait: 142858, remaining: 0, reset: 285715},
			{at: 0, op: opTake, buckets: b("k", sevenPS, 1), granted: true, wait: 285715, remaining: 0, reset: 428572},
			{at: 0, op: opTake, buckets: b("k", sevenPS, 1), granted: true, wait: 428572, remaining: 0, reset: 571429},
			{at: 0, op: opTake, buckets: b("k", sevenPS, 1), granted: true, wait: 571429, remaining: 0, reset: 714286},
			// 5·T = 714285.71429 µs: idle by a second.
			{at: 1000000, op: opTake, buckets: b("k", sevenPS, 1), granted: true, remaining: 0, reset: 142858},
		}},
	)
}

var sevenPS = Limit{Rate: 7, Burst: 1}

// A fast bucket is valid up to 10⁹ tokens a second; faster is refused. An
// Adaptive over one is valid. Its Quota is exact, rounded up to a µs.
func TestFastValidation(t *testing.T) {
	for _, p := range []Policy{Limit{Rate: 2e6, Burst: 1}, Limit{Rate: 1e9, Burst: 1}, Limit{Rate: 1e6, Period: time.Millisecond, Burst: 5},
		LeakyBucket{Rate: 1e9, Capacity: 1}, Adaptive{Ceiling: Limit{Rate: 2e6, Burst: 10}}, Limit{Rate: 1, Period: 365 * 24 * time.Hour, Burst: 1}} {
		require.NoError(t, p.validate(), "%v", p)
	}
	for _, p := range []Policy{Limit{Rate: 1.01e9, Burst: 1}, LeakyBucket{Rate: 2e9, Capacity: 1}, Limit{Rate: 2e6, Period: time.Millisecond, Burst: 1}} {
		err := p.validate()
		require.ErrorIs(t, err, ErrInvalid, "%v", p)
		require.ErrorContains(t, err, "faster than one token per nanosecond")
	}
	n, w := gigabit.quota()
	require.Equal(t, 125000, n)
	require.Equal(t, time.Millisecond, w)
	_, w = Limit{Rate: 3e8, Burst: 1000}.quota() // T = 3334 ps: 3.334 µs, rounded up
	require.Equal(t, 4*time.Microsecond, w)
	_, w = Limit{Rate: 7, Burst: 7}.quota()
	require.Equal(t, time.Second+time.Microsecond, w, "7 × 142857.142858 µs, rounded up")
}

// T is Period/Rate to the picosecond, rounded up, but a quotient within
// float noise of a whole number is that number.
func TestPace(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		want pico
	}{
		{Limit{Rate: 200, Burst: 1}, pico{5000, 0}},
		{Limit{Rate: 7, Burst: 1}, pico{142857, 142858}},
		{Limit{Rate: 3, Burst: 1}, pico{333333, 333334}},
		{Limit{Rate: 400_000, Burst: 1}, pico{2, 500000}},
		{Limit{Rate: 990_000, Burst: 1}, pico{1, 10102}},
		{Limit{Rate: 1e8, Burst: 1}, pico{0, 10000}},
		{Limit{Rate: 1e9, Burst: 1}, pico{0, 1000}},
		{Limit{Rate: 0.1, Burst: 1}, pico{10_000_000, 0}},
		{Limit{Rate: 1, Period: 365 * 24 * time.Hour, Burst: 1}, pico{365 * 24 * 3600 * 1_000_000, 0}},
	} {
		assert.Equal(t, c.want, c.l.pace(), "%v", c.l)
	}
}

// The promise: over a long run of reservations on a busy bucket,
// the mean interval between the slots booked is Period/Rate within 0.01 %,
// on the memory store and on a real redis-server alike (the same slots),
// through the lean script (one bucket) and the general one (the bucket and
// a second, roomy one).
func TestExactRates(t *testing.T) {
	// One try per call and no read timeout: on a loaded machine, a batch
	// whose reply took longer than go-redis's ReadTimeout would be run
	// again by its retry, booking its turns twice on Redis alone.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	cases := []struct {
		l     Limit
		n     int // tokens per reservation: at least a µs of them
		calls int
	}{
		{Limit{Rate: 7, Burst: 1}, 1, 400},
		{Limit{Rate: 400_000, Burst: 1}, 1, 50000},
		{Limit{Rate: 990_000, Burst: 1}, 1, 50000},
		{Limit{Rate: 1e9, Burst: 1000}, 1000, 50000},
	}
	roomy := FixedWindow{Max: 1 << 30, Window: time.Hour}
	for _, c := range cases {
		for _, general := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/general=%v", c.l, general), func(t *testing.T) {
				clock := newFakeClock()
				prefix := redistest.Prefix(t)
				stores := []Store{NewMemoryStore(WithClock(clock)), NewRedisStore(rdb, WithClock(clock))}
				var slots [2][]int64
				for si, st := range stores {
					reqs := make([]request, 250)
					for i := range reqs {
						reqs[i] = request{prefix: prefix + fmt.Sprint(si), one: Bucket{Key: "{k}", Limit: c.l, N: c.n}, maxWait: -1}
						if general {
							reqs[i].more = []Bucket{{Key: "{k}:roomy", Limit: roomy, N: 1}}
						}
					}
					for len(slots[si]) < c.calls {
						ds, err := st.reserveBatch(context.Background(), reqs[:min(len(reqs), c.calls-len(slots[si]))])
						require.NoError(t, err)
						for _, d := range ds {
							require.True(t, d.granted)
							slots[si] = append(slots[si], d.slot())
						}
					}
				}
				require.Equal(t, slots[0], slots[1], "the memory store and redis-server book the same slots")
				s := slots[0]
				mean := float64(s[len(s)-1]-s[0]) / float64(len(s)-1) / float64(c.n)
				want := c.l.exactInterval()
				t.Logf("%v: %d reservations of %d over %d µs: %.6f µs per token, Period/Rate %.6f µs (%+.5f %%)",
					c.l, len(s), c.n, s[len(s)-1]-s[0], mean, want, 100*(mean-want)/want)
				require.InEpsilon(t, want, mean, 1e-4, "the mean interval between booked slots")
			})
		}
	}
}

// stores are a memory store and a RedisStore on a real redis-server, both on clock.
func bothStores(t *testing.T, clock clock) map[string]Store {
	return map[string]Store{
		"memory": NewMemoryStore(WithClock(clock)),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
	}
}

var hundredM = Limit{Rate: 1e8, Burst: 100} // T = 10 ns, a burst of 1 µs

// A cancelled turn under later ones is a hole at 10⁸/s as at any rate: the
// next caller is served from it, at its slot, ahead of the bucket's tail.
func TestFastHoles(t *testing.T) {
	for name, st := range bothStores(t, newFakeClock()) {
		t.Run(name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			ctx := context.Background()
			take := func(maxWait int64) decision {
				d, err := st.reserve(ctx, request{prefix: prefix, one: Bucket{Key: "k", Limit: hundredM, N: 100}, maxWait: maxWait})
				require.NoError(t, err)
				return d
			}
			var ds []decision
			for i := range 6 { // the burst, then a µs each
				ds = append(ds, take(-1))
				require.Equal(t, int64(i), ds[i].wait)
			}
			req := request{prefix: prefix, one: Bucket{Key: "k", Limit: hundredM, N: 100}, maxWait: -1}
			cancel := func(d decision, id string) {
				ok, err := st.refund(ctx, req, d, id)
				require.NoError(t, err)
				require.True(t, ok)
			}
			cancel(ds[2], "two")
			d := take(-1)
			assert.Equal(t, int64(2), d.wait, "served from the hole at 2 µs")
			assert.Equal(t, whole(base.UnixMicro()+2), d.handle, "a grant from a hole: its handle is the turn's instant")
			d6 := take(-1)
			assert.Equal(t, int64(6), d6.wait, "then the tail")
			// A hole at 4; then the latest bookings roll back, and the hole
			// left at the tail folds back with them.
			cancel(ds[4], "four")
			cancel(d6, "six")
			cancel(ds[5], "five")
			d = take(-1)
			assert.Equal(t, int64(4), d.wait)
			assert.NotEqual(t, pico{}, d.handle, "from the tail: no hole is left")
			assert.Equal(t, int64(5), take(-1).wait)
		})
	}
}

// An Adaptive over a ceiling of 10⁸/s runs at the ceiling, exactly, until
// the upstream announces less; then at that rate, exactly; on both stores.
func TestFastAdaptive(t *testing.T) {
	a := Adaptive{Ceiling: Limit{Rate: 1e8, Burst: 1000}}
	for name, st := range bothStores(t, newFakeClock()) {
		t.Run(name, func(t *testing.T) {
			lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			// book takes 1100 calls of 100 tokens, and gives the span of the
			// slots of the last 1000 (past the burst).
			book := func(key string) time.Duration {
				var first, last time.Time
				for i := range 1100 {
					r, err := lim.Reserve(ctx, key, a, 100, -1)
					require.NoError(t, err)
					if i == 100 {
						first = r.Slot()
					}
					last = r.Slot()
				}
				return last.Sub(first)
			}
			assert.Equal(t, 999*time.Microsecond, book("ceiling"), "100 tokens every µs at 10⁸/s")

			_, err := lim.report(ctx, "announced", a, answer{quota: 4e7})
			require.NoError(t, err)
			l, st, err := lim.readAdaptive(ctx, "announced", a)
			require.NoError(t, err)
			assert.Equal(t, 4e7, st.Rate)
			assert.Equal(t, Limit{Rate: 4e7, Burst: 400}, l, "the burst scaled with the rate")
			assert.InDelta(t, 999*2.5, float64(book("announced")/time.Microsecond), 1, "100 tokens every 2.5 µs at 4·10⁷/s")
		})
	}
}

// Bookings of hours on a bucket of 10⁸/s: a call waits as long as the bucket
// is booked, whatever that is; the latest booking rolls back exactly; a
// cooldown of hours holds; on both stores.
func TestFastLongBooking(t *testing.T) {
	second := Limit{Rate: 1e8, Burst: 1e8} // T = 10 ns, a second's burst
	clock := newFakeClock()
	for name, st := range bothStores(t, clock) {
		t.Run(name, func(t *testing.T) {
			lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			var last *Reservation
			const hours = 2
			for i := range hours*3600 + 1 {
				r, err := lim.Reserve(ctx, "k", second, 1e8, -1)
				require.NoError(t, err)
				require.Equal(t, time.Duration(i)*time.Second, r.Slot().Sub(clock.Now()), "booking %d", i)
				last = r
			}
			require.NoError(t, last.Cancel(ctx))
			r, err := lim.Reserve(ctx, "k", second, 1e8, -1)
			require.NoError(t, err)
			assert.Equal(t, hours*time.Hour, r.Slot().Sub(clock.Now()), "the cancelled turn's slot again")
			s, err := lim.Peek(ctx, "k", second)
			require.NoError(t, err)
			assert.Equal(t, hours*time.Hour+time.Microsecond, s.NextFree, "one token 10 ns after that booking's start: a whole µs")

			// Through a slow bucket: a booking an hour ahead counts on the
			// fast one an hour ahead.
			slow := Limit{Rate: 1, Period: time.Hour, Burst: 1}
			both := []Bucket{{Key: "{b}:fast", Limit: hundredM, N: 100}, {Key: "{b}:slow", Limit: slow, N: 1}}
			_, err = lim.ReserveAll(ctx, both, -1)
			require.NoError(t, err)
			r, err = lim.ReserveAll(ctx, both, -1)
			require.NoError(t, err)
			assert.Equal(t, time.Hour, r.Slot().Sub(clock.Now()))
			s, err = lim.Peek(ctx, "{b}:fast", hundredM)
			require.NoError(t, err)
			assert.Equal(t, time.Hour, s.NextFree, "the fast bucket's burst is taken an hour ahead")

			next, err := lim.Cooldown(ctx, "cool", hundredM, 3*time.Hour)
			require.NoError(t, err)
			assert.Equal(t, 3*time.Hour, next)
			_, err = lim.TryAcquire(ctx, "cool", hundredM, 1)
			require.NoError(t, err)
			s, err = lim.Peek(ctx, "cool", hundredM)
			require.NoError(t, err)
			assert.Equal(t, 3*time.Hour, s.NextFree)
		})
	}
}

// Random takes, tries, cancels and pauses on fast buckets agree on the
// memory store, a real redis-server and miniredis (runRandom), and the grants
// that stand keep the token bucket's and the leaky bucket's promises, holes
// and all.
func TestFastLimitRandom(t *testing.T) {
	limits := []Limit{perNano, {Rate: 3e8, Burst: 1000}, gigabit, {Rate: 7e3, Period: time.Millisecond, Burst: 20}, {Rate: 990_000, Burst: 3}}
	for seed := uint64(1); seed <= 15; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l := limits[int(seed)%len(limits)]
			checkTokenBucket(t, l, grantTimes(runRandom(t, l, seed, max(1, l.pace().times(int64(l.Burst)).ceil()), true, nil)))
		})
	}
}

func TestFastLeakyBucketRandom(t *testing.T) {
	pols := []LeakyBucket{fastLB, {Rate: 7e3, Period: time.Millisecond, Capacity: 50}, {Rate: 3e6, Capacity: 7}, {Rate: 400_000, Capacity: 4}}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			leakyBucketRandom(t, p, seed, max(1, p.limit().pace().times(int64(p.Capacity)).ceil()))
		})
	}
}

// A fast bucket through the Limiter, on both stores alike: Peek, a
// Reserve's refund and a Cooldown. (Waits of a second: a Reservation's
// Cancel reads the real clock.)
func TestFastThroughTheLimiter(t *testing.T) {
	big := Limit{Rate: 2e6, Burst: 2e6} // T = 0.5 µs, a second's burst
	for name, st := range bothStores(t, newFakeClock()) {
		t.Run(name, func(t *testing.T) {
			l := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			res, err := l.TryAcquire(ctx, "nic", big, 2e6)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.Equal(t, 0, res.Remaining)
			require.Equal(t, time.Second, res.ResetAfter)

			s, err := l.Peek(ctx, "nic", big)
			require.NoError(t, err)
			require.Equal(t, State{Remaining: 0, NextFree: time.Microsecond, ResetAfter: time.Second}, s, "one token is 0.5 µs away: a whole µs")

			r, err := l.Reserve(ctx, "nic", big, 2e6, 2*time.Second)
			require.NoError(t, err)
			require.Equal(t, int64(1e6), r.d.wait, "the whole burst again: a second")
			require.NoError(t, r.Cancel(ctx))
			s, err = l.Peek(ctx, "nic", big)
			require.NoError(t, err)
			require.Equal(t, time.Microsecond, s.NextFree, "the refund put the bucket back")

			next, err := l.Cooldown(ctx, "nic", big, 5*time.Millisecond)
			require.NoError(t, err)
			require.Equal(t, 5*time.Millisecond, next)
			s, err = l.Peek(ctx, "nic", big)
			require.NoError(t, err)
			require.Equal(t, 5*time.Millisecond, s.NextFree)
			require.Equal(t, 5*time.Millisecond, s.Cooldown)
		})
	}
}

// A state key in the form sluice wrote before it kept picoseconds (whole
// µs) reads as the same instant; a value of no known form reads as none, a
// full bucket; both through the lean script and the general one.
func TestOldStateKeys(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	clock := newFakeClock()
	st := NewRedisStore(rdb, WithClock(clock))
	prefix := redistest.Prefix(t)
	lim := NewLimiter(st, WithKeyPrefix(prefix))
	ctx := context.Background()
	l := Limit{Rate: 10, Burst: 1}
	key := stateKey(prefix, "old", l)
	now := clock.Now().UnixMicro()
	for _, general := range []bool{false, true} {
		require.NoError(t, rdb.Set(ctx, key, fmt.Sprint(now+250_000), time.Minute).Err())
		if general {
			s, err := lim.Peek(ctx, "old", l) // peek.lua: the general modules
			require.NoError(t, err)
			assert.Equal(t, 250*time.Millisecond, s.NextFree, "an old TAT, 250 ms ahead")
		} else {
			res, err := lim.TryAcquire(ctx, "old", l, 1)
			require.NoError(t, err)
			assert.Equal(t, 250*time.Millisecond, res.RetryAfter, "an old TAT, 250 ms ahead")
		}
		require.NoError(t, rdb.Set(ctx, key, "not a time", time.Minute).Err())
		if general {
			s, err := lim.Peek(ctx, "old", l)
			require.NoError(t, err)
			assert.Equal(t, State{Remaining: 1}, s, "junk reads as a full bucket")
		} else {
			res, err := lim.TryAcquire(ctx, "old", l, 1)
			require.NoError(t, err)
			assert.True(t, res.Allowed, "junk reads as a full bucket")
			v, err := rdb.Get(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprint(now+100_000), v, "and is written over in whole µs")
		}
	}
	// A fraction is written as six digits of picoseconds.
	seven := Limit{Rate: 7, Burst: 1}
	_, err := lim.TryAcquire(ctx, "seven", seven, 1)
	require.NoError(t, err)
	v, err := rdb.Get(ctx, stateKey(prefix, "seven", seven)).Result()
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d.142858", now+142857), v)
}

// The float estimate in floorDivPico is corrected to the exact quotient.
func TestFloorDivPico(t *testing.T) {
	for _, c := range []struct {
		a, b pico
		want int64
	}{
		{pico{10, 0}, pico{2, 500000}, 4},
		{pico{9, 999999}, pico{2, 500000}, 3},
		{pico{0, 0}, pico{0, 1000}, 0},
		{pico{1, 0}, pico{0, 1000}, 1000},
		{pico{0, 999999}, pico{0, 1000}, 999},
		{pico{1 << 40, 1}, pico{1 << 10, 0}, 1 << 30},
		{pico{1<<40 - 1, 999999}, pico{1 << 10, 0}, 1<<30 - 1},
		// beyond int64 picoseconds: the float estimate, corrected
		{pico{1 << 50, 1}, pico{1 << 20, 0}, 1 << 30},
		{pico{1<<50 - 1, 999999}, pico{1 << 20, 0}, 1<<30 - 1},
		{pico{3 << 45, 0}, pico{1 << 45, 333333}, 2},
		{pico{1<<50 + 7, 0}, pico{1 << 44, 1}, 64},
		{pico{1 << 50, 0}, pico{1 << 44, 1}, 63},
	} {
		assert.Equal(t, c.want, floorDivPico(c.a, c.b), "%v / %v", c.a, c.b)
	}
	assert.Equal(t, int64(1000), ceilDivPico(pico{1, 0}, pico{0, 1000}))
	assert.Equal(t, int64(1001), ceilDivPico(pico{1, 1}, pico{0, 1000}))
	assert.Equal(t, int64(1<<30), ceilDivPico(pico{1 << 50, 0}, pico{1 << 20, 0}))
	assert.Equal(t, int64(1<<30+1), ceilDivPico(pico{1 << 50, 1}, pico{1 << 20, 0}))
}
