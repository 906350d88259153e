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

// flightStores are a memory store and a RedisStore on one fake clock each.
func flightStores(t *testing.T) map[string]func(clk *fakeClock) *Limiter {
	return map[string]func(clk *fakeClock) *Limiter{
		"memory": func(clk *fakeClock) *Limiter { return NewLimiter(NewMemoryStore(WithClock(clk))) },
		"redis": func(clk *fakeClock) *Limiter {
			s := NewRedisStore(redistest.Shared(t).Client(t), WithClock(clk))
			t.Cleanup(func() { s.Close() })
			return NewLimiter(s, WithKeyPrefix(redistest.Prefix(t)))
		},
	}
}

// An automatic bound on either store: cold at its floor; each window of
// samples the fleet reports moves it once, by the law; Hold grants up to it,
// and Limiter.InFlight reads it with the slots held and the latencies.
func TestFlightBoundOnBothStores(t *testing.T) {
	for name, mk := range flightStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := newFakeClock()
			lim := mk(clk)
			c := Concurrency{Max: 10, Auto: true, Floor: 2, Interval: 100 * time.Millisecond, Lease: time.Minute}

			st, err := lim.InFlight(ctx, "api", c)
			require.NoError(t, err)
			assert.Equal(t, AdaptState{Rate: 2, Reason: flightCold, Bound: 2}, st, "cold, at the floor")

			a, err := lim.Hold(ctx, "api", c)
			require.NoError(t, err)
			b, err := lim.TryHold(ctx, "api", c)
			require.NoError(t, err)
			_, err = lim.TryHold(ctx, "api", c)
			var le *LimitedError
			require.ErrorAs(t, err, &le, "the floor binds: 2 slots")

			// Window 1, at 50 ms: the baseline. Reports within the window
			// do not close it.
			report := func(n int64, lat time.Duration) int {
				bound, err := lim.reportFlight(ctx, "api", c, flightOp{n: n, sum: n * int64(lat/time.Microsecond)})
				require.NoError(t, err)
				return bound
			}
			assert.Equal(t, 2, report(10, 50*time.Millisecond))
			clk.advance(50 * time.Millisecond)
			assert.Equal(t, 2, report(10, 50*time.Millisecond), "the window is not due")
			clk.advance(60 * time.Millisecond)
			assert.Equal(t, 2, report(1, 50*time.Millisecond), "the first window sets the baseline")
			st, err = lim.InFlight(ctx, "api", c)
			require.NoError(t, err)
			assert.Equal(t, 50*time.Millisecond, st.Baseline)
			assert.Equal(t, 2, st.Held)

			// Window 2, no queueing: slow start doubles the bound.
			report(20, 50*time.Millisecond)
			clk.advance(110 * time.Millisecond)
			assert.Equal(t, 4, report(1, 50*time.Millisecond))
			l3, err := lim.TryHold(ctx, "api", c)
			require.NoError(t, err, "4 slots now")
			l4, err := lim.TryHold(ctx, "api", c)
			require.NoError(t, err)
			_, err = lim.TryHold(ctx, "api", c)
			require.ErrorAs(t, err, &le)

			// Window 3: latency tripled, a queue twice what is served
			// (past what one stalled window could be): slow start ends, the
			// gradient (52.5/150, at least 0.5) makes 4·0.5 + 0.5 = 2.5, and
			// the limit moves halfway there, to 3.25.
			report(20, 150*time.Millisecond)
			clk.advance(110 * time.Millisecond)
			assert.Equal(t, 3, report(1, 150*time.Millisecond))
			st, err = lim.InFlight(ctx, "api", c)
			require.NoError(t, err)
			assert.Equal(t, flightGradient, st.Reason)
			assert.Equal(t, 4, st.Held, "held above the bound until released")
			assert.InDelta(t, float64(150*time.Millisecond), float64(st.Recent), float64(5*time.Millisecond))

			for _, l := range []*Lease{a, b, l3, l4} {
				require.NoError(t, l.Release(ctx))
			}
		})
	}
}

// Only one process claims a window, and a claimant that dies holding it
// (never commits) holds up the bound only until its claim lapses; its late
// commit is then refused.
func TestFlightClaims(t *testing.T) {
	for name, mk := range flightStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := newFakeClock()
			lim := mk(clk)
			fs := lim.store.(flightStore)
			pfx := lim.cfg.prefix
			op := func(tok string) flightOp {
				return flightOp{n: 10, sum: 10_000, interval: 100_000, token: tok, claimTTL: 2_000_000, ttlMillis: 60_000}
			}
			_, err := fs.flight(ctx, pfx, "k", op(""))
			require.NoError(t, err)
			clk.advance(100 * time.Millisecond)
			r1, err := fs.flight(ctx, pfx, "k", op("one"))
			require.NoError(t, err)
			r2, err := fs.flight(ctx, pfx, "k", op("two"))
			require.NoError(t, err)
			assert.True(t, r1.claimed, "the first report of a due window claims it")
			assert.Equal(t, int64(20), r1.win.n, "with the fleet's samples")
			assert.False(t, r2.claimed, "one claim per window")

			// "one" dies. The next window is due but the claim stands.
			clk.advance(time.Second)
			r3, err := fs.flight(ctx, pfx, "k", op("three"))
			require.NoError(t, err)
			assert.False(t, r3.claimed, "the claim stands for its term")
			clk.advance(time.Second)
			r4, err := fs.flight(ctx, pfx, "k", op("four"))
			require.NoError(t, err)
			assert.True(t, r4.claimed, "a lapsed claim is taken over")
			assert.Equal(t, int64(30), r4.win.n, "the samples since the lost window")

			ok, err := fs.flightCommit(ctx, pfx, "k", "one", flightState{limit: 99, bound: 99}, 60_000)
			require.NoError(t, err)
			assert.False(t, ok, "the dead claimant's commit is refused")
			ok, err = fs.flightCommit(ctx, pfx, "k", "four", flightState{limit: 7, bound: 7, why: flightGradient}, 60_000)
			require.NoError(t, err)
			assert.True(t, ok)
			r5, err := fs.flight(ctx, pfx, "k", flightOp{})
			require.NoError(t, err)
			assert.Equal(t, 7, r5.st.bound)
		})
	}
}

// A Hold waiting at the bound is woken when the bound rises, without a
// release: the commit wakes it as a release would.
func TestFlightRiseWakesAWaiter(t *testing.T) {
	for name, mk := range flightStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clk := newFakeClock()
			lim := mk(clk)
			c := Concurrency{Max: 10, Auto: true, Floor: 1, Interval: 100 * time.Millisecond, Lease: time.Minute}
			a, err := lim.Hold(ctx, "w", c)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := lim.Hold(wctx, "w", c)
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(200 * time.Millisecond) // it waits, subscribed
			select {
			case err := <-got:
				t.Fatalf("the Hold did not wait: %v", err)
			default:
			}
			for range 2 { // the baseline, then slow start: 1 → 2
				_, err = lim.reportFlight(ctx, "w", c, flightOp{n: 10, sum: 10_000})
				require.NoError(t, err)
				clk.advance(110 * time.Millisecond)
				_, err = lim.reportFlight(ctx, "w", c, flightOp{n: 1, sum: 1_000})
				require.NoError(t, err)
			}
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(3 * time.Second):
				t.Fatal("the waiting Hold was not woken by the rise")
			}
			require.NoError(t, a.Release(ctx))
		})
	}
}

// Leases report their samples when released: Observe's, or the time held.
// An overload answer is reported at once and lowers the bound.
func TestFlightLeasesReport(t *testing.T) {
	ctx := context.Background()
	lim := NewLimiter(NewMemoryStore())
	c := Concurrency{Max: 40, Auto: true, Floor: 1, Interval: 20 * time.Millisecond, Lease: time.Minute}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st, err := lim.InFlight(ctx, "r", c)
		require.NoError(t, err)
		if st.Bound >= 8 {
			break
		}
		// Fill the bound, as a busy fleet does, then release it all.
		var ls []*Lease
		for range st.Bound {
			l, err := lim.TryHold(ctx, "r", c)
			require.NoError(t, err)
			ls = append(ls, l)
		}
		time.Sleep(time.Millisecond)
		for _, l := range ls {
			l.Observe(5*time.Millisecond, false)
			require.NoError(t, l.Release(ctx))
		}
	}
	st, err := lim.InFlight(ctx, "r", c)
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.Bound, 8, "slow start on the released leases' samples: %+v", st)
	assert.InDelta(t, float64(5*time.Millisecond), float64(st.Baseline), 0.02*float64(5*time.Millisecond), "Observe's latency, to its 2 %% bucket")

	time.Sleep(25 * time.Millisecond) // the window is due
	l, err := lim.Hold(ctx, "r", c)
	require.NoError(t, err)
	l.Observe(time.Second, true)
	require.NoError(t, l.Release(ctx))
	after, err := lim.InFlight(ctx, "r", c)
	require.NoError(t, err)
	assert.Equal(t, flightOverload, after.Reason)
	assert.Equal(t, int(st.Rate*flightBeta), after.Bound)
}

// Bad automatic bounds are refused before any I/O, with ErrInvalid.
func TestFlightInvalid(t *testing.T) {
	ctx := context.Background()
	lim := NewLimiter(NewMemoryStore())
	for _, c := range []Concurrency{
		{Auto: true, Floor: -1},
		{Auto: true, Max: 5, Floor: 6},
		{Auto: true, Interval: time.Microsecond},
		{Auto: true, Interval: time.Hour},
		{Auto: true, Max: -3},
		{Max: 5, Floor: 2}, // a floor without Auto
	} {
		_, err := lim.Hold(ctx, "k", c)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", c)
		_, err = lim.InFlight(ctx, "k", c)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", c)
	}
	_, err := lim.InFlight(ctx, "k", Concurrency{Max: 5})
	assert.True(t, errors.Is(err, ErrInvalid), "InFlight of a fixed bound")
	assert.NoError(t, Concurrency{Auto: true}.Validate(), "auto alone: floor 1, ceiling 1000")
	assert.Equal(t, autoCeiling, Concurrency{Auto: true}.ceiling())
}

// On a Redis Cluster an automatic bound lives beside its semaphore, in its
// name's slot: Hold, the reports and InFlight work for names with a hash
// tag of their own and without one.
func TestFlightRedisCluster(t *testing.T) {
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
	c := Concurrency{Max: 10, Auto: true, Floor: 1, Interval: 10 * time.Millisecond, Lease: time.Minute}
	for _, name := range []string{"{acct1}:db", "{acct2}:db", "plain", "other"} {
		for round := 0; round < 50; round++ {
			st, err := lim.InFlight(ctx, name, c)
			require.NoError(t, err, name)
			if st.Bound >= 2 {
				break
			}
			l, err := lim.Hold(ctx, name, c)
			require.NoError(t, err, name)
			l.Observe(time.Millisecond, false)
			require.NoError(t, l.Release(ctx), name)
			time.Sleep(5 * time.Millisecond)
		}
		st, err := lim.InFlight(ctx, name, c)
		require.NoError(t, err, name)
		assert.GreaterOrEqual(t, st.Bound, 2, "%s: slow start on a cluster: %+v", name, st)
		key := flightKey(prefix, name)
		n, err := cl.Master(t, key).Client(t).Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "%s is on its slot's master", key)
		assert.Equal(t, hashTag(semKey(prefix, name)), hashTag(key), "beside the semaphore")
	}
}

// Under FailLocal an automatic bound's Hold takes this host's share of the
// bound the Limiter last read (the floor if it read none), in its local
// store, and its leases report nothing to the store that is down.
func TestFlightFailLocal(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	srv.Kill(t)
	ctx := context.Background()
	c := Concurrency{Max: 40, Auto: true, Floor: 4, Lease: time.Minute}
	for _, tc := range []struct {
		read, want int // the bound last read (0: none), the slots held here
	}{{0, 2}, {16, 8}} {
		local := NewLimiter(NewRedisStore(rdb), WithFailurePolicy(FailLocal), WithHosts(fixedHosts(2)))
		if tc.read > 0 {
			local.flights.keys = map[string]*flightPend{"k": {bound: tc.read}}
		}
		var leases []*Lease
		for i := range tc.want {
			l, err := local.TryHold(ctx, "k", c)
			require.NoError(t, err, "bound read %d: slot %d of this host's %d", tc.read, i, tc.want)
			leases = append(leases, l)
		}
		_, err := local.TryHold(ctx, "k", c)
		assert.ErrorIs(t, err, ErrLimited, "bound read %d: %d here", tc.read, tc.want)
		for _, l := range leases {
			l.Observe(time.Millisecond, false)
			require.NoError(t, l.Release(ctx))
		}
		local.flights.mu.Lock()
		p := local.flights.keys["k"]
		local.flights.mu.Unlock()
		assert.True(t, p == nil || p.n == 0, "no sample booked for the store that is down")
	}
}
