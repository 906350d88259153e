package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Adding a bucket sweeps full ones from the map; a sweep in the middle of a
// multi-bucket grant must not drop a bucket whose entry the grant is writing.
func TestMemorySweepKeepsBucketsBeingCharged(t *testing.T) {
	global := Limit{Rate: 1, Period: time.Hour, Burst: 1}
	tenant := Limit{Rate: 10, Burst: 10}
	for trial := range 100 {
		clock := newFakeClock()
		lim := NewLimiter(NewMemoryStore(WithClock(clock)))
		ctx := context.Background()
		msg := fmt.Sprintf("trial %d", trial)

		// The global bucket's entry exists but is full again: a sweep may drop it.
		require.NoError(t, lim.Acquire(ctx, "{a}:global", global, 1), msg)
		clock.advance(2 * time.Hour)

		res, err := lim.TryAcquireAll(ctx, []Bucket{{Key: "{a}:t1", Limit: tenant}, {Key: "{a}:global", Limit: global}})
		require.NoError(t, err, msg)
		require.True(t, res.Allowed, msg)
		res, err = lim.TryAcquireAll(ctx, []Bucket{{Key: "{a}:t2", Limit: tenant}, {Key: "{a}:global", Limit: global}})
		require.NoError(t, err, msg)
		assert.False(t, res.Allowed, "%s: the global bucket's one token was granted twice", msg)
	}
}

// No reservation is unbounded: a wait past the span a bucket's state may reach
// is refused, so time arithmetic never overflows into a slot in the past.
func TestReservationsAreBoundedBySpan(t *testing.T) {
	lim := NewLimiter(NewMemoryStore(WithClock(newFakeClock())))
	slow := Limit{Rate: 1, Period: time.Duration(maxSpan) * time.Microsecond, Burst: 1}
	require.NoError(t, slow.validate())
	ctx := context.Background()
	granted := 0
	for i := range 100 {
		r, err := lim.Reserve(ctx, "k", slow, 1, -1)
		if err != nil {
			assert.ErrorIs(t, err, ErrLimited, "call %d", i)
			continue
		}
		granted++
		assert.True(t, r.Time().After(time.Now().Add(-time.Minute)), "call %d: a slot in the past: %v", i, r.Time())
	}
	assert.Equal(t, 2, granted, "the free token and one a span away")
}

func TestLimiterErr(t *testing.T) {
	assert.NoError(t, NewLimiter(NewMemoryStore()).Err())
	assert.ErrorIs(t, NewLimiter(NewMemoryStore(), WithKeyPrefix("{x}")).Err(), ErrInvalid)
	assert.ErrorIs(t, NewLimiter(nil).Err(), ErrInvalid)
	assert.ErrorIs(t, NewLimiter(NewMemoryStore(), WithFailurePolicy(FailLocal)).Err(), ErrInvalid)
}
