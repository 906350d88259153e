package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingStore counts the calls that reach the store underneath.
type countingStore struct {
	Store
	calls atomic.Int64
}

func (c *countingStore) reserve(ctx context.Context, req request) (decision, error) {
	c.calls.Add(1)
	return c.Store.reserve(ctx, req)
}

func TestInvalidRequestsFailBeforeIO(t *testing.T) {
	ok := Limit{Rate: 10, Burst: 5}
	cases := []struct {
		name  string
		key   string
		limit Limit
		n     int
		is    error
	}{
		{"zero rate", "k", Limit{Rate: 0, Burst: 1}, 1, ErrInvalid},
		{"negative rate", "k", Limit{Rate: -1, Burst: 1}, 1, ErrInvalid},
		{"NaN rate", "k", Limit{Rate: math.NaN(), Burst: 1}, 1, ErrInvalid},
		{"infinite rate", "k", Limit{Rate: math.Inf(1), Burst: 1}, 1, ErrInvalid},
		{"zero burst", "k", Limit{Rate: 1}, 1, ErrInvalid},
		{"negative burst", "k", Limit{Rate: 1, Burst: -3}, 1, ErrInvalid},
		{"huge burst", "k", Limit{Rate: 1e6, Burst: maxBurst + 1}, 1, ErrInvalid},
		{"negative period", "k", Limit{Rate: 1, Period: -time.Second, Burst: 1}, 1, ErrInvalid},
		{"faster than a token per nanosecond", "k", Limit{Rate: 2e9, Burst: 1}, 1, ErrInvalid},
		{"slower than the state can span", "k", Limit{Rate: 1, Period: 1000 * time.Hour, Burst: 100000}, 1, ErrInvalid},
		{"too slow for an int64 of microseconds", "k", Limit{Rate: 1e-20, Burst: 1}, 1, ErrInvalid},
		{"zero n", "k", ok, 0, ErrInvalid},
		{"negative n", "k", ok, -1, ErrInvalid},
		{"n larger than burst", "k", ok, 6, ErrTooLarge},
		{"huge n", "k", ok, math.MaxInt, ErrTooLarge},
		{"empty key", "", ok, 1, ErrInvalid},
		{"key too long", string(make([]byte, MaxKeyLen+1)), ok, 1, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkBeforeIO(t, c.key, c.limit, c.n, c.is) })
	}
}

// checkBeforeIO asserts that every call on key under p for n fails with want
// before reaching the store.
func checkBeforeIO(t *testing.T, key string, p Policy, n int, want error) {
	t.Helper()
	store := &countingStore{Store: NewMemoryStore()}
	lim := NewLimiter(store)
	ctx := context.Background()
	assert.ErrorIs(t, lim.Acquire(ctx, key, p, n), want, "Acquire")
	_, err := lim.TryAcquire(ctx, key, p, n)
	assert.ErrorIs(t, err, want, "TryAcquire")
	_, err = lim.Reserve(ctx, key, p, n, time.Second)
	assert.ErrorIs(t, err, want, "Reserve")
	assert.Equal(t, int64(0), store.calls.Load(), "store calls")
}

func TestBadPrefixFailsEveryCall(t *testing.T) {
	lim := NewLimiter(NewMemoryStore(), WithKeyPrefix("a{b}:"))
	err := lim.Acquire(context.Background(), "k", Limit{Rate: 1, Burst: 1}, 1)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestBucketsInDifferentSlotsFailBeforeIO(t *testing.T) {
	store := &countingStore{Store: NewMemoryStore()}
	lim := NewLimiter(store)
	l := Limit{Rate: 1, Burst: 1}
	for _, keys := range [][2]string{{"tenant:1", "global"}, {"{a}:t", "{b}:g"}, {"{a}:t", "g"}} {
		err := lim.AcquireAll(context.Background(), []Bucket{{Key: keys[0], Limit: l}, {Key: keys[1], Limit: l}})
		assert.ErrorIs(t, err, ErrCrossSlot, keys)
		assert.ErrorIs(t, err, ErrInvalid, keys)
	}
	assert.Equal(t, int64(0), store.calls.Load())
	require.NoError(t, lim.AcquireAll(context.Background(), []Bucket{{Key: "{a}:t", Limit: l}, {Key: "{a}:g", Limit: l}}))
}

func TestAcquireFailsAtOnceWhenTheWaitPassesTheDeadline(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	l := Limit{Rate: 1, Period: time.Minute, Burst: 1}
	require.NoError(t, lim.Acquire(context.Background(), "k", l, 1))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := lim.Acquire(ctx, "k", l, 1)

	var le *LimitedError
	require.ErrorAs(t, err, &le)
	assert.ErrorIs(t, err, ErrLimited)
	assert.NoError(t, ctx.Err(), "Acquire slept towards the deadline instead of failing at once")
	assert.InDelta(t, time.Minute.Seconds(), le.RetryAfter.Seconds(), 1, "RetryAfter")

	// Nothing was taken: the next slot is still a minute away, not two.
	res, err := lim.TryAcquire(context.Background(), "k", l, 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.InDelta(t, time.Minute.Seconds(), res.RetryAfter.Seconds(), 1)
}

func TestAcquireCancelledWhileWaitingRefunds(t *testing.T) {
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	l := Limit{Rate: 1, Period: time.Minute, Burst: 1}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lim.Acquire(wctx, "k", l, 1) }()
	// The waiter holds the next slot; a newcomer's slot is one further.
	require.Eventually(t, func() bool {
		r, err := lim.TryAcquire(ctx, "k", l, 1)
		return err == nil && r.RetryAfter == 2*time.Minute
	}, 5*time.Second, time.Millisecond)

	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	res, err := lim.TryAcquire(ctx, "k", l, 1)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, res.RetryAfter, "the cancelled waiter's slot came back")
}

func TestReservationCancelIsIdempotent(t *testing.T) {
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	l := Limit{Rate: 10, Burst: 1}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))

	r1, err := lim.Reserve(ctx, "k", l, 1, time.Second)
	require.NoError(t, err)
	assert.InDelta(t, 100*time.Millisecond, r1.Delay(), float64(20*time.Millisecond))
	r2, err := lim.Reserve(ctx, "k", l, 1, time.Second)
	require.NoError(t, err)

	require.NoError(t, r2.Cancel(ctx))
	require.NoError(t, r2.Cancel(ctx))
	res, err := lim.TryAcquire(ctx, "k", l, 1)
	require.NoError(t, err)
	assert.Equal(t, 200*time.Millisecond, res.RetryAfter, "r2's slot came back once, r1 still holds its own")
}

func TestReserveBeyondMaxWaitTakesNothing(t *testing.T) {
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	l := Limit{Rate: 10, Burst: 2}
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 2))

	_, err := lim.Reserve(ctx, "k", l, 2, 100*time.Millisecond)
	var le *LimitedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 200*time.Millisecond, le.RetryAfter)

	r, err := lim.Reserve(ctx, "k", l, 1, 100*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, r.Delay())
}

func TestAcquireSleepsUntilItsSlot(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	l := Limit{Rate: 20, Burst: 1} // a token every 50 ms
	ctx := context.Background()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))
	start := time.Now()
	require.NoError(t, lim.Acquire(ctx, "k", l, 1))
	assert.GreaterOrEqual(t, time.Since(start), 45*time.Millisecond, "woke before its slot")
}

func TestCooldownValidates(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	l := Limit{Rate: 1, Burst: 1}
	for _, d := range []time.Duration{0, -time.Second, 1 << 62} {
		_, err := lim.Cooldown(context.Background(), "k", l, d)
		assert.ErrorIs(t, err, ErrInvalid, fmt.Sprint(d))
	}
	_, err := lim.Cooldown(context.Background(), "k", Limit{}, time.Second)
	assert.ErrorIs(t, err, ErrInvalid)
}

// failingStore is a store that cannot be reached.
type failingStore struct{ Store }

func (failingStore) configErr() error { return nil }

func (failingStore) reserve(context.Context, request) (decision, error) {
	return decision{}, &storeError{op: "reserve", err: errors.New("connection refused")}
}

func TestFailurePolicy(t *testing.T) {
	l := Limit{Rate: 1, Burst: 1}
	ctx := context.Background()

	closed := NewLimiter(failingStore{})
	err := closed.Acquire(ctx, "k", l, 1)
	assert.ErrorIs(t, err, ErrUnavailable)
	_, err = closed.TryAcquire(ctx, "k", l, 1)
	assert.ErrorIs(t, err, ErrUnavailable)

	open := NewLimiter(failingStore{}, WithFailurePolicy(FailOpen))
	require.NoError(t, open.Acquire(ctx, "k", l, 1))
	res, err := open.TryAcquire(ctx, "k", l, 1)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
}

// policies are one of each Policy other than Limit, each granting one at
// once and then nothing for about a minute.
var policies = []Policy{
	FixedWindow{Max: 1, Window: time.Minute},
	SlidingLog{Max: 1, Window: time.Minute},
	SlidingWindow{Max: 1, Window: time.Minute, Slots: 60},
	LeakyBucket{Rate: 1, Period: time.Minute, Capacity: 3},
}

// Under every policy, an Acquire whose deadline comes before its slot fails
// at once with a *LimitedError and takes nothing; one cancelled while it
// waits gives its slot back.
func TestAcquireUnderPolicies(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			lim := NewLimiter(NewMemoryStore(WithClock(newFakeClock())))
			ctx := context.Background()
			require.NoError(t, lim.Acquire(ctx, "k", p, 1))
			before, err := lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			require.False(t, before.Allowed)

			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var le *LimitedError
			require.ErrorAs(t, lim.Acquire(dctx, "k", p, 1), &le)
			assert.Positive(t, le.RetryAfter)
			res, err := lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			assert.Equal(t, before, res, "the deadline's Acquire took nothing")

			wctx, cancelWait := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- lim.Acquire(wctx, "k", p, 1) }()
			require.Eventually(t, func() bool {
				res, err := lim.TryAcquire(ctx, "k", p, 1)
				return err == nil && res != before
			}, 5*time.Second, time.Millisecond, "the waiter holds its slot")
			cancelWait()
			assert.ErrorIs(t, <-done, context.Canceled)
			res, err = lim.TryAcquire(ctx, "k", p, 1)
			require.NoError(t, err)
			assert.Equal(t, before, res, "the cancelled waiter's slot came back")
		})
	}
}
