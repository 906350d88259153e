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

var adaptive80 = Adaptive{Ceiling: Limit{Rate: 80, Period: time.Second, Burst: 8}, Floor: 5}

// The law, step by step, on every store: one decrease per overload episode,
// to what the successes since the last change show the upstream allowed;
// additive recovery toward the ceiling; an announced quota adopted up to the
// ceiling; never below the floor.
func TestAdaptiveLaw(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			key := "api"
			l, st, err := lim.AdaptiveLimit(ctx, key, adaptive80)
			require.NoError(t, err)
			assert.Equal(t, adaptive80.Ceiling, l, "untouched: the ceiling")
			assert.Equal(t, "ceiling", st.Reason)

			// 50 successes over the first second, then a 429: the upstream
			// let 50/s through, so the rate drops under that, not just ×0.7.
			_, err = lim.Report(ctx, key, adaptive80, Answer{Succeeded: 1})
			require.NoError(t, err)
			clock.at(1_000_000)
			_, err = lim.Report(ctx, key, adaptive80, Answer{Succeeded: 49})
			require.NoError(t, err)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 47.5, st.Rate, 0.01, "0.95 × 50/s measured")
			assert.Equal(t, "429", st.Reason)
			l, _, err = lim.AdaptiveLimit(ctx, key, adaptive80)
			require.NoError(t, err)
			assert.InDelta(t, 47.5, l.Rate, 0.01)
			assert.Equal(t, 4, l.Burst, "the burst scales with the rate")

			// More refusals in the same episode (other processes saw the same
			// overload): no further decrease.
			clock.at(1_500_000)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 47.5, st.Rate, 0.01, "one decrease per episode")

			// After the episode, a refusal with no successes to measure: ×0.7.
			clock.at(2_100_000)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 33.25, st.Rate, 0.01)

			// Successes for 3 s: +5 % of the ceiling (4/s) per second.
			clock.at(5_100_000)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Succeeded: 10})
			require.NoError(t, err)
			assert.InDelta(t, 45.25, st.Rate, 0.01)
			assert.Equal(t, "recovery", st.Reason)
			clock.at(20_000_000)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Succeeded: 1})
			require.NoError(t, err)
			assert.InDelta(t, 80, st.Rate, 0.01, "back to the ceiling, never above")

			// An announced quota is adopted, up to the ceiling; it does not
			// drift up by itself.
			st, err = lim.Report(ctx, key, adaptive80, Answer{Quota: 50})
			require.NoError(t, err)
			assert.InDelta(t, 50, st.Rate, 0.01)
			assert.Equal(t, "header", st.Reason)
			clock.at(30_000_000)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Succeeded: 100})
			require.NoError(t, err)
			assert.InDelta(t, 50, st.Rate, 0.01)
			st, err = lim.Report(ctx, key, adaptive80, Answer{Quota: 500})
			require.NoError(t, err)
			assert.InDelta(t, 80, st.Rate, 0.01, "capped at the ceiling")

			// Never below the floor.
			for i := range 20 {
				clock.at(40_000_000 + int64(i)*2_000_000)
				st, err = lim.Report(ctx, key, adaptive80, Answer{Refused: true})
				require.NoError(t, err)
			}
			assert.InDelta(t, 5, st.Rate, 0.01)
		})
	}
}

// The Lua law and the Go law agree on random sequences of answers.
func TestAdaptiveLockstep(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	stores := storesOnClock(t, clock)
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		prefix := fmt.Sprintf("%s%d:", redistest.Prefix(t), seed)
		lims := map[string]*Limiter{}
		for name, s := range stores {
			lims[name] = NewLimiter(s, WithKeyPrefix(prefix))
		}
		now := int64(0)
		for step := range 200 {
			now += rng.Int64N(700_000)
			clock.at(now)
			ans := Answer{}
			switch rng.IntN(4) {
			case 0:
				ans.Refused = true
			case 1:
				ans.Quota = float64(rng.IntN(120))
			default:
				ans.Succeeded = 1 + rng.IntN(40)
			}
			var want *AdaptState
			for name, lim := range lims {
				st, err := lim.Report(ctx, "k", adaptive80, ans)
				require.NoError(t, err)
				if want == nil {
					want = &st
					continue
				}
				assert.InDelta(t, want.Rate, st.Rate, 1e-6, "seed %d step %d %s: %+v", seed, step, name, ans)
				assert.Equal(t, want.Reason, st.Reason, "seed %d step %d %s", seed, step, name)
			}
		}
	}
}

func TestAdaptiveInvalid(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	_, _, err := lim.AdaptiveLimit(context.Background(), "k", Adaptive{Ceiling: Limit{Rate: 10, Period: time.Second, Burst: 1}, Floor: 20})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = lim.Report(context.Background(), "", adaptive80, Answer{Refused: true})
	assert.ErrorIs(t, err, ErrInvalid)
}
