package history

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// backends runs f against a real redis-server and against miniredis (the
// embedded default server), each with a prefix of its own.
func backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	t.Run("redis-server", func(t *testing.T) {
		f(t, redistest.Shared(t).Client(t), redistest.Prefix(t))
	})
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		f(t, rdb, "sluice:")
	})
}

// t0 is a step boundary of 30 s.
var t0 = time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)

func TestRingMergesWorkersOfOneStep(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		a := Point{At: t0.Add(2 * time.Second), Grants: 10, Done: 9, Archived: 1, Refused: 2, Cooldowns: 1, Waiting: 3, Queued: 100, Limit: 40, Effective: 20, Workers: 1}
		b := Point{At: t0.Add(29 * time.Second), Grants: 5, Done: 4, Archived: 0, Refused: 1, Cooldowns: 0, Waiting: 2.5, Queued: 120, Limit: 40, Effective: 30, Workers: 1}
		require.NoError(t, r.Add(ctx, "http:request", a))
		require.NoError(t, r.Add(ctx, "http:request", b))

		step, pts, err := Read(ctx, rdb, prefix, "http:request", t0.Add(40*time.Second))
		require.NoError(t, err)
		assert.Equal(t, 30*time.Second, step)
		require.Len(t, pts, 1)
		want := Point{At: t0, Grants: 15, Done: 13, Archived: 1, Refused: 3, Cooldowns: 1, Waiting: 5.5, Queued: 120, Limit: 40, Effective: 30, Workers: 2}
		assert.Equal(t, want, pts[0])
	})
}

func TestRingReadsTheLastSlotsOldestFirst(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		for _, i := range []int{5, 0, 3, 119} {
			require.NoError(t, r.Add(ctx, "t", Point{At: t0.Add(time.Duration(i) * 30 * time.Second), Grants: float64(i), Workers: 1}), "step %d", i)
		}
		// now in step 119: steps 0..119 are the last 120.
		_, pts, err := Read(ctx, rdb, prefix, "t", t0.Add(119*30*time.Second+time.Second))
		require.NoError(t, err)
		var got []float64
		for _, p := range pts {
			got = append(got, p.Grants)
		}
		assert.Equal(t, []float64{0, 3, 5, 119}, got)
		// now in step 120: step 0 is more than an hour old.
		_, pts, err = Read(ctx, rdb, prefix, "t", t0.Add(120*30*time.Second))
		require.NoError(t, err)
		require.Len(t, pts, 3)
		assert.Equal(t, t0.Add(3*30*time.Second), pts[0].At)
		// now before step 119: a step from the future (a skewed clock) is left out.
		_, pts, err = Read(ctx, rdb, prefix, "t", t0.Add(100*30*time.Second))
		require.NoError(t, err)
		assert.Len(t, pts, 3)
	})
}

func TestRingLapReplacesAndOlderWritesAreDropped(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		lap := time.Duration(Slots) * 30 * time.Second
		require.NoError(t, r.Add(ctx, "t", Point{At: t0, Grants: 7, Queued: 999, Workers: 1}))
		require.NoError(t, r.Add(ctx, "t", Point{At: t0.Add(lap), Grants: 2, Queued: 1, Workers: 1}))
		// a late write of the older lap changes nothing.
		require.NoError(t, r.Add(ctx, "t", Point{At: t0.Add(time.Second), Grants: 100, Queued: 5000, Workers: 1}))

		_, pts, err := Read(ctx, rdb, prefix, "t", t0.Add(lap+time.Second))
		require.NoError(t, err)
		require.Len(t, pts, 1)
		assert.Equal(t, Point{At: t0.Add(lap), Grants: 2, Queued: 1, Workers: 1}, pts[0])
		n, err := rdb.HLen(ctx, Key(prefix, "t")).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(2), n, "step and one slot")
	})
}

func TestRingRestartsAtANewStep(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		old := NewRing(rdb, prefix, 30*time.Second)
		for i := range 5 {
			require.NoError(t, old.Add(ctx, "t", Point{At: t0.Add(time.Duration(i) * 30 * time.Second), Grants: 1, Workers: 1}))
		}
		r := NewRing(rdb, prefix, 10*time.Second)
		require.NoError(t, r.Add(ctx, "t", Point{At: t0.Add(150 * time.Second), Grants: 4, Workers: 1}))

		step, pts, err := Read(ctx, rdb, prefix, "t", t0.Add(155*time.Second))
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, step)
		require.Len(t, pts, 1)
		assert.Equal(t, Point{At: t0.Add(150 * time.Second), Grants: 4, Workers: 1}, pts[0])
	})
}

func TestRingExpires(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		for _, step := range []time.Duration{time.Second, 30 * time.Second, 10 * time.Minute} {
			r := NewRing(rdb, prefix, step)
			typ := "t" + step.String()
			require.NoError(t, r.Add(ctx, typ, Point{At: t0, Grants: 1, Workers: 1}))
			ttl, err := rdb.PTTL(ctx, Key(prefix, typ)).Result()
			require.NoError(t, err)
			want := time.Duration(Slots) * step * 2
			assert.InDelta(t, want.Seconds(), ttl.Seconds(), 1, "step %v", step)
		}
	})
}

func TestRingSkipsAndReplacesMalformedRecords(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r := NewRing(rdb, prefix, 30*time.Second)
		e := t0.UnixMilli() / 30000
		good := func(i int64) string { return strconv.FormatInt(e+i, 10) + " 1 1 0 0 0 0 0 10 0 1" }
		bad := map[int64]string{
			1: "garbage",
			2: strconv.FormatInt(e+2, 10) + " 1 1 0 0 0 0 0 10 0",     // 10 numbers
			3: strconv.FormatInt(e+3, 10) + " 1 x 0 0 0 0 0 10 0 1",   // not a number
			4: strconv.FormatInt(e+4, 10) + " 1 -1 0 0 0 0 0 10 0 1",  // negative
			5: strconv.FormatInt(e+5, 10) + " 1 1 0 0 0 0 0 10 0 1.5", // half a worker
			6: strconv.FormatInt(e+7, 10) + " 1 1 0 0 0 0 0 10 0 1",   // in another epoch's slot
		}
		h := map[string]any{"step": "30000", strconv.FormatInt((e)%Slots, 10): good(0)}
		for i, v := range bad {
			h[strconv.FormatInt((e+i)%Slots, 10)] = v
		}
		h["x"] = "not a slot"
		require.NoError(t, rdb.HSet(ctx, Key(prefix, "t"), h).Err())

		_, pts, err := Read(ctx, rdb, prefix, "t", t0.Add(10*time.Minute))
		require.NoError(t, err)
		require.Len(t, pts, 1)
		assert.Equal(t, t0, pts[0].At)

		// A write over a malformed record replaces it.
		require.NoError(t, r.Add(ctx, "t", Point{At: t0.Add(30 * time.Second), Grants: 3, Workers: 1}))
		_, pts, err = Read(ctx, rdb, prefix, "t", t0.Add(10*time.Minute))
		require.NoError(t, err)
		require.Len(t, pts, 2)
		assert.Equal(t, Point{At: t0.Add(30 * time.Second), Grants: 3, Workers: 1}, pts[1])
	})
}

func TestRingWithoutKey(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		step, pts, err := Read(context.Background(), rdb, prefix, "none", t0)
		require.NoError(t, err)
		assert.Equal(t, time.Duration(0), step)
		assert.Empty(t, pts)
	})
}

func TestRingRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	r := NewRing(rdb, "sluice:", 30*time.Second)
	cases := []struct {
		name string
		err  error
	}{
		{"empty type", r.Add(ctx, "", Point{At: t0})},
		{"brace", r.Add(ctx, "a}b", Point{At: t0})},
		{"long type", r.Add(ctx, string(make([]byte, MaxTypeLen+1)), Point{At: t0})},
		{"negative", r.Add(ctx, "t", Point{At: t0, Grants: -1})},
		{"step", NewRing(rdb, "sluice:", time.Microsecond).Add(ctx, "t", Point{At: t0})},
		{"waits tenant", r.AddWaits(ctx, "t", t0, map[string]time.Duration{"": time.Second})},
		{"waits negative", r.AddWaits(ctx, "t", t0, map[string]time.Duration{"a": -time.Second})},
	}
	for _, c := range cases {
		assert.True(t, errors.Is(c.err, ErrInvalid), "%s: %v", c.name, c.err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing written")
}

// TestRingMemory measures what a full ring of realistic values takes on
// redis-server (MEMORY USAGE, the key with its hash of 121 fields) and holds
// it under a bound: docs/control.md quotes the figure.
func TestRingMemory(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	r := NewRing(rdb, prefix, 30*time.Second)
	typ := "http:request"
	for i := range Slots {
		p := Point{
			At:     t0.Add(time.Duration(i) * 30 * time.Second),
			Grants: 12000 + float64(i), Done: 11900 + float64(i), Archived: 12, Refused: 340, Cooldowns: 3,
			Waiting: 250, Queued: 48210, Limit: 100000.0 / 60, Effective: 80000.0 / 60, Workers: 1,
		}
		for w := range 3 { // three workers write each step
			q := p
			q.At = q.At.Add(time.Duration(w) * time.Second)
			require.NoError(t, r.Add(ctx, typ, q))
		}
	}
	_, pts, err := Read(ctx, rdb, prefix, typ, t0.Add(time.Duration(Slots-1)*30*time.Second))
	require.NoError(t, err)
	require.Len(t, pts, Slots)
	assert.Equal(t, 3, pts[0].Workers)
	assert.Equal(t, 36000.0, pts[0].Grants)

	used, err := rdb.MemoryUsage(ctx, Key(prefix, typ)).Result()
	require.NoError(t, err)
	rec, err := rdb.HGet(ctx, Key(prefix, typ), "0").Result()
	require.NoError(t, err)
	t.Logf("a full ring (%d slots, records like %q) takes %d bytes (MEMORY USAGE)", Slots, rec, used)
	// The hash is one listpack of about 7.6 KB, allocated in jemalloc's
	// 8 KiB class, plus the key and its object (about 100 bytes).
	assert.LessOrEqual(t, used, int64(9<<10), "a ring's memory, bytes")
}

func TestFormatValue(t *testing.T) {
	cases := []struct {
		i    int
		v    float64
		want string
	}{
		{0, 36000, "36000"},
		{0, 1234567, "1234567"},
		{5, 2.5, "2.5"},
		{7, 100000.0 / 60, "1666.67"},
		{8, 1.0 / 3600, "0.000277778"},
		{7, 40, "40"},
		{7, 1234567, "1234570"},
	}
	for n, c := range cases {
		assert.Equal(t, c.want, formatValue(c.i, c.v), "case %d", n)
	}
}

// TestWaitsMemory measures a full minute of tenants' waits on redis-server
// (MEMORY USAGE): MaxTenants tenants with names of 18 bytes; docs/control.md
// quotes the figure.
func TestWaitsMemory(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	r := NewRing(rdb, prefix, 30*time.Second)
	waits := make(map[string]time.Duration, MaxTenants)
	for i := range MaxTenants {
		waits["tenant:acme-"+strconv.Itoa(100000+i)] = time.Duration(i*37) * time.Millisecond
	}
	require.NoError(t, r.AddWaits(ctx, "http:request", t0, waits))
	used, err := rdb.MemoryUsage(ctx, WaitsKey(prefix, "http:request", t0), 0).Result()
	require.NoError(t, err)
	t.Logf("a minute of %d tenants' waits takes %d bytes (MEMORY USAGE)", MaxTenants, used)
	assert.LessOrEqual(t, used, int64(128<<10), "a minute's waits, bytes")
}
