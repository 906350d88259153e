package throttle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// settleGrant is a grant of a random settle run: its request and decision,
// whether a refund of it was applied, and what each bucket was settled at
// (-1: not settled).
type settleGrant struct {
	req  request
	d    decision
	id   string
	gone bool
	used []int
}

// cost is what bucket i of g counts: nothing once refunded, its settled cost
// once settled, else what it took.
func (g *settleGrant) cost(i int) int {
	switch {
	case g.gone:
		return 0
	case g.used[i] >= 0:
		return g.used[i]
	}
	return g.req.at(i).N
}

// runSettleRandom drives 300 random reserves, cancels, settles and pauses of
// a call over pols' buckets (one or two, all in one hash slot) on a
// MemoryStore, a real redis-server and miniredis in lockstep (as runRandom),
// and requires the same answer from all three at every step. A settle picks
// a grant and a bucket of it not settled yet and settles it at 0 to N, or,
// with debts, at up to 2·N + 1.
func runSettleRandom(t *testing.T, pols []algo, seed uint64, unit int64, debts bool) []*settleGrant {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 30))
	mr, mini := miniredisClient(t)
	rdb := redistest.Shared(t).Client(t)
	clock := newFakeClock()
	stores := []Store{
		NewMemoryStore(WithClock(clock)),
		NewRedisStore(persisting{rdb}, WithClock(clock)),
		NewRedisStore(mini, WithClock(clock)),
	}
	names := []string{"memory", "redis", "miniredis"}
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	var grants []*settleGrant
	pick := func() *settleGrant {
		i := rng.IntN(len(grants))
		if rng.IntN(2) == 0 {
			i = len(grants) - 1 - rng.IntN(min(len(grants), 4))
		}
		return grants[i]
	}
	now := int64(0)
	for step := range 300 {
		msg := fmt.Sprintf("seed %d step %d", seed, step)
		mr.FastForward(micros(now) - clock.Now().Sub(base))
		clock.at(now)
		switch k := rng.IntN(14); {
		case k < 2:
			now += rng.Int64N(unit)
		case k < 3:
			now += rng.Int64N(3 * unit)
		case k < 4:
			now += 1 + rng.Int64N(3)
		case k < 9:
			req := request{prefix: prefix, maxWait: -1}
			for i, p := range pols {
				limit, _ := p.quota()
				b := Bucket{Key: fmt.Sprintf("{k}%d", i), Limit: p, N: 1 + rng.IntN(limit)}
				if rng.IntN(2) == 0 {
					b.N = 1
				}
				if i == 0 {
					req.one = b
				} else {
					req.more = append(req.more, b)
				}
			}
			switch rng.IntN(3) {
			case 0:
				req.maxWait = 0
			case 1:
				req.maxWait = rng.Int64N(4 * unit)
			}
			var first decision
			for i, st := range stores {
				d, err := st.reserve(ctx, req)
				require.NoError(t, err, msg)
				if i == 0 {
					first = d
				} else {
					require.Equal(t, first, d, "%s: %s agrees with memory", msg, names[i])
				}
			}
			if first.granted {
				used := make([]int, len(pols))
				for i := range used {
					used[i] = -1
				}
				grants = append(grants, &settleGrant{req: req, d: first, id: fmt.Sprint(step), used: used})
			}
		case k < 11:
			if len(grants) == 0 {
				break
			}
			g := pick()
			settled := false
			for _, u := range g.used {
				settled = settled || u >= 0
			}
			if g.d.wait == 0 || g.gone || settled { // as Reservation.Cancel
				break
			}
			var first bool
			for i, st := range stores {
				ok, err := st.refund(ctx, g.req, g.d, g.id)
				require.NoError(t, err, msg)
				if i == 0 {
					first = ok
				} else {
					require.Equal(t, first, ok, "%s: %s refund agrees with memory", msg, names[i])
				}
			}
			g.gone = first
		default:
			if len(grants) == 0 {
				break
			}
			g := pick()
			b := rng.IntN(len(pols))
			if g.gone || g.used[b] >= 0 {
				break
			}
			n := g.req.at(b).N
			used := rng.IntN(n + 1)
			if debts && rng.IntN(2) == 0 {
				used = rng.IntN(2*n + 2)
			}
			req := request{prefix: prefix, one: *g.req.at(b)}
			d := decision{granted: true, wait: g.d.wait, now: g.d.now, handle: g.d.handleAt(b)}
			for i, st := range stores {
				ok, err := st.charge(ctx, req, d, used, g.id)
				require.NoError(t, err, msg)
				require.True(t, ok, "%s: %s settles", msg, names[i])
				ok, err = st.charge(ctx, req, d, used, g.id)
				require.NoError(t, err, msg)
				require.False(t, ok, "%s: %s settles once", msg, names[i])
			}
			g.used[b] = used
		}
	}
	return grants
}

// settledTimes are the grant times of bucket i that stand, one per unit of
// its settled cost, sorted.
func settledTimes(grants []*settleGrant, i int) []int64 {
	var times []int64
	for _, g := range grants {
		for range g.cost(i) {
			times = append(times, g.d.slot())
		}
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	return times
}

// checkSettled requires the grants of bucket i, at their settled costs, to
// keep p's promise.
func checkSettled(t *testing.T, p algo, grants []*settleGrant, i int) {
	t.Helper()
	times := settledTimes(grants, i)
	switch p := p.(type) {
	case Limit:
		checkTokenBucket(t, p, times)
	case FixedWindow:
		per := map[int64]int{}
		for _, x := range times {
			per[x/p.window()]++
		}
		for w, c := range per {
			require.LessOrEqual(t, c, p.Max, "window %d", w)
		}
	case SlidingLog:
		if len(times) > 0 {
			require.LessOrEqual(t, maxInSpan(times, p.window()), p.Max, "grants in one window")
		}
	case SlidingWindow:
		if len(times) == 0 {
			return
		}
		L, S := p.slotLen(), int64(p.slots())
		count := map[int64]int{}
		for _, x := range times {
			count[x/L]++
		}
		for j := times[0] / L; j <= times[len(times)-1]/L; j++ {
			in := 0
			for x := j - S + 1; x <= j; x++ {
				in += count[x]
			}
			require.LessOrEqual(t, in, p.Max, "slots %d to %d", j-S+1, j)
		}
	case LeakyBucket:
		T := p.limit().pace()
		var stand []*settleGrant
		for _, g := range grants {
			if g.cost(i) > 0 {
				stand = append(stand, g)
			}
		}
		instant := func(g *settleGrant) pico { return maxPico(g.d.handleAt(i), before1(g.d.slot())) }
		sort.SliceStable(stand, func(a, b int) bool { return instant(stand[a]).less(instant(stand[b])) })
		for j := 1; j < len(stand); j++ {
			end := instant(stand[j-1]).add(T.times(int64(stand[j-1].cost(i))))
			require.False(t, instant(stand[j]).less(end), "turn %d starts before turn %d has gone through", j, j-1)
		}
	default:
		t.Fatalf("no check for %T", p)
	}
}

// Random reserves, cancels and settles agree on every store, and the grants
// at their settled costs keep each policy's promise when settling gives back
// (and agree when it also takes on top); calls of two token buckets settle
// either, whichever pushed the other.
func TestSettleLockstepRandom(t *testing.T) {
	cases := []struct {
		pols []algo
		unit int64
	}{
		{[]algo{Limit{Rate: 10, Burst: 5}}, 100_000},
		{[]algo{Limit{Rate: 7, Period: time.Minute, Burst: 9}}, 8_571_429},
		{[]algo{Limit{Rate: 10, Burst: 5}, Limit{Rate: 3, Burst: 4}}, 333_334},
		{[]algo{LeakyBucket{Rate: 10, Capacity: 5}}, 100_000},
		{[]algo{FixedWindow{Max: 5, Window: 7 * time.Millisecond}}, 7_000},
		{[]algo{SlidingLog{Max: 4, Window: 2 * time.Millisecond}}, 2_000},
		{[]algo{SlidingWindow{Max: 6, Window: 3 * time.Millisecond, Slots: 3}}, 1_000},
	}
	for ci, c := range cases {
		for seed := uint64(1); seed <= settleSeeds; seed++ {
			debts := seed%3 == 0
			t.Run(fmt.Sprintf("%d/%d", ci, seed), func(t *testing.T) {
				grants := runSettleRandom(t, c.pols, seed+uint64(100*ci), c.unit, debts)
				require.NotEmpty(t, grants)
				if debts {
					return
				}
				for i, p := range c.pols {
					checkSettled(t, p, grants, i)
				}
			})
		}
	}
}

// settleSeeds is how many random runs TestSettleLockstepRandom makes of each case.
var settleSeeds = uint64(6)

// settleStores are a MemoryStore and a RedisStore on one fake clock.
func settleStores(t *testing.T) (map[string]Store, *fakeClock) {
	clock := newFakeClock()
	return map[string]Store{
		"memory": NewMemoryStore(WithClock(clock)),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
	}, clock
}

// What Settle gives back and takes on top, step by step, on both stores.
func TestSettleSteps(t *testing.T) {
	type op struct {
		at     int64 // µs from base
		key    string
		n      int   // reserve n; or, with settle, the grant's index and settle at n
		settle int   // 1 + the index of the grant to settle; 0: reserve
		wait   int64 // a reserve's wait, -1: denied
	}
	cases := []struct {
		name string
		p    Policy
		ops  []op
	}{
		{"token bucket: the latest booking gives back at once", Limit{Rate: 10, Burst: 10}, []op{
			{0, "k", 10, 0, 0}, {0, "k", 2, 1, 0}, {0, "k", 8, 0, 0}, {0, "k", 1, 0, 100_000},
		}},
		{"token bucket: under a later booking, all it has not refilled (from its slot's instant)", Limit{Rate: 10, Burst: 10}, []op{
			{0, "k", 5, 0, 0}, {0, "k", 5, 0, 0}, {10, "k", 0, 1, 0}, {10, "k", 5, 0, 1}, {10, "k", 1, 0, 100_001},
		}},
		{"token bucket: nothing back once the bucket has been full since", Limit{Rate: 1, Burst: 10}, []op{
			{0, "k", 10, 0, 0}, {15_000_000, "k", 1, 0, 0}, {15_500_000, "k", 0, 1, 0}, {15_500_000, "k", 10, 0, 500_000},
		}},
		{"token bucket: a debt makes the next wait, not the settled", Limit{Rate: 10, Burst: 10}, []op{
			{0, "k", 1, 0, 0}, {0, "k", 21, 1, 0}, {0, "k", 1, 0, 1_200_000},
		}},
		{"leaky bucket: the latest turn shrinks", LeakyBucket{Rate: 10, Capacity: 5}, []op{
			{0, "k", 4, 0, 0}, {0, "k", 1, 1, 0}, {0, "k", 1, 0, 100_000},
		}},
		{"fixed window: back to its window, debt carried on", FixedWindow{Max: 5, Window: time.Second}, []op{
			{0, "k", 5, 0, 0}, {0, "k", 2, 1, 0}, {0, "k", 3, 0, 0}, {0, "k", 1, 0, 1_000_000},
			{1_000_000, "k", 1, 0, 0}, {1_000_000, "k", 12, 4, 0}, {1_000_000, "k", 1, 0, 2_000_000},
		}},
		{"fixed window: nothing back once its window has ended", FixedWindow{Max: 5, Window: time.Second}, []op{
			{0, "k", 5, 0, 0}, {1_000_000, "k", 0, 1, 0}, {1_000_000, "k", 5, 0, 0}, {1_000_000, "k", 1, 0, 1_000_000},
		}},
		{"sliding log: entries out, and in at the grant's time", SlidingLog{Max: 4, Window: time.Second}, []op{
			{0, "k", 4, 0, 0}, {0, "k", 1, 1, 0}, {0, "k", 2, 0, 0}, {500_000, "k", 3, 3, 0}, {500_000, "k", 1, 0, 500_000},
		}},
		{"sliding window: off and on its slot", SlidingWindow{Max: 4, Window: time.Second, Slots: 4}, []op{
			{0, "k", 4, 0, 0}, {0, "k", 0, 1, 0}, {0, "k", 4, 0, 0}, {0, "k", 6, 3, 0}, {1_000_000, "k", 1, 0, 125_000},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stores, clock := settleStores(t)
			for name, st := range stores {
				t.Run(name, func(t *testing.T) {
					prefix := redistest.Prefix(t)
					ctx := context.Background()
					a, err := asAlgo(c.p)
					require.NoError(t, err)
					var grants []*settleGrant
					for i, o := range c.ops {
						clock.at(o.at)
						if o.settle > 0 {
							g := grants[o.settle-1]
							d := decision{granted: true, wait: g.d.wait, now: g.d.now, handle: g.d.handle}
							ok, err := st.charge(ctx, g.req, d, o.n, fmt.Sprint(i))
							require.NoError(t, err, "step %d", i)
							require.True(t, ok, "step %d", i)
							grants = append(grants, g)
							continue
						}
						req := request{prefix: prefix, one: Bucket{Key: o.key, Limit: a, N: o.n}, maxWait: maxSpan}
						d, err := st.reserve(ctx, req)
						require.NoError(t, err, "step %d", i)
						if o.wait < 0 {
							assert.False(t, d.granted, "step %d", i)
						} else {
							assert.True(t, d.granted, "step %d", i)
							assert.Equal(t, o.wait, d.wait, "step %d's wait", i)
						}
						grants = append(grants, &settleGrant{req: req, d: d})
					}
				})
			}
		})
	}
}

// Reservation.Settle: at most once per bucket, nothing after Cancel, Cancel
// nothing after it, one bucket of a call of two, clear refusals.
func TestSettleReservation(t *testing.T) {
	for name, st := range map[string]Store{
		"memory": NewMemoryStore(),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			tokens := Limit{Rate: 1000, Period: time.Hour, Burst: 1000} // no refill to speak of in a test
			requests := Limit{Rate: 10, Period: time.Hour, Burst: 10}
			r, err := lim.ReserveAll(ctx, []Bucket{{Key: "{api}:requests", Limit: requests, N: 1}, {Key: "{api}:tokens", Limit: tokens, N: 800}}, 0)
			require.NoError(t, err)
			require.ErrorIs(t, r.Settle(ctx, "{api}:other", 1), ErrInvalid)
			require.ErrorIs(t, r.Settle(ctx, "{api}:tokens", -1), ErrInvalid)
			require.NoError(t, r.Settle(ctx, "{api}:tokens", 100))
			require.NoError(t, r.Settle(ctx, "{api}:tokens", 0), "a second settle does nothing")
			s, err := lim.Peek(ctx, "{api}:tokens", tokens)
			require.NoError(t, err)
			assert.Equal(t, 900, s.Remaining, "700 back")
			s, err = lim.Peek(ctx, "{api}:requests", requests)
			require.NoError(t, err)
			assert.Equal(t, 9, s.Remaining, "the request bucket is not settled")

			// A settle after Cancel does nothing.
			r, err = lim.Reserve(ctx, "{api}:tokens", tokens, 901, time.Hour)
			require.NoError(t, err)
			require.Positive(t, r.Delay())
			require.NoError(t, r.Cancel(ctx))
			require.NoError(t, r.Settle(ctx, "{api}:tokens", 1000))
			s, err = lim.Peek(ctx, "{api}:tokens", tokens)
			require.NoError(t, err)
			assert.Equal(t, 900, s.Remaining, "cancelled, not settled")

			// A debt: the settled job does not wait, the next one does.
			r, err = lim.Reserve(ctx, "{api}:tokens", tokens, 100, 0)
			require.NoError(t, err)
			require.NoError(t, r.Settle(ctx, "{api}:tokens", 1500))
			require.NoError(t, r.Cancel(ctx), "Cancel after Settle does nothing")
			_, err = lim.Reserve(ctx, "{api}:tokens", tokens, 1, 0)
			var le *LimitedError
			require.ErrorAs(t, err, &le)
			assert.InDelta(t, float64(601*3600*time.Millisecond), float64(le.RetryAfter), float64(3600*time.Millisecond), "900 - 1500 = -600 tokens, the next waits for 601")
		})
	}
}

// Many goroutines reserve and settle at once: the grants at their settled
// costs never exceed the token bucket's bound, and what comes back is used
// at once: far more is reserved than the bound would allow at the estimates.
// With a wait budget the callers queue, settle after their slot and get back
// what their bookings have not refilled yet, less the queue behind them: the
// bound holds, and the figures are logged.
func TestSettleConcurrent(t *testing.T) {
	l := Limit{Rate: 2000, Burst: 40}
	for name, st := range map[string]Store{
		"memory": NewMemoryStore(),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t)),
	} {
		for _, budget := range []time.Duration{0, 20 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/%v", name, budget), func(t *testing.T) {
				ctx := context.Background()
				lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
				const n = 10
				var mu sync.Mutex
				var times []int64
				reserved := 0
				stop := time.Now().Add(400 * time.Millisecond)
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(w), 7))
						for time.Now().Before(stop) {
							r, err := lim.Reserve(ctx, "k", l, n, budget)
							var le *LimitedError
							if errors.As(err, &le) {
								time.Sleep(le.RetryAfter)
								continue
							}
							if !assert.NoError(t, err) || !assert.NoError(t, r.Wait(ctx)) {
								return
							}
							used := rng.IntN(n/2 + 1) // 0 to 5 of 10
							if !assert.NoError(t, r.Settle(ctx, "k", used)) {
								return
							}
							slot := r.Slot().UnixMicro()
							mu.Lock()
							reserved += n
							for range used {
								times = append(times, slot)
							}
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
				require.NotEmpty(t, times)
				checkTokenBucket(t, l, times)
				span := float64(times[len(times)-1]-times[0]) / 1e6
				bound := float64(l.Burst) + l.Rate*span
				t.Logf("%d reserved at estimates, %d used, bound %.0f over %.3f s", reserved, len(times), bound, span)
				if budget == 0 {
					assert.Greater(t, float64(reserved), 1.5*bound, "given-back tokens are granted again at once")
				}
			})
		}
	}
}

// An Adaptive bucket settles at the effective rate its reservation was
// taken at: 40 a second of a ceiling of 80, so T is 25 ms.
func TestSettleAdaptive(t *testing.T) {
	a := Adaptive{Ceiling: Limit{Rate: 80, Burst: 8}, Floor: 5}
	stores, clock := settleStores(t)
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock.at(0)
			lim := NewLimiter(st, WithKeyPrefix(redistest.Prefix(t)))
			_, err := lim.report(ctx, "k", a, answer{quota: 40})
			require.NoError(t, err)
			r, err := lim.Reserve(ctx, "k", a, 4, 0)
			require.NoError(t, err)
			require.Equal(t, 40.0, r.AdaptiveRate())
			burst := int(r.d.taken[0].burst)
			require.NoError(t, r.Settle(ctx, "k", 1))
			_, err = lim.Reserve(ctx, "k", a, burst-1, 0)
			require.NoError(t, err, "3 of 4 back")
			_, err = lim.Reserve(ctx, "k", a, 1, 0)
			var le *LimitedError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, 25*time.Millisecond, le.RetryAfter, "one T at the effective rate")
		})
	}
}
