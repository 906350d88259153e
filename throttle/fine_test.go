package throttle

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

var (
	gigabit = Limit{Rate: 125e6, Burst: 125000}      // bytes: T = 8 ns, a burst of 1 ms
	perNano = Limit{Rate: 1e9, Burst: 1000}          // T = 1 ns, a burst of 1 µs
	fineLB  = LeakyBucket{Rate: 5e8, Capacity: 1000} // T = 2 ns, 2 µs of capacity
)

// Fine buckets in the conformance table: both stores give these exact answers.
func init() {
	conformance = append(conformance,
		confCase{"fine: a gigabit of bytes, packets after the burst", []step{
			{at: 0, op: opTry, buckets: b("k", gigabit, 125000), granted: true, remaining: 0, reset: 1000},
			// 1500 bytes at 8 ns each: 12 µs.
			{at: 0, op: opTry, buckets: b("k", gigabit, 1500), granted: false, wait: 12, remaining: 0, reset: 1000},
			{at: 12, op: opTry, buckets: b("k", gigabit, 1500), granted: true, remaining: 0, reset: 1000},
			// 1 µs refills 125 bytes: 124 whole ones after taking one.
			{at: 13, op: opTry, buckets: b("k", gigabit, 1), granted: true, remaining: 124, reset: 1000},
		}},
		confCase{"fine: 10⁹ a second, exactly a thousand every µs", []step{
			{at: 0, op: opTry, buckets: b("k", perNano, 1000), granted: true, remaining: 0, reset: 1},
			{at: 0, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 1},
			{at: 1, op: opTry, buckets: b("k", perNano, 1000), granted: true, remaining: 0, reset: 1},
			// Booked at 1.5 and 2 µs, both act at 2 µs.
			{at: 1, op: opTake, buckets: b("k", perNano, 500), granted: true, wait: 1, remaining: 0, reset: 2},
			{at: 1, op: opTake, buckets: b("k", perNano, 500), granted: true, wait: 1, remaining: 0, reset: 2},
			// A cancel under a later booking gives nothing back (no holes)...
			{at: 1, op: opCancel, ref: 3, refunded: true},
			{at: 1, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 2, remaining: 0, reset: 2},
			// ...the last one's does: the TAT is back at 1.5 µs.
			{at: 1, op: opCancel, ref: 4, refunded: true},
			{at: 1, op: opTry, buckets: b("k", perNano, 1), maxWait: 1, granted: true, wait: 1, remaining: 0, reset: 2},
		}},
		confCase{"fine: a leaky bucket of 2 ns turns", []step{
			{at: 0, op: opTake, pol: fineLB, key: "k", n: 1, granted: true, remaining: 999, reset: 1},
			{at: 0, op: opTake, pol: fineLB, key: "k", n: 999, granted: true, wait: 1, remaining: 0, reset: 2},
			// Full: beyond a budget of 0 the RetryAfter is the wait...
			{at: 0, op: opTry, pol: fineLB, key: "k", n: 1, granted: false, wait: 2, remaining: 0, reset: 2},
			// ...without one, the time until one more fits (2 ns, a whole µs).
			{at: 0, op: opTake, pol: fineLB, key: "k", n: 1, granted: false, wait: 1, remaining: 0, reset: 2},
			{at: 2, op: opTry, pol: fineLB, key: "k", n: 1000, granted: true, remaining: 0, reset: 2},
		}},
		confCase{"fine: a cooldown holds, then one token, then the pace", []step{
			{at: 0, op: opCooldown, buckets: b("k", perNano, 1), d: 5 * time.Millisecond, next: 5 * time.Millisecond},
			{at: 4999, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 2},
			{at: 5000, op: opTry, buckets: b("k", perNano, 1), granted: true, remaining: 0, reset: 1},
			{at: 5000, op: opTry, buckets: b("k", perNano, 1), granted: false, wait: 1, remaining: 0, reset: 1},
		}},
	)
}

// A fine bucket is valid from 10⁶ to 10⁹ tokens a second; faster is
// refused, as is an Adaptive over one; its Quota is exact.
func TestFineValidation(t *testing.T) {
	for _, p := range []Policy{Limit{Rate: 2e6, Burst: 1}, Limit{Rate: 1e9, Burst: 1}, Limit{Rate: 1e6, Period: time.Millisecond, Burst: 5}, LeakyBucket{Rate: 1e9, Capacity: 1}} {
		require.NoError(t, p.Validate(), "%v", p)
	}
	for _, p := range []Policy{Limit{Rate: 1.01e9, Burst: 1}, LeakyBucket{Rate: 2e9, Capacity: 1}, Limit{Rate: 2e6, Period: time.Millisecond, Burst: 1}} {
		err := p.Validate()
		require.ErrorIs(t, err, ErrInvalid, "%v", p)
		require.ErrorContains(t, err, "faster than one token per nanosecond")
	}
	require.ErrorIs(t, Adaptive{Ceiling: Limit{Rate: 2e6, Burst: 10}}.Validate(), ErrInvalid)
	n, w := gigabit.Quota()
	require.Equal(t, 125000, n)
	require.Equal(t, time.Millisecond, w)
	_, w = Limit{Rate: 3e8, Burst: 1000}.Quota() // T = 3334 ps: 3.334 µs, rounded up
	require.Equal(t, 4*time.Microsecond, w)
}

// Random takes, tries, cancels and pauses on fine buckets agree on the
// MemoryStore, a real redis-server and miniredis (runRandom), and the grants
// that stand keep the token bucket's promise with slots rounded up to a
// whole µs: in any span of slots a..b, at most Burst + ((b−a+1)µs − 1 tick)/T
// tokens, since each was booked in the µs before its slot.
func TestFineLimitRandom(t *testing.T) {
	limits := []Limit{perNano, {Rate: 3e8, Burst: 1000}, gigabit, {Rate: 7e3, Period: time.Millisecond, Burst: 20}}
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l := limits[int(seed)%len(limits)]
			tt, burst := fineTicks(l.exactInterval()), int64(l.Burst)
			times := grantTimes(runRandom(t, l, seed, max(1, up(burst*tt)), true, nil))
			// The tokens by slot: slots[i] with upto[i] tokens at or before it.
			var slots, upto []int64
			for i, x := range times {
				if i == 0 || x != times[i-1] {
					slots, upto = append(slots, x), append(upto, 0)
				}
				upto[len(upto)-1] = int64(i + 1)
			}
			for i := range slots {
				for j := i; j < len(slots); j++ {
					n := upto[j]
					if i > 0 {
						n -= upto[i-1]
					}
					allowed := burst + ((slots[j]-slots[i]+1)*fineQ-1)/tt
					require.LessOrEqual(t, n, allowed, "%d tokens in slots [%d, %d] µs", n, slots[i], slots[j])
				}
			}
		})
	}
}

// The same for fine leaky buckets: no grant holds more than Capacity, and
// the turns that stand never overlap once booked (each began in the µs
// before its slot, n·T after the one before).
func TestFineLeakyBucketRandom(t *testing.T) {
	pols := []LeakyBucket{fineLB, {Rate: 7e3, Period: time.Millisecond, Capacity: 50}, {Rate: 3e6, Capacity: 7}}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			tt, c := fineTicks(p.limit().exactInterval()), int64(p.Capacity)
			stand := standing(runRandom(t, p, seed, max(1, up(c*tt)), true, func(s lockstepStep) {
				switch {
				case s.req == nil:
				case s.d.granted:
					if s.d.wait > 0 {
						require.Less(t, (s.d.wait-1)*fineQ+int64(s.req.one.N)*tt, c*tt, s.msg+" the bucket holds more than Capacity")
					}
				default:
					require.Positive(t, s.d.wait, s.msg+" RetryAfter")
				}
			}))
			require.NotEmpty(t, stand)
			for i := 1; i < len(stand); i++ {
				prev := stand[i-1]
				require.Greater(t, (stand[i].d.slot()-prev.d.slot()+1)*fineQ, int64(prev.req.one.N)*tt, "turn %d starts before turn %d has gone through", i, i-1)
			}
		})
	}
}

// Nothing is booked on a fine bucket beyond fineSpan (about 37 minutes):
// with no bound on the wait, 1 s bookings on a bucket of a second's burst
// are granted up to it, then refused with a RetryAfter, on both stores; a
// call whose slot a slow bucket pushes past it is refused too.
func TestFineHorizon(t *testing.T) {
	clock := newFakeClock()
	stores := map[string]Store{
		"memory": NewMemoryStore(WithClock(clock)),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
	}
	second := Limit{Rate: 1e9, Burst: 1e9}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			l := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			granted := 0
			for ; granted <= 3000; granted++ {
				r, err := l.Reserve(ctx, "k", second, 1e9, -1)
				var limited *LimitedError
				if errors.As(err, &limited) {
					require.Positive(t, limited.RetryAfter)
					break
				}
				require.NoError(t, err)
				require.WithinDuration(t, time.Now().Add(time.Duration(granted)*time.Second), r.Time(), 500*time.Millisecond)
			}
			require.Equal(t, 2251, granted, "bookings of 1 s up to the horizon, ⌊2^51 ps / 1 s⌋")

			slow := Limit{Rate: 1, Period: time.Hour, Burst: 1}
			both := []Bucket{{Key: "{b}:fine", Limit: perNano, N: 1}, {Key: "{b}:slow", Limit: slow, N: 1}}
			_, err := l.ReserveAll(ctx, both, -1)
			require.NoError(t, err)
			_, err = l.ReserveAll(ctx, both, -1)
			var limited *LimitedError
			require.ErrorAs(t, err, &limited, "an hour's wait is past the fine bucket's horizon")
			require.Equal(t, time.Hour, limited.RetryAfter)
		})
	}
}

// A fine bucket through the Limiter, on both stores alike: Peek, a
// Reserve's refund and a Cooldown. (Waits of a second: a Reservation's
// Cancel reads the real clock.)
func TestFineThroughTheLimiter(t *testing.T) {
	clock := newFakeClock()
	stores := map[string]Store{
		"memory": NewMemoryStore(WithClock(clock)),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
	}
	big := Limit{Rate: 2e6, Burst: 2e6} // T = 0.5 µs, a second's burst
	for name, st := range stores {
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
