package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

var (
	log3 = SlidingLog{Max: 3, Window: time.Second}
	log2 = SlidingLog{Max: 2, Window: time.Second}
)

func init() {
	conformance = append(conformance,
		confCase{"sliding log: at most Max in any window, an entry Window old no longer counts", []step{
			{at: 0, op: opTry, pol: log3, key: "k", n: 1, granted: true, remaining: 2, reset: 1000000},
			{at: 100000, op: opTry, pol: log3, key: "k", n: 2, granted: true, remaining: 0, reset: 1000000},
			{at: 200000, op: opTry, pol: log3, key: "k", n: 1, granted: false, wait: 800000, remaining: 0, reset: 900000},
			{at: 999999, op: opTry, pol: log3, key: "k", n: 1, granted: false, wait: 1, remaining: 0, reset: 100001},
			{at: 1000000, op: opTry, pol: log3, key: "k", n: 1, granted: true, remaining: 0, reset: 1000000},
			{at: 1000000, op: opTry, pol: log3, key: "k", n: 1, granted: false, wait: 100000, remaining: 0, reset: 1000000},
			{at: 1100000, op: opTry, pol: log3, key: "k", n: 2, granted: true, remaining: 0, reset: 1000000},
			{at: 2100000, op: opTry, pol: log3, key: "k", n: 3, granted: true, remaining: 0, reset: 1000000},
			{at: 5000000, op: opTry, pol: log3, key: "k", n: 1, granted: true, remaining: 2, reset: 1000000},
		}},
		confCase{"sliding log: bookings line up in arrival order, within maxWait", []step{
			{at: 0, op: opTake, pol: log2, key: "k", n: 2, granted: true, remaining: 0, reset: 1000000},
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 1000000, remaining: 0, reset: 2000000},
			// Both fit in (0, 1 s]: the grants at 0 have left that window.
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 1000000, remaining: 0, reset: 2000000},
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 2000000, remaining: 0, reset: 3000000},
			{at: 0, op: opTry, maxWait: 2500000, pol: log2, key: "k", n: 2, granted: false, wait: 3000000, remaining: 0, reset: 3000000},
			{at: 0, op: opTry, maxWait: 2000000, pol: log2, key: "k", n: 1, granted: true, wait: 2000000, remaining: 0, reset: 3000000},
			{at: 2000000, op: opTry, pol: log2, key: "k", n: 1, granted: false, wait: 1000000, remaining: 0, reset: 1000000},
		}},
		confCase{"sliding log: cancelling the last booking gives its slot back, and dropped grants still count", []step{
			{at: 0, op: opTake, pol: log2, key: "k", n: 2, granted: true, remaining: 0, reset: 1000000},
			// The log keeps two entries: the grants at 0 are dropped for the booking at 1 s.
			{at: 1000, op: opTake, pol: log2, key: "k", n: 2, granted: true, wait: 999000, remaining: 0, reset: 1999000},
			{at: 2000, op: opCancel, ref: 1, refunded: true},
			// They still count: nothing at once.
			{at: 3000, op: opTry, pol: log2, key: "k", n: 1, granted: false, wait: 997000, remaining: 0, reset: 997000},
			{at: 3000, op: opTake, pol: log2, key: "k", n: 2, granted: true, wait: 997000, remaining: 0, reset: 1997000},
			{at: 4000, op: opCancel, ref: 1, refunded: false},
		}},
		confCase{"sliding log: a cancel under a later booking leaves its turn to the next caller", []step{
			{at: 0, op: opTake, pol: log2, key: "k", n: 2, granted: true, remaining: 0, reset: 1000000},
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 1000000, remaining: 0, reset: 2000000},
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 1000000, remaining: 0, reset: 2000000},
			{at: 0, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 2000000, remaining: 0, reset: 3000000},
			{at: 1000, op: opCancel, ref: 2, refunded: true},
			{at: 1000, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 999000, remaining: 0, reset: 2999000},
			// The one that took the hole cancels: its turn is a hole again.
			{at: 2000, op: opCancel, ref: 5, refunded: true},
			{at: 2000, op: opTake, pol: log2, key: "k", n: 1, granted: true, wait: 998000, remaining: 0, reset: 2998000},
			{at: 2000000, op: opCancel, ref: 7, refunded: false},
		}},
	)
}

func TestSlidingLogInvalidBeforeIO(t *testing.T) {
	ok := SlidingLog{Max: 5, Window: time.Second}
	cases := []struct {
		name string
		pol  SlidingLog
		n    int
		is   error
	}{
		{"zero value", SlidingLog{}, 1, ErrInvalid},
		{"zero max", SlidingLog{Window: time.Second}, 1, ErrInvalid},
		{"negative max", SlidingLog{Max: -1, Window: time.Second}, 1, ErrInvalid},
		{"max beyond the log's bound", SlidingLog{Max: maxLogMax + 1, Window: time.Second}, 1, ErrInvalid},
		{"zero window", SlidingLog{Max: 1}, 1, ErrInvalid},
		{"negative window", SlidingLog{Max: 1, Window: -time.Second}, 1, ErrInvalid},
		{"window under a millisecond", SlidingLog{Max: 1, Window: 999 * time.Microsecond}, 1, ErrInvalid},
		{"window not whole microseconds", SlidingLog{Max: 1, Window: time.Second + 1}, 1, ErrInvalid},
		{"window beyond the state's span", SlidingLog{Max: 1, Window: 4 * 365 * 24 * time.Hour}, 1, ErrInvalid},
		{"zero n", ok, 0, ErrInvalid},
		{"negative n", ok, -1, ErrInvalid},
		{"n above max", ok, 6, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkBeforeIO(t, "k", c.pol, c.n, c.is) })
	}
	assert.NoError(t, ok.validate())
	assert.NoError(t, SlidingLog{Max: maxLogMax, Window: time.Millisecond}.validate())
	assert.ErrorIs(t, ok.check(6), ErrTooLarge)
	assert.NotErrorIs(t, ok.check(0), ErrTooLarge)
}

func TestSlidingLogQuotaAndShare(t *testing.T) {
	l := SlidingLog{Max: 10, Window: time.Minute}
	m, w := l.quota()
	assert.Equal(t, 10, m)
	assert.Equal(t, time.Minute, w)
	assert.Equal(t, "10 per 1m0s sliding log", l.String())
	assert.Equal(t, SlidingLog{Max: 3, Window: time.Minute}, l.share(3))
	assert.Equal(t, SlidingLog{Max: 1, Window: time.Minute}, l.share(20))
}

// Every write leaves a TTL on the log, the log never holds more than Max
// entries, and it vanishes once its last entry has left the window.
func TestSlidingLogRedisKey(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	store := NewRedisStore(rdb)
	t.Cleanup(func() { store.Close() })
	prefix := redistest.Prefix(t)
	lim := NewLimiter(store, WithKeyPrefix(prefix))
	ctx := context.Background()
	pol := SlidingLog{Max: 4, Window: 200 * time.Millisecond}
	key := stateKey(prefix, "k", pol)

	written := func(msg string) {
		t.Helper()
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err, msg)
		assert.Greater(t, ttl, time.Duration(0), msg+": PTTL")
		// the last entry is due within 2 windows, and its TTL covers its
		// whole period of min(Window, 1 s) (sl.lua's commit): one more
		assert.LessOrEqual(t, ttl, 4*pol.Window+ttlSlack, msg+": PTTL")
		n, err := rdb.LLen(ctx, key).Result()
		require.NoError(t, err, msg)
		assert.LessOrEqual(t, n, int64(pol.Max), msg+": LLEN")
	}
	res, err := lim.TryAcquire(ctx, "k", pol, 3)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	written("grant")
	var rs []*Reservation
	for i := range 4 {
		r, err := lim.Reserve(ctx, "k", pol, 1+i%2, time.Second)
		require.NoError(t, err)
		rs = append(rs, r)
		written(fmt.Sprintf("booking %d", i))
	}
	require.NoError(t, rs[3].Cancel(ctx))
	written("refund")

	// The last entry is due within 2 windows; then it leaves the window, and the
	// key goes at the end of its period (one more window here) and the slack.
	time.Sleep(4*pol.Window + ttlSlack + 50*time.Millisecond)
	n, err := rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the log outlived its window")
}

// The acceptance load: 32 goroutines in Acquire on one sliding log, on a real
// redis-server. No span of Window ever holds more than Max grants; nearly all
// that the log allows is used; about one round trip per grant.
func TestPolicyLoadSlidingLog(t *testing.T) {
	pol := SlidingLog{Max: 50, Window: 500 * time.Millisecond}
	load := runPolicyLoad(t, pol, 2500*time.Millisecond)
	w := pol.window()
	worst := maxInSpan(load.slots, w)
	last := load.slots[len(load.slots)-1]
	// Half-open spans [start + i·Window, start + (i+1)·Window) each hold at most Max.
	allowed := pol.Max * int((last-load.start)/w+1)
	used := float64(len(load.slots)) / float64(allowed)
	t.Logf("%v: %d grants; at most %d in any span of %v; %.2f%% of the %d it allows; %.3f round trips per grant",
		pol, len(load.slots), worst, pol.Window, 100*used, allowed, load.roundTripsPerGrant())
	require.LessOrEqual(t, worst, pol.Max)
	require.GreaterOrEqual(t, used, 0.95)
	require.Less(t, load.roundTripsPerGrant(), 1.2)
}

// Random takes, cancels and pauses on every store in lockstep (see
// runRandom), with windows of a second or more: all give the same answers at
// every step, and slidingLogRandom's invariants hold — refunds after the log
// has dropped old entries included.
func TestSlidingLogRandomAgreesAndHolds(t *testing.T) {
	// (Max 40 and 25 put more than eight entries out of the window at once:
	// reserve_sl.lua then searches the log for the first one left.)
	pols := []SlidingLog{{Max: 1, Window: time.Second}, {Max: 2, Window: time.Second}, {Max: 5, Window: 3 * time.Second}, {Max: 7, Window: 1234567 * time.Microsecond},
		{Max: 40, Window: time.Second}, {Max: 25, Window: 2 * time.Second}}
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { slidingLogRandom(t, pols[int(seed)%len(pols)], seed) })
	}
}

// slidingLogRandom is a random run under p (see runRandom): the log on the
// real redis-server never holds more than Max entries, and the grants that
// stand (granted and not cancelled) never put more than Max in any window.
func slidingLogRandom(t *testing.T, p SlidingLog, seed uint64) {
	w := p.window()
	times := grantTimes(runRandom(t, p, seed, w, true, func(s lockstepStep) {
		n, err := s.rdb.LLen(context.Background(), stateKey(s.prefix, "k", p)).Result()
		require.NoError(t, err, s.msg)
		require.LessOrEqual(t, n, int64(p.Max), s.msg+" LLEN")
	}))
	require.NotEmpty(t, times)
	assert.LessOrEqual(t, maxInSpan(times, w), p.Max, "grants in one window")
}

// The largest log: n up to 10000 entries in one call goes in chunks (Lua's
// unpack has a limit), on Redis and on miniredis as in memory.
func TestSlidingLogLargestMax(t *testing.T) {
	_, mini := miniredisClient(t)
	pol := SlidingLog{Max: maxLogMax, Window: time.Second}
	stores := map[string]func(clock) Store{
		"memory":    func(c clock) Store { return NewMemoryStore(WithClock(c)) },
		"redis":     func(c clock) Store { return NewRedisStore(redistest.Shared(t).Client(t), WithClock(c)) },
		"miniredis": func(c clock) Store { return NewRedisStore(mini, WithClock(c)) },
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			store := newStore(clock)
			ctx := context.Background()
			prefix := redistest.Prefix(t)
			req := func(n int) request {
				return request{prefix: prefix, one: Bucket{Key: "k", Limit: pol, N: n}, maxWait: -1}
			}
			d, err := store.reserve(ctx, req(maxLogMax))
			require.NoError(t, err)
			assert.Equal(t, decision{granted: true, remaining: 0, reset: 1000000, now: base.UnixMicro(), handle: whole(base.UnixMicro())}, d)
			clock.at(1000)
			booked, err := store.reserve(ctx, req(2500))
			require.NoError(t, err)
			assert.Equal(t, int64(999000), booked.wait)
			clock.at(2000)
			ok, err := store.refund(ctx, req(2500), booked, "x")
			require.NoError(t, err)
			assert.True(t, ok)
			d, err = store.reserve(ctx, req(2500))
			require.NoError(t, err)
			assert.Equal(t, int64(998000), d.wait, "the cancelled booking's slot")
			assert.Equal(t, int64(1998000), d.reset)
		})
	}
}

// Random calls agree on the memory store, a real redis-server and miniredis,
// whose keys expire by their TTLs (see runRandom), down to windows of 1 ms;
// slidingLogRandom's invariants hold.
func TestSlidingLogRandomExpiry(t *testing.T) {
	pols := []SlidingLog{{Max: 1, Window: time.Millisecond}, {Max: 3, Window: 2 * time.Millisecond}, {Max: 4, Window: 1234567 * time.Microsecond}}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { slidingLogRandom(t, pols[int(seed)%len(pols)], seed) })
	}
}
