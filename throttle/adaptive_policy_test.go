package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// An Adaptive bucket grants at the effective rate the store holds at the
// moment of the call, whoever set it, with the burst scaled to it: exactly
// what a plain Limit at that rate and burst grants.
func TestAdaptivePolicyTakesTheEffectiveRate(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			// Another process learned 40/s (an announced quota).
			_, err := lim.report(ctx, "api", adaptive80, answer{quota: 40})
			require.NoError(t, err)
			twin := Limit{Rate: 40, Period: time.Second, Burst: 4}
			for i := range 6 {
				got, err := lim.TryAcquire(ctx, "api", adaptive80, 1)
				require.NoError(t, err)
				want, err := lim.TryAcquire(ctx, "twin", twin, 1)
				require.NoError(t, err)
				assert.Equal(t, want, got, "call %d", i)
			}
			got, err := lim.Peek(ctx, "api", adaptive80)
			require.NoError(t, err)
			want, err := lim.Peek(ctx, "twin", twin)
			require.NoError(t, err)
			assert.Equal(t, want, got)

			// Back at the ceiling, the ceiling's T and burst again.
			clock.at(10_000_000)
			_, err = lim.report(ctx, "api", adaptive80, answer{quota: 500})
			require.NoError(t, err)
			for i := range 9 {
				r, err := lim.TryAcquire(ctx, "api", adaptive80, 1)
				require.NoError(t, err)
				assert.Equal(t, i < 8, r.Allowed, "call %d: burst 8 at the ceiling", i)
			}
		})
	}
}

// A reservation cancelled after the effective rate moved gives back what it
// took, at the rate it took it: the bucket is as if it had never been made.
func TestAdaptivePolicyRefundsAtTheRateTaken(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	perMinute := Adaptive{Ceiling: Limit{Rate: 80, Period: time.Minute, Burst: 8}}
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			for _, key := range []string{"api", "twin"} {
				_, err := lim.report(ctx, key, perMinute, answer{quota: 40}) // T 1.5 s, burst 4
				require.NoError(t, err)
				for range 4 {
					_, err := lim.Reserve(ctx, key, perMinute, 1, time.Hour)
					require.NoError(t, err)
				}
			}
			r, err := lim.Reserve(ctx, "api", perMinute, 1, time.Hour)
			require.NoError(t, err)
			assert.InDelta(t, 40, r.AdaptiveRate(), 1e-9)
			assert.Greater(t, r.Delay(), time.Second, "the fifth waits a turn of 1.5 s")

			_, err = lim.report(ctx, "api", perMinute, answer{quota: 20}) // T 3 s now
			require.NoError(t, err)
			require.NoError(t, r.Cancel(ctx))

			at40 := Limit{Rate: 40, Period: time.Minute, Burst: 4}
			got, err := lim.Peek(ctx, "api", at40)
			require.NoError(t, err)
			want, err := lim.Peek(ctx, "twin", at40)
			require.NoError(t, err)
			assert.Equal(t, want, got, "the refund rolled the booking back, as if it had not been made")
		})
	}
}

// The Lua and the Go stores agree on an Adaptive bucket's grants while its
// rate moves at random.
func TestAdaptivePolicyLockstep(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	stores := storesOnClock(t, clock)
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		prefix := fmt.Sprintf("%s%d:", redistest.Prefix(t), seed)
		lims := map[string]*Limiter{}
		for name, s := range stores {
			lims[name] = NewLimiter(s, WithKeyPrefix(prefix))
		}
		now := int64(0)
		for step := range 300 {
			now += rng.Int64N(60_000)
			clock.at(now)
			ans, n := answer{}, 1+rng.IntN(3)
			switch rng.IntN(6) {
			case 0:
				ans.refused = true
			case 1:
				ans.quota = float64(1 + rng.IntN(120))
			case 2:
				ans.succeeded = 1 + rng.IntN(40)
			}
			var want *Result
			for name, lim := range lims {
				if ans != (answer{}) {
					_, err := lim.report(ctx, "k", adaptive80, ans)
					require.NoError(t, err)
				}
				got, err := lim.TryAcquire(ctx, "k", adaptive80, n)
				require.NoError(t, err)
				if want == nil {
					want = &got
					continue
				}
				assert.Equal(t, *want, got, "seed %d step %d %s", seed, step, name)
			}
		}
	}
}

func TestAdaptivePolicyInvalid(t *testing.T) {
	ctx := context.Background()
	lim := NewLimiter(NewMemoryStore())
	err := lim.Acquire(ctx, "k", adaptive80, 9)
	assert.ErrorIs(t, err, ErrTooLarge)
	err = lim.Acquire(ctx, "k", Adaptive{Ceiling: Limit{Rate: 10, Burst: 1}, Floor: 20}, 1)
	assert.ErrorIs(t, err, ErrInvalid)
	r, err := lim.Reserve(ctx, "plain", adaptive80.Ceiling, 1, 0)
	require.NoError(t, err)
	assert.Zero(t, r.AdaptiveRate(), "no adaptive bucket")
}

// A call may take from several Adaptive buckets (an LLM API's requests and
// tokens, each with the rate its upstream announced): each is taken at its
// own effective rate, as plain Limits at those rates would be, all or
// nothing, and a cancel gives each back what it took at its rate.
func TestAdaptivePolicyTwoBuckets(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	tokens := Adaptive{Ceiling: Limit{Rate: 1000, Period: time.Second, Burst: 100}}
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			_, err := lim.report(ctx, "{llm}:requests", adaptive80, answer{quota: 40})
			require.NoError(t, err)
			_, err = lim.report(ctx, "{llm}:tokens", tokens, answer{quota: 500})
			require.NoError(t, err)
			call := []Bucket{{Key: "{llm}:requests", Limit: adaptive80}, {Key: "{llm}:tokens", Limit: tokens, N: 10}}
			twins := []Bucket{{Key: "{twin}:requests", Limit: Limit{Rate: 40, Period: time.Second, Burst: 4}},
				{Key: "{twin}:tokens", Limit: Limit{Rate: 500, Period: time.Second, Burst: 50}, N: 10}}
			for i := range 7 {
				got, err := lim.TryAcquireAll(ctx, call)
				require.NoError(t, err)
				want, err := lim.TryAcquireAll(ctx, twins)
				require.NoError(t, err)
				assert.Equal(t, want, got, "call %d", i)
			}
			// A call that waits for its turn, cancelled after both rates
			// moved: each bucket is as if it had never been made.
			r, err := lim.ReserveAll(ctx, call, time.Second)
			require.NoError(t, err)
			assert.InDelta(t, 40.0, r.AdaptiveRate(), 1e-9, "the first adaptive bucket's rate")
			assert.Greater(t, r.Delay(), time.Duration(0), "it waits")
			_, err = lim.report(ctx, "{llm}:requests", adaptive80, answer{quota: 20})
			require.NoError(t, err)
			_, err = lim.report(ctx, "{llm}:tokens", tokens, answer{quota: 250})
			require.NoError(t, err)
			require.NoError(t, r.Cancel(ctx))
			for i, key := range []string{"requests", "tokens"} {
				got, err := lim.Peek(ctx, "{llm}:"+key, twins[i].Limit)
				require.NoError(t, err)
				want, err := lim.Peek(ctx, "{twin}:"+key, twins[i].Limit)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s given back at the rate it was taken", key)
			}
		})
	}
}
