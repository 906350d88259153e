package throttle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// calStep is a call at an instant: take n (TryAcquireAll over the
// policies, each on its own key), and the answer.
type calStep struct {
	at      time.Time
	n       int
	granted bool
	retry   time.Duration // when not granted
	left    int           // Remaining
}

// Calendar windows on both stores, one fake clock: a day of 23 and of 25
// hours, month ends, ISO weeks, quarter-hour zones. Each case takes a
// quota of 2 to its end and asks again; the retry says where the window ends.
func TestCalendarWindows(t *testing.T) {
	ny, ktm, cht := mustZone(t, "America/New_York"), mustZone(t, "Asia/Kathmandu"), mustZone(t, "Pacific/Chatham")
	day := func(loc *time.Location) FixedWindow { return FixedWindow{Max: 2, Calendar: "day", Zone: loc} }
	cases := []struct {
		name  string
		p     FixedWindow
		steps []calStep
	}{
		{"New York, 8 March 2026: a 23-hour day", day(ny), []calStep{
			{at: time.Date(2026, 3, 8, 0, 30, 0, 0, ny), n: 2, granted: true, left: 0},
			{at: time.Date(2026, 3, 8, 0, 30, 0, 0, ny), n: 1, retry: 22*time.Hour + 30*time.Minute},
			{at: time.Date(2026, 3, 8, 23, 59, 59, 0, ny), n: 1, retry: time.Second},
			{at: time.Date(2026, 3, 9, 0, 0, 0, 0, ny), n: 1, granted: true, left: 1},
		}},
		{"New York, 1 November 2026: a 25-hour day", day(ny), []calStep{
			{at: time.Date(2026, 11, 1, 0, 30, 0, 0, ny), n: 2, granted: true},
			{at: time.Date(2026, 11, 1, 0, 30, 0, 0, ny), n: 1, retry: 24*time.Hour + 30*time.Minute},
			{at: time.Date(2026, 11, 2, 0, 0, 0, 0, ny).Add(-time.Microsecond), n: 1, retry: time.Microsecond},
			{at: time.Date(2026, 11, 2, 0, 0, 0, 0, ny), n: 2, granted: true},
		}},
		{"Kathmandu: the day ends at 18:15 UTC", day(ktm), []calStep{
			{at: time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC), n: 2, granted: true},
			{at: time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC), n: 1, retry: 15 * time.Minute},
			{at: time.Date(2026, 5, 1, 18, 15, 0, 0, time.UTC), n: 1, granted: true, left: 1},
		}},
		{"Chatham: a 25-hour day in April, ending at 11:15 UTC", day(cht), []calStep{
			{at: time.Date(2026, 4, 5, 0, 0, 0, 0, cht), n: 2, granted: true},
			{at: time.Date(2026, 4, 5, 0, 0, 0, 0, cht), n: 1, retry: 25 * time.Hour},
			{at: time.Date(2026, 4, 5, 11, 15, 0, 0, time.UTC), n: 1, granted: true, left: 1},
		}},
		{"months of 28, 29, 30 and 31 days", FixedWindow{Max: 2, Calendar: "month"}, []calStep{
			{at: time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), n: 2, granted: true},
			{at: time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), n: 1, retry: 28 * 24 * time.Hour},
			{at: time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC), n: 2, granted: true},
			{at: time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC), n: 1, retry: 29 * 24 * time.Hour},
			{at: time.Date(2028, 4, 1, 0, 0, 0, 0, time.UTC), n: 2, granted: true},
			{at: time.Date(2028, 4, 1, 0, 0, 0, 0, time.UTC), n: 1, retry: 30 * 24 * time.Hour},
			{at: time.Date(2028, 12, 31, 23, 0, 0, 0, time.UTC), n: 2, granted: true},
			{at: time.Date(2028, 12, 31, 23, 0, 0, 0, time.UTC), n: 1, retry: time.Hour},
			{at: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), n: 1, granted: true, left: 1},
		}},
		{"ISO weeks in New York: Monday 00:00 local", FixedWindow{Max: 2, Calendar: "week", Zone: ny}, []calStep{
			{at: time.Date(2026, 12, 31, 9, 0, 0, 0, ny), n: 2, granted: true}, // a Thursday
			{at: time.Date(2027, 1, 3, 23, 0, 0, 0, ny), n: 1, retry: time.Hour},
			{at: time.Date(2027, 1, 4, 0, 0, 0, 0, ny), n: 1, granted: true, left: 1},
		}},
	}
	stores, clock := settleStores(t)
	for name, store := range stores {
		lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)+name+":"))
		for ci, c := range cases {
			for si, s := range c.steps {
				clock.mu.Lock()
				clock.t = s.at
				clock.mu.Unlock()
				msg := fmt.Sprintf("%s: case %d (%s) step %d", name, ci, c.name, si)
				res, err := lim.TryAcquire(context.Background(), fmt.Sprintf("cal%d", ci), c.p, s.n)
				require.NoError(t, err, msg)
				assert.Equal(t, s.granted, res.Allowed, msg+": granted")
				if s.granted {
					assert.Equal(t, s.left, res.Remaining, msg+": remaining")
				} else {
					assert.Equal(t, s.retry, res.RetryAfter, msg+": retry")
				}
			}
		}
	}
}

// setClock moves a fake clock to t.
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// A calendar tier stacked with a short one: all or nothing, and a denial by
// either charges neither; a raised Max applies to the window's next grant,
// with what was used still counted; a booking goes into the next window at
// most, and beyond it the call is refused until the window it needs starts.
func TestCalendarStackedAndChanged(t *testing.T) {
	la := mustZone(t, "America/Los_Angeles")
	perSec := FixedWindow{Max: 2, Window: time.Second}
	daily := FixedWindow{Max: 3, Calendar: "day", Zone: la}
	noon := time.Date(2026, 7, 1, 12, 0, 0, 0, la)
	stores, clock := settleStores(t)
	for name, store := range stores {
		ctx := context.Background()
		lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)+name+":"))
		both := func(n int) []Bucket {
			return []Bucket{{Key: "{a}:s", Limit: perSec, N: n}, {Key: "{a}:d", Limit: daily, N: n}}
		}
		clock.set(noon)
		res, err := lim.TryAcquireAll(ctx, both(2))
		require.NoError(t, err, name)
		assert.True(t, res.Allowed, name)
		// the second's tier refuses: the day's counts nothing
		res, err = lim.TryAcquireAll(ctx, both(1))
		require.NoError(t, err, name)
		assert.False(t, res.Allowed, name)
		clock.set(noon.Add(time.Second))
		st, err := lim.Peek(ctx, "{a}:d", daily)
		require.NoError(t, err, name)
		assert.Equal(t, 1, st.Remaining, name+": the denied call charged the day nothing")
		assert.Equal(t, 2, st.Used, name)
		assert.True(t, time.Date(2026, 7, 2, 0, 0, 0, 0, la).Equal(st.Resets), name+": resets at midnight in Los Angeles, not %v", st.Resets)
		st, err = lim.Peek(ctx, "{a}:s", perSec)
		require.NoError(t, err, name)
		assert.Zero(t, st.Used, name+": not a calendar quota")
		assert.True(t, st.Resets.IsZero(), name)
		// the day's tier refuses 2: the second's counts nothing
		res, err = lim.TryAcquireAll(ctx, both(2))
		require.NoError(t, err, name)
		assert.False(t, res.Allowed, name)
		assert.Equal(t, 12*time.Hour-time.Second, res.RetryAfter, name+": until midnight in Los Angeles")
		res, err = lim.TryAcquireAll(ctx, []Bucket{{Key: "{a}:s", Limit: perSec, N: 2}})
		require.NoError(t, err, name)
		assert.True(t, res.Allowed, name+": the denied call charged the second nothing")

		// raised mid-window: 2 used of 3 still count, 4 more of 6 left
		raised := daily
		raised.Max = 6
		res, err = lim.TryAcquire(ctx, "{a}:d", raised, 5)
		require.NoError(t, err, name)
		assert.False(t, res.Allowed, name+": 2 used + 5 > 6")
		res, err = lim.TryAcquire(ctx, "{a}:d", raised, 3)
		require.NoError(t, err, name)
		assert.True(t, res.Allowed, name)
		assert.Equal(t, 1, res.Remaining, name)
		// lowered below what was used: nothing left until midnight
		res, err = lim.TryAcquire(ctx, "{a}:d", daily, 1)
		require.NoError(t, err, name)
		assert.False(t, res.Allowed, name)

		// bookings: the next window, then a refusal until it starts
		r, err := lim.Reserve(ctx, "{b}", daily, 3, -1)
		require.NoError(t, err, name)
		assert.Equal(t, time.Duration(0), r.Delay(), name)
		r, err = lim.Reserve(ctx, "{b}", daily, 3, -1)
		require.NoError(t, err, name)
		assert.InDelta(t, float64(12*time.Hour-time.Second), float64(r.Delay()), float64(time.Second), name+": tomorrow's window")
		_, err = lim.Reserve(ctx, "{b}", daily, 1, -1)
		var limited *LimitedError
		require.True(t, errors.As(err, &limited), name)
		assert.Equal(t, 36*time.Hour-time.Second, limited.RetryAfter, name+": the day after tomorrow")
	}
}

func TestCalendarValidate(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	for i, p := range []FixedWindow{
		{Max: 1, Calendar: "year"},
		{Max: 1, Calendar: "day", Window: time.Hour},
		{Max: 1, Window: time.Hour, Zone: ny},
		{Max: 0, Calendar: "day"},
	} {
		assert.ErrorIs(t, Validate(p), ErrInvalid, "case %d", i)
	}
	assert.NoError(t, Validate(FixedWindow{Max: 1, Calendar: "month", Zone: ny}))
	n, span := QuotaOf(FixedWindow{Max: 5, Calendar: "week"})
	assert.Equal(t, 5, n)
	assert.Equal(t, 7*24*time.Hour, span)
}

// On Redis's own clock: a zone the test makes so that its midnight is a
// moment away. The count of the day before ends exactly there, and the
// key's TTL ends soon after the window does.
func TestCalendarRedisTime(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	now := time.Now().UTC()
	m := now.Add(1500 * time.Millisecond).Truncate(time.Second)
	toMidnight := m.Sub(now)
	// the zone whose local midnight is at m: offset = -(seconds of m's UTC day)
	sec := m.Hour()*3600 + m.Minute()*60 + m.Second()
	zone := time.FixedZone("soon", -sec)
	p := FixedWindow{Max: 2, Calendar: "day", Zone: zone}
	res, err := lim.TryAcquire(ctx, "k", p, 2)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	res, err = lim.TryAcquire(ctx, "k", p, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	assert.InDelta(t, float64(toMidnight), float64(res.RetryAfter), float64(100*time.Millisecond), "until the zone's midnight")
	ttl, err := rdb.PTTL(ctx, stateKey(prefix, "k", p)).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, res.RetryAfter, "the key lives to the window's end")
	assert.Less(t, ttl, res.RetryAfter+2*time.Second, "and about a second more")
	time.Sleep(res.RetryAfter)
	res, err = lim.TryAcquire(ctx, "k", p, 2)
	require.NoError(t, err)
	assert.True(t, res.Allowed, "a new day on the store's clock")
}

// Random takes, tries, cancels and pauses of about a day, in lockstep on the
// memory store, a real redis-server and miniredis (runRandom), across New
// York's daylight-saving changes and month ends: every store gives the same
// answers, and no calendar window grants more than Max.
func TestCalendarRandom(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	cht := mustZone(t, "Pacific/Chatham")
	pols := []FixedWindow{
		{Max: 3, Calendar: "day", Zone: ny},
		{Max: 5, Calendar: "week", Zone: cht},
		{Max: 2, Calendar: "month"},
		{Max: 4, Calendar: "day", Zone: mustZone(t, "Asia/Kathmandu")},
	}
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := pols[int(seed)%len(pols)]
			_, unit := p.quota()
			times := grantTimes(runRandom(t, p, seed, int64(unit/time.Microsecond), true, nil))
			require.NotEmpty(t, times)
			perWindow := map[int64]int{}
			for _, x := range times {
				perWindow[p.bounds(x)[0]]++
			}
			for w, c := range perWindow {
				require.LessOrEqual(t, c, p.Max, "window from %v", time.UnixMicro(w).In(p.zone()))
			}
		})
	}
}

// The store's clock against the client's around a boundary: the script
// counts in whichever of the windows it was given holds Redis's now. A store
// clock in the window before them (the client is ahead, already past
// midnight) is refused until the boundary, a moment away; one in the next
// window counts there; one past them is an error, not a guess.
func TestCalendarClockSkew(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	p := FixedWindow{Max: 2, Calendar: "day"}
	midnight := time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)
	b := Bucket{Key: "k", Limit: p, N: 1}
	run := func(store, client time.Time) ([]int64, error) {
		keys := bucketKeys(nil, prefix, &b)
		args := bucketArgs([]any{strconv.FormatInt(store.UnixMicro(), 10), "0"}, &b, fixedClock(client))
		return runInts(ctx, rdb, bucketScripts[scriptReserve][kindCW], keys, args)
	}
	// the client is a second into the new day, Redis 300 ms before it
	v, err := run(midnight.Add(-300*time.Millisecond), midnight.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, int64(0), v[0], "refused")
	assert.Equal(t, int64(300000), v[1], "until midnight, 300 ms away")
	// the client is a second before midnight, Redis 300 ms after it: the new day counts
	for i := range 2 {
		v, err = run(midnight.Add(300*time.Millisecond), midnight.Add(-time.Second))
		require.NoError(t, err)
		assert.Equal(t, int64(1), v[0], "granted %d", i)
	}
	v, err = run(midnight.Add(300*time.Millisecond), midnight.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, int64(0), v[0], "the new day's 2 were counted, whichever clock the client had")
	// Redis two days ahead of the client: an error
	_, err = run(midnight.Add(48*time.Hour), midnight)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check the hosts' clocks")
}

// fixedClock is a clock that always reads t.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// A booking pushed past the known windows by another bucket of the call (a
// month's quota stacked on a day's) goes in a window named by its slot until
// a call knows its bounds: it counts there, on both stores alike, and never
// lets that day grant more than Max.
func TestCalendarPushedPastKnownWindows(t *testing.T) {
	day := FixedWindow{Max: 3, Calendar: "day"}
	month := FixedWindow{Max: 1, Calendar: "month"}
	stores, clock := settleStores(t)
	for name, store := range stores {
		ctx := context.Background()
		lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)+name+":"))
		clock.set(time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC))
		both := []Bucket{{Key: "{a}:m", Limit: month, N: 1}, {Key: "{a}:d", Limit: day, N: 1}}
		r, err := lim.ReserveAll(ctx, both, -1)
		require.NoError(t, err, name)
		assert.Equal(t, time.Duration(0), r.Delay(), name)
		// the month is spent: the next call books 1 August, 21 days past the day's known windows
		r, err = lim.ReserveAll(ctx, both, -1)
		require.NoError(t, err, name)
		aug := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
		assert.True(t, aug.Equal(r.Slot()), "%s: booked at %v", name, r.Slot())
		// on 1 August the day knows its window: the booking counts in it
		clock.set(aug.Add(time.Hour))
		st, err := lim.Peek(ctx, "{a}:d", day)
		require.NoError(t, err, name)
		assert.Equal(t, 2, st.Remaining, name+": 1 of 3 booked on 1 August")
		res, err := lim.TryAcquire(ctx, "{a}:d", day, 3)
		require.NoError(t, err, name)
		assert.False(t, res.Allowed, name+": never 4 on one day")
		res, err = lim.TryAcquire(ctx, "{a}:d", day, 2)
		require.NoError(t, err, name)
		assert.True(t, res.Allowed, name)
	}
}

// Exact across processes: four limiters, each with a client of its own, and
// 50 goroutines each asking at once on Redis's clock, grant a day's quota of
// 100 exactly, and nothing more.
func TestCalendarExactAcrossClients(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	// a zone where it is about noon now: no midnight within the test
	now := time.Now().UTC()
	noon := -(now.Hour()*3600 + now.Minute()*60 + now.Second()) + 12*3600
	p := FixedWindow{Max: 100, Calendar: "day", Zone: time.FixedZone("noon", noon)}
	var granted, refused atomicCount
	var wg sync.WaitGroup
	for range 4 {
		lim := NewLimiter(NewRedisStore(srv.Client(t)), WithKeyPrefix(prefix))
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					res, err := lim.TryAcquire(context.Background(), "shared", p, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						granted.add()
					} else {
						refused.add()
					}
				}
			}()
		}
	}
	wg.Wait()
	assert.Equal(t, int64(100), granted.load(), "exactly the day's quota")
	assert.Equal(t, int64(500), refused.load())
}

type atomicCount struct{ n atomic.Int64 }

func (c *atomicCount) add()        { c.n.Add(1) }
func (c *atomicCount) load() int64 { return c.n.Load() }

// Bounded state: a year of daily windows, one take a day, leaves one key per
// bucket (each window rewrites it), which expires a second after the window
// it counts ends.
func TestCalendarYearLeavesOneKey(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	clock := newFakeClock()
	lim := NewLimiter(NewRedisStore(rdb, WithClock(clock)), WithKeyPrefix(prefix))
	ny := mustZone(t, "America/New_York")
	p := FixedWindow{Max: 5, Calendar: "day", Zone: ny}
	day := time.Date(2026, 1, 1, 9, 0, 0, 0, ny)
	for i := range 365 {
		clock.set(day.AddDate(0, 0, i))
		res, err := lim.TryAcquire(ctx, "daily", p, 5)
		require.NoError(t, err, "day %d", i)
		require.True(t, res.Allowed, "day %d: a new window each day", i)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{stateKey(prefix, "daily", p)}, keys)
	ttl, err := rdb.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	// 9:00 on the last day: 15 hours to midnight, and a second
	assert.InDelta(t, float64(15*time.Hour+time.Second), float64(ttl), float64(time.Second))
}
