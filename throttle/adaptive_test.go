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
			l, st, err := lim.readAdaptive(ctx, key, adaptive80)
			require.NoError(t, err)
			assert.Equal(t, adaptive80.Ceiling, l, "untouched: the ceiling")
			assert.Equal(t, "cold", st.Reason, "no answer yet")

			// 50 successes over the first second, then a 429: the upstream
			// let 50/s through, so the rate drops under that, not just ×0.7.
			_, err = lim.report(ctx, key, adaptive80, answer{succeeded: 1})
			require.NoError(t, err)
			clock.at(1_000_000)
			_, err = lim.report(ctx, key, adaptive80, answer{succeeded: 49})
			require.NoError(t, err)
			st, err = lim.report(ctx, key, adaptive80, answer{refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 44.1, st.Rate, 0.01, "0.9 × the 49/s measured from the first success on")
			assert.Equal(t, "429", st.Reason)
			l, _, err = lim.readAdaptive(ctx, key, adaptive80)
			require.NoError(t, err)
			assert.InDelta(t, 44.1, l.Rate, 0.01)
			assert.Equal(t, 4, l.Burst, "the burst scales with the rate")

			// More refusals in the same episode (other processes saw the same
			// overload): no further decrease.
			clock.at(1_500_000)
			st, err = lim.report(ctx, key, adaptive80, answer{refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 44.1, st.Rate, 0.01, "one decrease per episode")

			// After the episode, a refusal with no successes to measure: ×0.6,
			// and that rate is the reference to probe from.
			clock.at(2_100_000)
			st, err = lim.report(ctx, key, adaptive80, answer{refused: true})
			require.NoError(t, err)
			assert.InDelta(t, 26.46, st.Rate, 0.01)

			// No climb within 2 s of a decrease.
			clock.at(4_000_000)
			st, err = lim.report(ctx, key, adaptive80, answer{succeeded: 10})
			require.NoError(t, err)
			assert.InDelta(t, 26.46, st.Rate, 0.01, "quiet after a decrease")

			// Then, per second since the decrease: +0.5 % of the ceiling (0.4/s)
			// near the reference.
			clock.at(5_100_000)
			st, err = lim.report(ctx, key, adaptive80, answer{succeeded: 10})
			require.NoError(t, err)
			assert.InDelta(t, 27.66, st.Rate, 0.01, "+0.4 three times")
			assert.Equal(t, "recovery", st.Reason)
			clock.at(200_000_000)
			st, err = lim.report(ctx, key, adaptive80, answer{succeeded: 1})
			require.NoError(t, err)
			assert.InDelta(t, 80, st.Rate, 0.01, "back to the ceiling, never above")
			assert.Equal(t, "ceiling", st.Reason, "and following it again")

			// An announced quota is adopted, up to the ceiling; it does not
			// drift up by itself.
			st, err = lim.report(ctx, key, adaptive80, answer{quota: 50})
			require.NoError(t, err)
			assert.InDelta(t, 50, st.Rate, 0.01)
			assert.Equal(t, "header", st.Reason)
			clock.at(230_000_000)
			st, err = lim.report(ctx, key, adaptive80, answer{succeeded: 100})
			require.NoError(t, err)
			assert.InDelta(t, 50, st.Rate, 0.01)
			st, err = lim.report(ctx, key, adaptive80, answer{quota: 500})
			require.NoError(t, err)
			assert.InDelta(t, 80, st.Rate, 0.01, "capped at the ceiling")

			// A lower rate announced within a second of the last one is the
			// same quota read through its rounding: the higher stands; after
			// the second it is taken.
			clock.at(230_500_000)
			st, err = lim.report(ctx, key, adaptive80, answer{quota: 60})
			require.NoError(t, err)
			assert.InDelta(t, 80, st.Rate, 0.01, "a lower announcement within the hold")
			clock.at(231_100_000)
			st, err = lim.report(ctx, key, adaptive80, answer{quota: 60})
			require.NoError(t, err)
			assert.InDelta(t, 60, st.Rate, 0.01, "after it")

			// Never below the floor.
			for i := range 20 {
				clock.at(240_000_000 + int64(i)*2_000_000)
				st, err = lim.report(ctx, key, adaptive80, answer{refused: true})
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
			ans := answer{}
			switch rng.IntN(4) {
			case 0:
				ans.refused = true
			case 1:
				ans.quota = float64(rng.IntN(120))
			default:
				ans.succeeded = 1 + rng.IntN(40)
			}
			var want *AdaptState
			for name, lim := range lims {
				st, err := lim.report(ctx, "k", adaptive80, ans)
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
	_, _, err := lim.readAdaptive(context.Background(), "k", Adaptive{Ceiling: Limit{Rate: 10, Period: time.Second, Burst: 1}, Floor: 20})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = lim.report(context.Background(), "", adaptive80, answer{refused: true})
	assert.ErrorIs(t, err, ErrInvalid)
}

// After a measured refusal the rate climbs fast (×1.25 a second) back to 80 %
// of the rate that failed: an upstream whose limit rose again is found again
// in seconds, then probed slowly.
func TestAdaptiveRecoversFast(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	clock.at(0)
	_, err := lim.report(ctx, "k", adaptive80, answer{succeeded: 1})
	require.NoError(t, err)
	clock.at(1_000_000)
	_, err = lim.report(ctx, "k", adaptive80, answer{succeeded: 20})
	require.NoError(t, err)
	st, err := lim.report(ctx, "k", adaptive80, answer{refused: true})
	require.NoError(t, err)
	assert.InDelta(t, 18, st.Rate, 0.01, "0.9 × 20/s measured")
	clock.at(6_000_000) // 5 s later: ×1.25 per second, up to 0.8 × 80
	st, err = lim.report(ctx, "k", adaptive80, answer{succeeded: 1})
	require.NoError(t, err)
	assert.InDelta(t, 18*1.25*1.25*1.25*1.25*1.25, st.Rate, 0.01)
}

// A bucket at its ceiling follows the ceiling when the limit is changed
// (sluice set / unset), up or down.
func TestAdaptiveFollowsTheCeiling(t *testing.T) {
	ctx := context.Background()
	lim := NewLimiter(NewMemoryStore())
	_, err := lim.report(ctx, "k", Adaptive{Ceiling: Limit{Rate: 20, Period: time.Second, Burst: 2}}, answer{succeeded: 5})
	require.NoError(t, err)
	l, st, err := lim.readAdaptive(ctx, "k", adaptive80)
	require.NoError(t, err)
	assert.Equal(t, adaptive80.Ceiling, l)
	assert.Equal(t, "ceiling", st.Reason)
}

// A bucket is cold until its upstream first answers: a read says so and
// stores nothing, the first answer of any kind ends it (a success stores the
// ceiling, a refusal lowers it blind, an announcement sets it), and a state
// forgotten after idling is cold again.
func TestAdaptiveCold(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			for i, c := range []struct {
				ans  answer
				rate float64
				why  string
			}{
				{answer{succeeded: 1}, 80, "ceiling"},
				{answer{refused: true}, 48, "429"},
				{answer{quota: 50}, 50, "header"},
			} {
				key := fmt.Sprintf("api%d", i)
				_, st, err := lim.readAdaptive(ctx, key, adaptive80)
				require.NoError(t, err)
				assert.Equal(t, "cold", st.Reason, "step %d: before any answer", i)
				_, st, err = lim.readAdaptive(ctx, key, adaptive80)
				require.NoError(t, err)
				assert.Equal(t, "cold", st.Reason, "step %d: a read stores nothing", i)
				st, err = lim.report(ctx, key, adaptive80, c.ans)
				require.NoError(t, err)
				assert.InDelta(t, c.rate, st.Rate, 0.01, "step %d", i)
				assert.Equal(t, c.why, st.Reason, "step %d: answered", i)
				_, st, err = lim.readAdaptive(ctx, key, adaptive80)
				require.NoError(t, err)
				assert.Equal(t, c.why, st.Reason, "step %d: kept", i)
			}
			if name != "memory" {
				return // Redis expires keys on its own clock
			}
			clock.at(adaptTTL.Microseconds() + 2_000_000)
			_, st, err := lim.readAdaptive(ctx, "api0", adaptive80)
			require.NoError(t, err)
			assert.Equal(t, "cold", st.Reason, "forgotten after idling")
		})
	}
}

// A Limiter never answers a cold reading from its copy, and reports the
// first success under a cold reading at once rather than in a batch.
func TestAdaptiveColdNotCached(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := NewMemoryStore(WithClock(clock))
	lim := NewLimiter(store)
	other := NewLimiter(store)
	_, st, err := lim.AdaptiveLimit(ctx, "api", adaptive80)
	require.NoError(t, err)
	assert.Equal(t, "cold", st.Reason)
	require.NoError(t, other.Succeeded(ctx, "api", adaptive80), "not cold to other: batched")
	_, st, err = lim.AdaptiveLimit(ctx, "api", adaptive80)
	require.NoError(t, err)
	assert.Equal(t, "cold", st.Reason, "other's success is still in its batch")
	require.NoError(t, lim.Succeeded(ctx, "api", adaptive80))
	_, st, err = other.AdaptiveLimit(ctx, "api", adaptive80)
	require.NoError(t, err)
	assert.Equal(t, "ceiling", st.Reason, "lim's success under a cold reading went at once")
	_, st, err = lim.AdaptiveLimit(ctx, "api", adaptive80)
	require.NoError(t, err)
	assert.Equal(t, "ceiling", st.Reason, "and lim reads it anew")
}

// Refused says lowered only for the refusal that lowered the rate (or a
// rate lower than the Limiter last read): the other refusals of the
// episode, by processes that had not read the bucket, are not decreases,
// and the pool does not re-plan its waiting jobs for each of them.
func TestAdaptiveRefusedLoweredOncePerEpisode(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			prefix := WithKeyPrefix(redistest.Prefix(t))
			procs := []*Limiter{NewLimiter(store, prefix), NewLimiter(store, prefix), NewLimiter(store, prefix)}
			st, lowered, err := procs[0].Refused(ctx, "api", adaptive80)
			require.NoError(t, err)
			assert.True(t, lowered, "the first refusal lowers")
			assert.InDelta(t, 48.0, st.Rate, 1e-9)
			for i, l := range procs[1:] {
				clock.at(int64(100_000 * (i + 1)))
				st, lowered, err = l.Refused(ctx, "api", adaptive80)
				require.NoError(t, err)
				assert.False(t, lowered, "step %d: the same episode", i)
				assert.InDelta(t, 48.0, st.Rate, 1e-9, "step %d", i)
			}
			clock.at(1_200_000)
			st, lowered, err = procs[2].Refused(ctx, "api", adaptive80)
			require.NoError(t, err)
			assert.True(t, lowered, "the next episode lowers again")
			assert.InDelta(t, 28.8, st.Rate, 1e-9)
		})
	}
}

// An announced rate confirmed by a later answer (the same rate, or one
// within 5 % under it) holds against the lower readings of the same quota
// for a hold from the confirmation, not from the first announcement: a
// Limiter reports a confirmation once the standing rate is a quarter of a
// hold old. (Before, each Limiter skipped every
// confirmation, and the first lower reading a hold after the first
// announcement set the rate: OpenAI-style fields, whose readings range
// from two thirds of the real rate to it, gave a rate that sagged each
// second.)
func TestAdaptiveAnnouncedConfirmationHolds(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	for name, store := range storesOnClock(t, clock) {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
			_, _, err := lim.Announced(ctx, "api", adaptive80, 50)
			require.NoError(t, err)
			clock.at(300_000)
			_, st, err := lim.AdaptiveLimit(ctx, "api", adaptive80) // read: the rate stood 300 ms
			require.NoError(t, err)
			require.Equal(t, "header", st.Reason)
			_, _, err = lim.Announced(ctx, "api", adaptive80, 50) // the confirmation is reported
			require.NoError(t, err)
			clock.at(1_000_000) // a reading within 5 % under it confirms it too
			st, _, err = lim.Announced(ctx, "api", adaptive80, 48)
			require.NoError(t, err)
			assert.InDelta(t, 50.0, st.Rate, 1e-9, "confirmed, not lowered")
			clock.at(1_900_000) // a hold after the first, not after the confirmations
			st, _, err = lim.Announced(ctx, "api", adaptive80, 38)
			require.NoError(t, err)
			assert.InDelta(t, 50.0, st.Rate, 1e-9, "a lower reading within a hold of the confirmation")
			clock.at(2_100_000)
			st, _, err = lim.Announced(ctx, "api", adaptive80, 38)
			require.NoError(t, err)
			assert.InDelta(t, 38.0, st.Rate, 1e-9, "after it, the lower rate")
		})
	}
}
