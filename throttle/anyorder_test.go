package throttle

import (
	"context"
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

// onePolicyEach is one policy of each kind, each granting one unit per 10 ms
// once its first unit is taken, so the same steps drive them all.
var onePolicyEach = policiesPer(10 * time.Millisecond)

// policiesPer is one policy of each kind granting one unit per unit of time.
func policiesPer(unit time.Duration) []Policy {
	return []Policy{
		Limit{Rate: 1, Period: unit, Burst: 1},
		LeakyBucket{Rate: 1, Period: unit, Capacity: 64},
		FixedWindow{Max: 1, Window: unit},
		SlidingLog{Max: 1, Window: unit},
		SlidingWindow{Max: 1, Window: unit, Slots: 1},
	}
}

// storesOnClock are the three stores the conformance table runs on, timed by
// clock: memory, a real redis-server and miniredis.
func storesOnClock(t *testing.T, clock clock) map[string]Store {
	t.Helper()
	_, mini := miniredisClient(t)
	return map[string]Store{
		"memory":    NewMemoryStore(WithClock(clock)),
		"redis":     NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
		"miniredis": NewRedisStore(mini, WithClock(clock)),
	}
}

// Reservations cancelled at once, from many goroutines, in whatever order the
// store sees them: their turns go to the next callers, exactly those turns,
// for every policy on every store (issue #9's promise: refunds in any order).
func TestConcurrentCancelsGiveEveryTurnBack(t *testing.T) {
	const booked = 16
	// Cancel does nothing once a slot has come on this process's clock, so the
	// first slot must stay ahead while the test runs, however slow (-race).
	for seed := uint64(1); seed <= 4; seed++ {
		for _, p := range policiesPer(time.Second) {
			clock := newFakeClock()
			for name, store := range storesOnClock(t, clock) {
				t.Run(fmt.Sprintf("%d/%T/%s", seed, p, name), func(t *testing.T) {
					ctx := context.Background()
					// Sixteen refunds at once reach miniredis's one lock under -race
					// on a loaded machine: give them time, this test is not about it.
					lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)), withClock(clock), withRefundTimeout(10*time.Second))
					var rs []*Reservation
					for range booked + 1 {
						r, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
						require.NoError(t, err)
						rs = append(rs, r)
					}
					rs = rs[1:] // the first was granted at once: nothing to give back
					rng := rand.New(rand.NewPCG(seed, 9))
					var gone []int64
					var wg sync.WaitGroup
					for i, r := range rs {
						if rng.IntN(2) == 0 && i != len(rs)-1 && seed%2 == 0 {
							continue // even seeds keep some, the newest always cancelled
						}
						gone = append(gone, r.d.slot())
						wg.Add(1)
						go func() {
							defer wg.Done()
							assert.NoError(t, r.Cancel(ctx))
						}()
					}
					wg.Wait()
					var got []int64
					for range gone {
						r, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
						require.NoError(t, err)
						got = append(got, r.d.slot())
					}
					sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
					assert.Equal(t, gone, got, "the next callers have exactly the cancelled turns")
				})
			}
		}
	}
}

// A cooldown holds a bucket of any policy on every store: nothing is granted
// before it ends, CooldownLeft and Peek see it, and at its end the bucket grants.
func TestCooldownEveryPolicy(t *testing.T) {
	for _, p := range onePolicyEach {
		clock := newFakeClock()
		for name, store := range storesOnClock(t, clock) {
			t.Run(fmt.Sprintf("%T/%s", p, name), func(t *testing.T) {
				ctx := context.Background()
				lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)), withClock(clock))
				// A turn booked before the cooldown keeps its place; the cooldown voids a hole.
				_, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
				require.NoError(t, err)
				r, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
				require.NoError(t, err)
				_, err = lim.Reserve(ctx, "k", p, 1, time.Hour)
				require.NoError(t, err)
				require.NoError(t, r.Cancel(ctx)) // a hole at 10 ms

				next, err := lim.Cooldown(ctx, "k", p, 2*time.Second)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, next, 2*time.Second, "next grant")
				left, err := lim.CooldownLeft(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, 2*time.Second, left, "CooldownLeft")
				st, err := lim.Peek(ctx, "k", p)
				require.NoError(t, err)
				assert.Equal(t, 2*time.Second, st.Cooldown, "Peek's Cooldown")
				assert.GreaterOrEqual(t, st.NextFree, 2*time.Second, "Peek's NextFree")

				clock.advance(time.Second)
				res, err := lim.TryAcquire(ctx, "k", p, 1)
				require.NoError(t, err)
				assert.False(t, res.Allowed, "within the cooldown")
				assert.GreaterOrEqual(t, res.RetryAfter, time.Second, "RetryAfter runs to its end")

				clock.advance(time.Second)
				res, err = lim.TryAcquire(ctx, "k", p, 1)
				require.NoError(t, err)
				assert.True(t, res.Allowed, "at its end")
			})
		}
	}
}

// Peek reads a bucket of any policy without taking anything; Reset empties it.
func TestPeekAndResetEveryPolicy(t *testing.T) {
	for _, p := range onePolicyEach {
		clock := newFakeClock()
		for name, store := range storesOnClock(t, clock) {
			t.Run(fmt.Sprintf("%T/%s", p, name), func(t *testing.T) {
				ctx := context.Background()
				lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)), withClock(clock))
				most, _ := p.quota()
				st, err := lim.Peek(ctx, "k", p)
				require.NoError(t, err)
				assert.Equal(t, State{Remaining: most}, st, "a new bucket")

				for range 3 {
					_, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
					require.NoError(t, err)
				}
				st, err = lim.Peek(ctx, "k", p)
				require.NoError(t, err)
				again, err := lim.Peek(ctx, "k", p)
				require.NoError(t, err)
				assert.Equal(t, st, again, "Peek takes nothing")
				assert.Equal(t, max(0, most-3), st.Remaining, "after three takes")
				assert.Positive(t, st.ResetAfter)
				assert.Zero(t, st.Cooldown)
				r, err := lim.Reserve(ctx, "k", p, 1, time.Hour)
				require.NoError(t, err)
				assert.Positive(t, st.NextFree)
				assert.Equal(t, st.NextFree, micros(r.d.wait), "Peek's NextFree is the wait the next caller gets")

				require.NoError(t, lim.Reset(ctx, "k", p))
				st, err = lim.Peek(ctx, "k", p)
				require.NoError(t, err)
				assert.Equal(t, State{Remaining: most}, st, "reset: as new")
				res, err := lim.TryAcquire(ctx, "k", p, 1)
				require.NoError(t, err)
				assert.True(t, res.Allowed, "granted at once after Reset")
			})
		}
	}
}
