package throttle

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

var (
	// Slots of 250 ms; base is a whole second, so slot k starts k·250 ms after it.
	fourPerSec = SlidingWindow{Max: 4, Window: time.Second, Slots: 4}
	// The default 10 slots: of 100 ms.
	twoPerSec = SlidingWindow{Max: 2, Window: time.Second}
)

// sw is a one-key step under a SlidingWindow.
func sw(at int64, o op, p SlidingWindow, n int) step {
	return step{at: at, op: o, pol: p, key: "k", n: n}
}

func init() {
	conformance = append(conformance,
		confCase{"sliding window: Max, then the weighted oldest slot decides", []step{
			// reset: until the end of slot 0+4, when slot 0 leaves every window.
			wantReply(sw(0, opTry, fourPerSec, 2), true, 0, 2, 1250000),
			wantReply(sw(100000, opTry, fourPerSec, 2), true, 0, 0, 1150000),
			// Slots 1-3 see slot 0's 4 in full; in slot 4, est = 4·(1 − f)
			// and est + 1 ≤ 4 from f = 1/4: 62.5 ms into slot 4.
			wantReply(sw(100000, opTry, fourPerSec, 1), false, 962500, 0, 1150000),
			wantReply(sw(1062499, opTry, fourPerSec, 1), false, 1, 0, 187501),
			wantReply(sw(1062500, opTry, fourPerSec, 1), true, 0, 0, 1187500),
			// At f = 3/4: est = 1 + 4·1/4 = 2, so 2 more fit, and 1 is left after 1.
			wantReply(sw(1187500, opTry, fourPerSec, 1), true, 0, 1, 1062500),
		}},
		confCase{"sliding window: slots are aligned on the clock, not on the first call", []step{
			wantReply(sw(150000, opTry, fourPerSec, 4), true, 0, 0, 1100000),
			wantReply(sw(150000, opTry, fourPerSec, 1), false, 912500, 0, 1100000),
		}},
		confCase{"sliding window: zero Slots means 10", []step{
			wantReply(sw(0, opTry, twoPerSec, 2), true, 0, 0, 1100000),
			// In slot 10, est = 2·(1 − f) and est + 1 ≤ 2 from f = 1/2.
			wantReply(sw(0, opTry, twoPerSec, 1), false, 1050000, 0, 1100000),
		}},
		confCase{"sliding window: reservations line up in the slots ahead", []step{
			wantReply(sw(0, opTake, fourPerSec, 4), true, 0, 0, 1250000),
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1062500, 0, 2250000),
			// Slot 4 holds 1: est + 2 ≤ 4 when 4·(1 − f) ≤ 1, f = 3/4.
			wantReply(sw(0, opTake, fourPerSec, 2), true, 1187500, 0, 2250000),
			// Slot 4 is full (3 + 4·(1 − f) > 3 for f < 1): slot 5, at its start.
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1250000, 0, 2500000),
			// Slots 5-7 see 4; in slot 8, 1 + 3·(1 − f) ≤ 2 from f = 2/3,
			// rounded up to the µs: 83334 µs into slot 8. maxWait bounds it.
			withMaxWait(wantReply(sw(0, opTry, fourPerSec, 1), false, 2083334, 0, 2500000), 2083333),
			withMaxWait(wantReply(sw(0, opTry, fourPerSec, 1), true, 2083334, 0, 3250000), 2083334),
		}},
		confCase{"sliding window: cancel takes the reservation off its slot", []step{
			wantReply(sw(0, opTake, fourPerSec, 4), true, 0, 0, 1250000),
			wantReply(sw(0, opTake, fourPerSec, 2), true, 1125000, 0, 2250000),
			{at: 100000, op: opCancel, ref: 1, refunded: true},
			// Slot 4 is empty again: slot 0's 4 is all that is left.
			wantReply(sw(100000, opTry, fourPerSec, 1), false, 962500, 0, 1150000),
			wantReply(sw(100000, opTake, fourPerSec, 2), true, 1025000, 0, 2150000),
		}},
		confCase{"sliding window: a refund is applied at most once", []step{
			wantReply(sw(0, opTake, fourPerSec, 4), true, 0, 0, 1250000),
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1062500, 0, 2250000),
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1125000, 0, 2250000),
			{at: 1000, op: opCancel, ref: 1, refunded: true},
			{at: 2000, op: opCancel, ref: 1, refunded: false},
			// Slot 4 holds 1, not 0: 1 + 4·(1 − f) + 1 ≤ 4 from f = 1/2.
			wantReply(sw(2000, opTake, fourPerSec, 1), true, 1123000, 0, 2248000),
		}},
		confCase{"sliding window: cancel after the slot gives nothing back", []step{
			wantReply(sw(0, opTake, fourPerSec, 4), true, 0, 0, 1250000),
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1062500, 0, 2250000),
			{at: 1062500, op: opCancel, ref: 1, refunded: false},
			// Slot 4 still holds 1: est + 1 ≤ 4 from f = 1/2, not now at f = 1/4.
			wantReply(sw(1062500, opTry, fourPerSec, 1), false, 62500, 0, 1187500),
		}},
		confCase{"sliding window: an idle key is forgotten", []step{
			wantReply(sw(0, opTake, fourPerSec, 4), true, 0, 0, 1250000),
			wantReply(sw(0, opTake, fourPerSec, 1), true, 1062500, 0, 2250000),
			wantReply(sw(10*365*24*3600*1000000+100000, opTry, fourPerSec, 4), true, 0, 0, 1150000),
		}},
	)
}

func TestSlidingWindowInvalid(t *testing.T) {
	ok := SlidingWindow{Max: 5, Window: time.Second, Slots: 10}
	cases := []struct {
		name string
		p    SlidingWindow
		n    int
		is   error
	}{
		{"zero", SlidingWindow{}, 1, ErrInvalid},
		{"zero max", SlidingWindow{Window: time.Second}, 1, ErrInvalid},
		{"negative max", SlidingWindow{Max: -1, Window: time.Second}, 1, ErrInvalid},
		{"huge max", SlidingWindow{Max: maxBurst + 1, Window: time.Second}, 1, ErrInvalid},
		{"zero window", SlidingWindow{Max: 5}, 1, ErrInvalid},
		{"window under 1ms", SlidingWindow{Max: 5, Window: 999 * time.Microsecond, Slots: 1}, 1, ErrInvalid},
		{"window not whole microseconds", SlidingWindow{Max: 5, Window: time.Second + time.Nanosecond, Slots: 1}, 1, ErrInvalid},
		{"window too long", SlidingWindow{Max: 5, Window: micros(maxSpan) + 10*time.Microsecond}, 1, ErrInvalid},
		{"negative slots", SlidingWindow{Max: 5, Window: time.Second, Slots: -1}, 1, ErrInvalid},
		{"too many slots", SlidingWindow{Max: 5, Window: time.Second, Slots: maxSlots + 1}, 1, ErrInvalid},
		{"slots not whole microseconds", SlidingWindow{Max: 5, Window: time.Second, Slots: 3}, 1, ErrInvalid},
		{"default slots not whole microseconds", SlidingWindow{Max: 5, Window: 1001 * time.Microsecond}, 1, ErrInvalid},
		{"too large to count exactly", SlidingWindow{Max: maxBurst, Window: 100 * time.Hour, Slots: 10}, 1, ErrInvalid},
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
	require.NoError(t, SlidingWindow{Max: 1, Window: time.Millisecond, Slots: maxSlots}.validate())
	require.NoError(t, SlidingWindow{Max: maxBurst, Window: time.Hour, Slots: 1000}.validate())
	require.NoError(t, SlidingWindow{Max: 1, Window: micros(maxSpan), Slots: 1}.validate())
}

func TestSlidingWindowShare(t *testing.T) {
	p := SlidingWindow{Max: 10, Window: time.Minute}
	assert.Equal(t, SlidingWindow{Max: 5, Window: time.Minute}, p.share(2))
	assert.Equal(t, SlidingWindow{Max: 1, Window: time.Minute}, p.share(11))
	m, w := p.quota()
	assert.Equal(t, 10, m)
	assert.Equal(t, time.Minute, w)
	assert.Equal(t, "10 per sliding 1m0s in 10 slots", p.String())
}

// A SlidingWindow key lives until its latest slot has left every window; the
// refund marker has a TTL too; an idle key vanishes.
func TestSlidingWindowRedisTTL(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	ctx := context.Background()
	p := SlidingWindow{Max: 2, Window: 100 * time.Millisecond, Slots: 4}
	key := stateKey(prefix, "k", p)

	res, err := lim.TryAcquire(ctx, "k", p, 2)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, p.Window+p.Window/4+ttlSlack, "until the end of the slot a window after, and the slack")

	r, err := lim.Reserve(ctx, "k", p, 1, time.Second)
	require.NoError(t, err)
	require.Positive(t, r.Delay())
	require.NoError(t, r.Cancel(ctx))
	assert.Len(t, keysWithTTL(t, rdb, prefix), 2, "state and refund marker")

	time.Sleep(3*p.Window + ttlSlack + 50*time.Millisecond)
	n, err := rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the idle key is gone")
}

// The documented bounds, checked on the grants of a load: slots holds every
// grant's time (µs, sorted). Any Slots whole slots hold at most Max; any span
// (x−Window, x] holds at most Max + ⌊c·f⌋, c the count of the slot it covers
// in part and f the part of x's slot before x. It returns the most in any span
// of Window and the most in one slot.
func checkSlidingWindowBounds(t *testing.T, p SlidingWindow, slots []int64) (worst, perSlot int) {
	t.Helper()
	L, S, W := p.slotLen(), int64(p.slots()), p.window()
	count := map[int64]int{}
	for _, x := range slots {
		count[x/L]++
		perSlot = max(perSlot, count[x/L])
	}
	first, last := slots[0]/L, slots[len(slots)-1]/L
	for j := first; j <= last; j++ {
		in := 0
		for i := j - S + 1; i <= j; i++ {
			in += count[i]
		}
		require.LessOrEqual(t, in, p.Max, "slots %d to %d", j-S+1, j)
	}
	lo := 0
	for hi, x := range slots {
		if hi+1 < len(slots) && slots[hi+1] == x {
			continue // the span ending at x holds every grant at x
		}
		for slots[lo] <= x-W {
			lo++
		}
		j := x / L
		bound := p.Max + int(int64(count[j-S])*(x-j*L)/L)
		require.LessOrEqual(t, hi-lo+1, bound, "span ending at grant %d", hi)
		worst = max(worst, hi-lo+1)
	}
	require.Equal(t, maxInSpan(slots, W), worst)
	require.Less(t, worst, 2*p.Max)
	return worst, perSlot
}

// Acceptance: 32 goroutines in Acquire on one SlidingWindow key. The
// documented bounds hold; the windows the load spans are used; about one
// round trip per grant.
func TestPolicyLoadSlidingWindow(t *testing.T) {
	p := SlidingWindow{Max: 50, Window: 500 * time.Millisecond, Slots: 10}
	// Saturated, the key grants Max at once, then about Max in one slot of
	// every Slots (as the oldest slot's weight fades). Start 10 ms into a
	// window and run 5.5 windows: the run ends in a quiet slot, so no window
	// is cut short by the end of the run.
	sleepUntilPhase(t, redistest.Shared(t).Client(t), p.Window, 10*time.Millisecond)
	load := runPolicyLoad(t, p, 2750*time.Millisecond)

	worst, perSlot := checkSlidingWindowBounds(t, p, load.slots)
	L, S := p.slotLen(), int64(p.slots())
	first, last := load.slots[0]/L, load.slots[len(load.slots)-1]/L
	// At most Max per S slots from the first: over the slots the load spans.
	windows := (last - first + S) / S
	allowed := p.Max * int(windows)
	used := float64(len(load.slots)) / float64(allowed)
	// Without the first slot's burst: the spans of the saturated steady state.
	k := sort.Search(len(load.slots), func(i int) bool { return load.slots[i] >= (first+1)*L })
	steady := maxInSpan(load.slots[k:], p.window())
	t.Logf("sliding window %v: %d grants over %d slots (%d windows from the first), %.2f%% of what it allows, %.3f round trips per grant; at most %d in any span of a window (bound: fewer than Max + one slot's count, %d + %d), %d once the first slot's burst has left, at most %d in a slot",
		p, len(load.slots), last-first+1, windows, 100*used, load.roundTripsPerGrant(), worst, p.Max, perSlot, steady, perSlot)
	require.GreaterOrEqual(t, used, 0.95)
	require.Less(t, load.roundTripsPerGrant(), 1.2)
}

// The bounds are tight: a burst at the very end of one slot and the slot a
// window later filled as the estimate allows put 2·Max − 1 in one span of
// Window, and never more.
func TestSlidingWindowWorstCase(t *testing.T) {
	p := SlidingWindow{Max: 10, Window: time.Second, Slots: 10} // slots of 100 ms
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	ctx := context.Background()
	var slots []int64
	take := func(at int64) {
		clock.at(at)
		res, err := lim.TryAcquire(ctx, "k", p, 1)
		require.NoError(t, err)
		if res.Allowed {
			slots = append(slots, base.UnixMicro()+at)
		}
	}
	for range p.Max {
		take(99999) // the last µs of slot 0
	}
	for at := int64(1000000); at < 1100000; at += 100 { // slot 10, every 100 µs
		take(at)
	}
	worst, _ := checkSlidingWindowBounds(t, p, slots)
	assert.Equal(t, 2*p.Max-1, worst)
	assert.Equal(t, 2*p.Max-1, maxInSpan(slots, p.window()))
}

// Random calls agree on every store and keep the documented bounds: exactly,
// without cancels; with cancels (a cancelled grant leaves the set, its count
// may stay in the key), Max per Slots whole slots and 2·Max − 1 per Window.
func TestSlidingWindowRandom(t *testing.T) {
	pols := []SlidingWindow{
		{Max: 1, Window: time.Second, Slots: 4},
		{Max: 4, Window: time.Second, Slots: 4},
		{Max: 3, Window: 10 * time.Millisecond, Slots: 1},
		{Max: 7, Window: 700 * time.Millisecond, Slots: 7},
		{Max: 5, Window: 3 * time.Millisecond, Slots: 3},
		{Max: 6, Window: 1234560 * time.Microsecond},
		{Max: 10, Window: time.Second, Slots: 1000},
	}
	for seed := uint64(1); seed <= 28; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			cancels := seed%2 == 1
			times := grantTimes(runRandom(t, p, seed, p.slotLen(), cancels, checkSlidingWindowHash(t, p)))
			require.NotEmpty(t, times)
			if !cancels {
				checkSlidingWindowBounds(t, p, times)
				return
			}
			L, S := p.slotLen(), int64(p.slots())
			count := map[int64]int{}
			for _, x := range times {
				count[x/L]++
			}
			for j := times[0] / L; j <= times[len(times)-1]/L; j++ {
				in := 0
				for i := j - S + 1; i <= j; i++ {
					in += count[i]
				}
				require.LessOrEqual(t, in, p.Max, "slots %d to %d", j-S+1, j)
			}
			require.Less(t, maxInSpan(times, p.window()), 2*p.Max)
		})
	}
}

// checkSlidingWindowHash checks, after every step of a random run, the hash
// on the real redis-server (sw.lua's layout): it keeps counts only for the
// slots b−Slots … b, none of them 0, and its summary (s, o, c, d, which
// reserve_sw.lua's fast path reads instead of the counts) is what they say.
func checkSlidingWindowHash(t *testing.T, p SlidingWindow) lockstepCheck {
	return func(st lockstepStep) {
		h, err := st.rdb.HGetAll(context.Background(), stateKey(st.prefix, "k", p)).Result()
		require.NoError(t, err, st.msg)
		if len(h) == 0 {
			return
		}
		num := func(f string) int64 {
			x, err := strconv.ParseInt(h[f], 10, 64)
			require.NoError(t, err, "%s: field %q of %v", st.msg, f, h)
			return x
		}
		b, S := num("b"), int64(p.slots())
		var sum, old, at, next int64
		for f := range h {
			j, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				continue // b, L, h, x, s, o, c
			}
			c := num(f)
			require.Positive(t, c, "%s: slot %d's count in %v", st.msg, j, h)
			require.True(t, j >= b-S && j <= b, "%s: slot %d kept outside %d…%d: %v", st.msg, j, b-S, b, h)
			if j == b-S+1 {
				next = c
			}
			switch {
			case j == b-S:
				old = c
			case j == b:
				at, sum = c, sum+c
			default:
				sum += c
			}
		}
		require.Equal(t, []int64{sum, old, at, next}, []int64{num("s"), num("o"), num("c"), num("d")}, "%s: summary s, o, c, d of %v", st.msg, h)
	}
}
