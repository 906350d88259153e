package throttle

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

var (
	threePerSec = FixedWindow{Max: 3, Window: time.Second}
	fivePerSec  = FixedWindow{Max: 5, Window: time.Second}
	// base is 4 s into a 7 s window: windows of 7 s start at base−4 s, base+3 s, ...
	threePer7s = FixedWindow{Max: 3, Window: 7 * time.Second}
)

// fw is a one-key step under a FixedWindow.
func fw(at int64, o op, p FixedWindow, n int) step {
	return step{at: at, op: o, pol: p, key: "k", n: n}
}

func init() {
	// base is a whole second: with Window = 1 s, step times are offsets into window 0.
	conformance = append(conformance,
		confCase{"fixed window: Max per window, then the next window", []step{
			wantReply(fw(0, opTry, threePerSec, 1), true, 0, 2, 1000000),
			wantReply(fw(100000, opTry, threePerSec, 2), true, 0, 0, 900000),
			wantReply(fw(200000, opTry, threePerSec, 1), false, 800000, 0, 800000),
			wantReply(fw(999999, opTry, threePerSec, 1), false, 1, 0, 1),
			wantReply(fw(1000000, opTry, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(1500000, opTry, threePerSec, 1), false, 500000, 0, 500000),
		}},
		confCase{"fixed window: windows are aligned on the clock, not on the first call", []step{
			wantReply(fw(0, opTry, threePer7s, 3), true, 0, 0, 3000000),
			wantReply(fw(0, opTry, threePer7s, 1), false, 3000000, 0, 3000000),
			wantReply(fw(3000000, opTry, threePer7s, 1), true, 0, 2, 7000000),
		}},
		confCase{"fixed window: reservations book later windows in arrival order", []step{
			wantReply(fw(200000, opTake, threePerSec, 3), true, 0, 0, 800000),
			wantReply(fw(200000, opTake, threePerSec, 2), true, 800000, 0, 1800000),
			// Window 1 has room for 1, not 2: window 2.
			wantReply(fw(200000, opTake, threePerSec, 2), true, 1800000, 0, 2800000),
			// A later request never goes back to window 1's leftover.
			wantReply(fw(200000, opTake, threePerSec, 1), true, 1800000, 0, 2800000),
			// maxWait bounds the booking: window 3 is 2.8 s away.
			withMaxWait(wantReply(fw(200000, opTry, threePerSec, 1), false, 2800000, 0, 2800000), 2799999),
			withMaxWait(wantReply(fw(200000, opTry, threePerSec, 1), true, 2800000, 0, 3800000), 2800000),
		}},
		confCase{"fixed window: cancel gives back a booking in the latest window", []step{
			wantReply(fw(0, opTake, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTake, threePerSec, 2), true, 1000000, 0, 2000000),
			{at: 100000, op: opCancel, ref: 1, refunded: true},
			// Window 1 is empty again: the whole quota is back when it starts.
			wantReply(fw(100000, opTry, threePerSec, 1), false, 900000, 0, 900000),
			wantReply(fw(100000, opTake, threePerSec, 3), true, 900000, 0, 1900000),
		}},
		confCase{"fixed window: a cancel in a window before the cursor's leaves its room to the next callers", []step{
			wantReply(fw(0, opTake, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTake, threePerSec, 2), true, 1000000, 0, 2000000),
			wantReply(fw(0, opTake, threePerSec, 2), true, 2000000, 0, 3000000),
			{at: 100000, op: opCancel, ref: 1, refunded: true},
			// Window 1's two cancelled places are a hole, taken one by one.
			wantReply(fw(100000, opTake, threePerSec, 1), true, 900000, 0, 2900000),
			wantReply(fw(100000, opTake, threePerSec, 1), true, 900000, 0, 2900000),
			wantReply(fw(100000, opTake, threePerSec, 1), true, 1900000, 0, 2900000),
			wantReply(fw(100000, opTake, threePerSec, 1), true, 2900000, 0, 3900000),
		}},
		confCase{"fixed window: a refund is applied at most once", []step{
			wantReply(fw(0, opTake, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTake, threePerSec, 2), true, 1000000, 0, 2000000),
			wantReply(fw(0, opTake, threePerSec, 1), true, 1000000, 0, 2000000),
			{at: 1000, op: opCancel, ref: 1, refunded: true},
			{at: 2000, op: opCancel, ref: 1, refunded: false},
			wantReply(fw(2000, opTake, threePerSec, 2), true, 998000, 0, 1998000),
			wantReply(fw(2000, opTake, threePerSec, 1), true, 1998000, 0, 2998000),
		}},
		confCase{"fixed window: cancel after the slot gives nothing back", []step{
			wantReply(fw(0, opTake, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTake, threePerSec, 1), true, 1000000, 0, 2000000),
			{at: 1000000, op: opCancel, ref: 1, refunded: false},
			wantReply(fw(1000000, opTry, threePerSec, 3), false, 1000000, 2, 1000000),
		}},
		confCase{"fixed window: a changed Max applies on the next call", []step{
			wantReply(fw(0, opTry, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTry, fivePerSec, 2), true, 0, 0, 1000000),
			wantReply(fw(0, opTry, threePerSec, 1), false, 1000000, 0, 1000000),
		}},
		confCase{"fixed window: an idle key is forgotten", []step{
			wantReply(fw(0, opTake, threePerSec, 3), true, 0, 0, 1000000),
			wantReply(fw(0, opTake, threePerSec, 3), true, 1000000, 0, 2000000),
			wantReply(fw(10*365*24*3600*1000000+250000, opTry, threePerSec, 3), true, 0, 0, 750000),
		}},
	)
}

// wantReply sets a step's expected reply.
func wantReply(s step, granted bool, wait int64, remaining int, reset int64) step {
	s.granted, s.wait, s.remaining, s.reset = granted, wait, remaining, reset
	return s
}

// withMaxWait sets an opTry step's maxWait.
func withMaxWait(s step, maxWait int64) step {
	s.maxWait = maxWait
	return s
}

// Random calls agree on every store, and never put more than Max in a window.
func TestFixedWindowRandom(t *testing.T) {
	pols := []FixedWindow{{Max: 1, Window: time.Second}, {Max: 3, Window: time.Second}, {Max: 5, Window: 7 * time.Millisecond}, {Max: 8, Window: 1234567 * time.Microsecond}}
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			times := grantTimes(runRandom(t, p, seed, p.window(), true, nil))
			require.NotEmpty(t, times)
			perWindow := map[int64]int{}
			for _, x := range times {
				perWindow[x/p.window()]++
			}
			for w, c := range perWindow {
				require.LessOrEqual(t, c, p.Max, "window %d", w)
			}
		})
	}
}

func TestFixedWindowInvalid(t *testing.T) {
	ok := FixedWindow{Max: 5, Window: time.Second}
	cases := []struct {
		name string
		p    FixedWindow
		n    int
		is   error
	}{
		{"zero", FixedWindow{}, 1, ErrInvalid},
		{"zero max", FixedWindow{Window: time.Second}, 1, ErrInvalid},
		{"negative max", FixedWindow{Max: -1, Window: time.Second}, 1, ErrInvalid},
		{"huge max", FixedWindow{Max: maxBurst + 1, Window: time.Second}, 1, ErrInvalid},
		{"zero window", FixedWindow{Max: 5}, 1, ErrInvalid},
		{"negative window", FixedWindow{Max: 5, Window: -time.Second}, 1, ErrInvalid},
		{"window under 1ms", FixedWindow{Max: 5, Window: 999 * time.Microsecond}, 1, ErrInvalid},
		{"window not whole microseconds", FixedWindow{Max: 5, Window: time.Millisecond + time.Nanosecond}, 1, ErrInvalid},
		{"window too long", FixedWindow{Max: 5, Window: micros(maxSpan) + time.Microsecond}, 1, ErrInvalid},
		{"zero n", ok, 0, ErrInvalid},
		{"negative n", ok, -1, ErrInvalid},
		{"n larger than max", ok, 6, ErrTooLarge},
		{"huge n", ok, math.MaxInt, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.p != ok {
				assert.ErrorIs(t, c.p.validate(), ErrInvalid)
			}
			checkBeforeIO(t, "k", c.p, c.n, c.is)
		})
	}
	require.NoError(t, FixedWindow{Max: 1, Window: time.Millisecond}.validate())
	require.NoError(t, FixedWindow{Max: maxBurst, Window: micros(maxSpan)}.validate())
	tooLarge := checkN(6, 5, "max")
	assert.ErrorIs(t, tooLarge, ErrInvalid, "too large is invalid too")
}

func TestFixedWindowShare(t *testing.T) {
	p := FixedWindow{Max: 10, Window: time.Minute}
	assert.Equal(t, FixedWindow{Max: 3, Window: time.Minute}, p.share(3))
	assert.Equal(t, FixedWindow{Max: 1, Window: time.Minute}, p.share(20))
	m, w := p.quota()
	assert.Equal(t, 10, m)
	assert.Equal(t, time.Minute, w)
	assert.Equal(t, "10 per 1m0s window", p.String())
}

// keysWithTTL asserts that every key under prefix has a TTL, and returns them.
func keysWithTTL(t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "PTTL of %s", k)
	}
	return keys
}

// A FixedWindow key lives until its cursor's window ends; the refund marker
// has a TTL too; an idle key vanishes.
func TestFixedWindowRedisTTL(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	ctx := context.Background()
	p := FixedWindow{Max: 2, Window: 100 * time.Millisecond}
	key := stateKey(prefix, "k", p)

	res, err := lim.TryAcquire(ctx, "k", p, 2)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, p.Window+ttlSlack)

	r, err := lim.Reserve(ctx, "k", p, 1, time.Second) // the next window
	require.NoError(t, err)
	ttl, err = rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.InDelta(t, p.Window+r.Delay()+ttlSlack, ttl, float64(10*time.Millisecond), "until the booked window ends, and the slack")
	assert.LessOrEqual(t, ttl, 2*p.Window+ttlSlack)
	require.NoError(t, r.Cancel(ctx))
	assert.Len(t, keysWithTTL(t, rdb, prefix), 2, "state and refund marker")

	time.Sleep(2*p.Window + ttlSlack + 50*time.Millisecond)
	n, err := rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the idle key is gone")
}

// sleepUntilPhase sleeps until the Redis server's clock is phase into a period
// (as the stores align windows: on multiples of period since the Unix epoch).
func sleepUntilPhase(t *testing.T, rdb *redis.Client, period, phase time.Duration) {
	t.Helper()
	p, ph := int64(period/time.Microsecond), int64(phase/time.Microsecond)
	now := redisNow(t, rdb)
	wait := (ph - now%p + p) % p
	time.Sleep(micros(wait))
}

// Acceptance: 32 goroutines in Acquire on one FixedWindow key. Every aligned
// window holds at most Max; the windows the load spans are used; about one
// round trip per grant.
func TestPolicyLoadFixedWindow(t *testing.T) {
	p := FixedWindow{Max: 50, Window: 500 * time.Millisecond}
	// Start 100 ms into a window and run 5 windows: the load ends 100 ms into
	// its last window, long after the bookings for that window's start have
	// been granted, so no window is cut short by the end of the run.
	sleepUntilPhase(t, redistest.Shared(t).Client(t), p.Window, 100*time.Millisecond)
	load := runPolicyLoad(t, p, 2500*time.Millisecond)

	W := p.window()
	perWindow := map[int64]int{}
	for _, s := range load.slots {
		perWindow[s/W]++
	}
	for w, c := range perWindow {
		require.LessOrEqual(t, c, p.Max, "window %d", w)
	}
	first, last := load.slots[0]/W, load.slots[len(load.slots)-1]/W
	// The first window is entered part-way, but all its Max can be had at once.
	allowed := p.Max * int(last-first+1)
	used := float64(len(load.slots)) / float64(allowed)
	worst := maxInSpan(load.slots, W)
	t.Logf("fixed window %v: %d grants over %d windows, %.2f%% of what it allows, %.3f round trips per grant, at most %d in any span of a window (2·Max at the edges: %d)",
		p, len(load.slots), last-first+1, 100*used, load.roundTripsPerGrant(), worst, 2*p.Max)
	require.GreaterOrEqual(t, used, 0.95)
	require.Less(t, load.roundTripsPerGrant(), 1.2)
	require.LessOrEqual(t, worst, 2*p.Max)
}

// A key taken under one window and then under another starts afresh: the
// count of a window of the old length says nothing of the new one's.
func TestFixedWindowChangedWindow(t *testing.T) {
	for name, store := range map[string]func(clock) Store{
		"memory": func(c clock) Store { return NewMemoryStore(WithClock(c)) },
		"redis":  func(c clock) Store { return NewRedisStore(redistest.Shared(t).Client(t), WithClock(c)) },
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			lim := NewLimiter(store(clock), WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			short := FixedWindow{Max: 2, Window: time.Second}
			res, err := lim.TryAcquire(ctx, "k", short, 2)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			res, err = lim.TryAcquire(ctx, "k", short, 1)
			require.NoError(t, err)
			require.False(t, res.Allowed, "the window is full")

			long := FixedWindow{Max: 2, Window: 2 * time.Second}
			res, err = lim.TryAcquire(ctx, "k", long, 2)
			require.NoError(t, err)
			assert.True(t, res.Allowed, "a new window length: a fresh count")
			assert.Equal(t, 0, res.Remaining)
		})
	}
}
