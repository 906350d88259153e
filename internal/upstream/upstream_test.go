package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// TestTarget: a rate said is announced (per the ceiling's period); a
// capacity under the configured burst is announced as the rate at which the
// ceiling's shape holds it; a capacity at or above the burst says nothing;
// an announced rate stands against a capacity; a rate already under the
// capacity (refusals) is kept.
func TestTarget(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	lim := throttle.NewLimiter(throttle.NewMemoryStore(throttle.WithClock(clk)))
	a := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}}
	perMinute := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 100}}

	check := func(name, key string, a throttle.Adaptive, q backoff.Quota, want float64, wantAnnounce bool) {
		t.Helper()
		rate, announce, err := Target(ctx, lim, key, a, q)
		require.NoError(t, err, name)
		assert.InDelta(t, want, rate, 1e-9, name)
		assert.Equal(t, wantAnnounce, announce, name)
	}
	check("a rate said", "a", a, backoff.Quota{Rate: 50, Limit: 5}, 50, true)
	check("a rate said, per minute", "m", perMinute, backoff.Quota{Rate: 10}, 600, true)
	check("a capacity", "b", a, backoff.Quota{Limit: 5}, 50, true)
	check("a capacity per minute", "m", perMinute, backoff.Quota{Limit: 50}, 1500, true)
	check("a capacity at the burst", "b", a, backoff.Quota{Limit: 20}, 0, false)
	check("a capacity over it", "b", a, backoff.Quota{Limit: 40, Remaining: 39}, 0, false)
	check("nothing said", "b", a, backoff.Quota{Remaining: 3}, 0, false)

	_, _, err := lim.Announced(ctx, "c", a, 30)
	require.NoError(t, err)
	check("an announced rate stands against a capacity", "c", a, backoff.Quota{Limit: 5}, 30, false)

	for range 3 { // lowered by refusals well under what a capacity of 10 implies
		_, _, err := lim.Refused(ctx, "d", a)
		require.NoError(t, err)
		clk.t = clk.t.Add(1100 * time.Millisecond) // past the episode, so the next refusal lowers again
	}
	cur, _, err := lim.AdaptiveLimit(ctx, "d", a)
	require.NoError(t, err)
	require.Less(t, cur.Rate, 100.0, "the refusals lowered the rate")
	check("a rate already under the capacity is kept", "d", a, backoff.Quota{Limit: 10}, cur.Rate, false)
}

// TestColdAndCountProbe: a bucket is cold until an answer is reported; the
// probe is counted (the bucket held) only at a rate under the ceiling.
func TestColdAndCountProbe(t *testing.T) {
	ctx := context.Background()
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	a := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}}

	assert.True(t, Cold(ctx, lim, "k", a), "no answer yet")
	st, _, err := lim.Announced(ctx, "k", a, 50)
	require.NoError(t, err)
	assert.False(t, Cold(ctx, lim, "k", a), "answered")

	require.NoError(t, CountProbe(ctx, lim, "k", a, 200))
	left, err := lim.CooldownLeft(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, left, "a probe at the ceiling holds nothing")

	require.NoError(t, CountProbe(ctx, lim, "k", a, st.Rate))
	left, err = lim.CooldownLeft(ctx, "k")
	require.NoError(t, err)
	assert.InDelta(t, float64(20*time.Millisecond), float64(left), float64(time.Millisecond), "held one turn at 50/s")

	assert.Equal(t, "sluice:x:probe", ProbeKey("sluice:x"))
}

// clock is a store's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }
