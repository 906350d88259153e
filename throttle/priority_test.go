package throttle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// These tests hold Share.Priority to docs/priorities.md: a higher level
// books first, behind at most the horizon already booked; the levels below
// keep their floor while they have work; within a level, weights hold.

// prioHorizon is the horizon of these tests (as the worker pool's default
// for 10 slots at 50/s); the shared bucket is shareGlobal, T = 20 ms.
const prioHorizon = 100 * time.Millisecond

// caller is one stream of callers of the simulations: a tenant at a level,
// with work from `from` until `to` (µs), asking at most once per `every`
// (0: as soon as its last turn is taken).
type caller struct {
	tenant    string
	level, w  int
	from, to  int64
	every     int64
	floor     float64
	firstSlot int64 // the slot of its first turn, µs; -1 before it
	turns     int   // its turns with slots in the counted span
}

// prioSim runs callers through one 50/s bucket with a plain tenant bucket
// beside it, on st (a memory or Redis store on clock): each asks at its
// come-back place when over its share, else again at once (or after its
// every); a turn counts if its slot is in [from, to). It returns when every
// caller's span has ended.
func prioSim(t *testing.T, st Store, clock *fakeClock, prefix string, cs []*caller, from, to time.Duration) {
	t.Helper()
	lim := NewLimiter(st, WithKeyPrefix(prefix))
	next := make([]int64, len(cs))
	for i, c := range cs {
		next[i], c.firstSlot = c.from, -1
	}
	for {
		who := -1
		for i, c := range cs {
			if next[i] < c.to && (who < 0 || next[i] < next[who]) {
				who = i
			}
		}
		if who < 0 {
			return
		}
		c, at := cs[who], next[who]
		clock.at(at)
		r, err := lim.ReserveAll(context.Background(), []Bucket{
			{Key: "{acct}:tenant:" + c.tenant, Limit: Limit{Rate: 1000, Burst: 100}},
			{Key: "{acct}:global", Limit: shareGlobal, Share: &Share{Tenant: c.tenant, Weight: c.w,
				Horizon: prioHorizon, Priority: c.level, Floor: c.floor}},
		}, time.Second)
		var lerr *LimitedError
		switch {
		case errors.As(err, &lerr):
			require.True(t, lerr.OverShare, "a second's wait is always enough for the bucket alone")
			next[who] = at + max(int64(lerr.RetryAfter/time.Microsecond), 1)
		case err != nil:
			t.Fatal(err)
		default:
			slot := r.d.slot() - base.UnixMicro()
			if c.firstSlot < 0 {
				c.firstSlot = slot
			}
			if micros(slot) >= from && micros(slot) < to {
				c.turns++
			}
			next[who] = at + max(c.every, 1)
		}
	}
}

// prioStores runs f on a memory store and on a real redis-server, each on a
// fake clock (the Redis store passes the clock's now to its scripts).
func prioStores(t *testing.T, f func(t *testing.T, st Store, clock *fakeClock, prefix string)) {
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			var st Store = NewMemoryStore(WithClock(clock))
			if name == "redis" {
				st = NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock))
			}
			f(t, st, clock, redistest.Prefix(t))
		})
	}
}

const sec = int64(time.Second / time.Microsecond)

// TestPriorityFirst: a backlog of priority 5 has the bucket to itself; a
// caller of priority 1 that arrives gets its first turn behind at most the
// horizon already booked (and one turn), not behind the backlog; from then
// on priority 1 books 95 % of the rate and priority 5 its floor, 5 %.
func TestPriorityFirst(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		low := &caller{tenant: "batch", level: 5, w: 1, from: 0, to: 12 * sec}
		high := &caller{tenant: "urgent", level: 1, w: 1, from: 2 * sec, to: 12 * sec}
		prioSim(t, st, clock, prefix, []*caller{low, high}, 3*time.Second, 11*time.Second)
		wait := micros(high.firstSlot - high.from)
		t.Logf("first turn of priority 1 after %v; turns in 8 s: p1 %d, p5 %d", wait, high.turns, low.turns)
		assert.LessOrEqual(t, wait, prioHorizon+20*time.Millisecond, "behind the horizon booked and one turn at most")
		assert.InDelta(t, 380, high.turns, 4, "95 % of 400")
		assert.InDelta(t, 20, low.turns, 2, "the floor: 5 % of 400")
	})
}

// TestPriorityAlone: a level alone has all of the bucket, whichever it is:
// priority 5 books every turn before priority 1 comes and after it leaves.
func TestPriorityAlone(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		low := &caller{tenant: "batch", level: 5, w: 1, from: 0, to: 10 * sec}
		high := &caller{tenant: "urgent", level: 1, w: 1, from: 0, to: 2 * sec}
		prioSim(t, st, clock, prefix, []*caller{low, high}, 3*time.Second, 9*time.Second)
		t.Logf("turns in 6 s after priority 1 left: p5 %d", low.turns)
		assert.InDelta(t, 300, low.turns, 1, "all of 6 s at 50/s")
		assert.Zero(t, high.turns)
	})
}

// TestPriorityFloorUnused: a lower level that asks for less than its floor
// leaves the rest to the higher one (work-conserving): priority 5 asks once
// a second, priority 1 takes the other 49 turns a second.
func TestPriorityFloorUnused(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		low := &caller{tenant: "batch", level: 5, w: 1, from: 0, to: 12 * sec, every: sec}
		high := &caller{tenant: "urgent", level: 1, w: 1, from: 0, to: 12 * sec}
		prioSim(t, st, clock, prefix, []*caller{low, high}, 2*time.Second, 12*time.Second)
		t.Logf("turns in 10 s: p1 %d, p5 %d", high.turns, low.turns)
		assert.InDelta(t, 10, low.turns, 1, "one a second, all it asks")
		assert.GreaterOrEqual(t, high.turns, 470, "priority 1 has the unused floor (of 490): nothing idles beyond a few turns")
		assert.LessOrEqual(t, high.turns+low.turns, 500)
	})
}

// TestPriorityThreeLevels: with levels 1, 3 and 5 at work, 1 books 95 %
// and the two below share the floor, 2.5 % each; a bigger floor (20 %)
// gives them 10 % each.
func TestPriorityThreeLevels(t *testing.T) {
	for _, floor := range []float64{0, 0.2} {
		t.Run(fmt.Sprint("floor", floor), func(t *testing.T) {
			prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
				cs := []*caller{
					{tenant: "a", level: 1, w: 1, to: 22 * sec, floor: floor},
					{tenant: "b", level: 3, w: 1, to: 22 * sec, floor: floor},
					{tenant: "c", level: 5, w: 1, to: 22 * sec, floor: floor},
				}
				prioSim(t, st, clock, prefix, cs, 2*time.Second, 22*time.Second)
				f := floor
				if f == 0 {
					f = 0.05
				}
				t.Logf("floor %g, turns in 20 s: p1 %d, p3 %d, p5 %d", f, cs[0].turns, cs[1].turns, cs[2].turns)
				assert.InDelta(t, 1000*(1-f), cs[0].turns, 1000*(1-f)*0.02)
				assert.InDelta(t, 1000*f/2, cs[1].turns, 1000*f/2*0.1)
				assert.InDelta(t, 1000*f/2, cs[2].turns, 1000*f/2*0.1)
			})
		})
	}
}

// TestPriorityTenants: within a level the tenants' weights hold: two
// tenants of weights 3 and 1 at priority 3 share its 95 % 3:1 while a
// tenant at priority 5 keeps the floor, all within 10 %.
func TestPriorityTenants(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		cs := []*caller{
			{tenant: "paid", level: 3, w: 3, to: 22 * sec},
			{tenant: "free", level: 3, w: 1, to: 22 * sec},
			{tenant: "batch", level: 5, w: 1, to: 22 * sec},
		}
		prioSim(t, st, clock, prefix, cs, 2*time.Second, 22*time.Second)
		t.Logf("turns in 20 s: paid %d, free %d, batch (p5) %d", cs[0].turns, cs[1].turns, cs[2].turns)
		assert.InEpsilon(t, 3.0, float64(cs[0].turns)/float64(cs[1].turns), 0.1, "paid:free 3:1 within 10 %")
		assert.InEpsilon(t, 950, cs[0].turns+cs[1].turns, 0.02, "priority 3 has 95 %")
		assert.InEpsilon(t, 50, cs[2].turns, 0.1, "priority 5 its floor")
	})
}

// TestPriorityLockstep drives random calls of tenants at random levels and
// floors through one shared bucket (adaptive, its rate announced anew now
// and then, on odd seeds), with cooldowns, on a memory store, a real
// redis-server and miniredis, and requires the same answer from each at
// every step, and the same Shares: share.lua and share_memory.go are one
// law with levels too.
func TestPriorityLockstep(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 26))
			mr, mini := miniredisClient(t)
			clock := newFakeClock()
			stores := []Store{
				NewMemoryStore(WithClock(clock)),
				NewRedisStore(persisting{redistest.Shared(t).Client(t)}, WithClock(clock)),
				NewRedisStore(mini, WithClock(clock)),
			}
			names := []string{"memory", "redis", "miniredis"}
			prefix := redistest.Prefix(t)
			lims := make([]*Limiter, len(stores))
			for i, st := range stores {
				lims[i] = NewLimiter(st, WithKeyPrefix(prefix))
			}
			ctx := context.Background()
			now, overs, grants := int64(0), 0, 0
			levels := map[int]bool{}
			// Odd seeds share an adaptive bucket whose upstream announces rates.
			var shared Policy = shareGlobal
			adaptive := Adaptive{Ceiling: shareGlobal}
			if seed%2 == 1 {
				shared = adaptive
			}
			for step := range 500 {
				msg := fmt.Sprintf("seed %d step %d", seed, step)
				mr.FastForward(micros(now) - clock.Now().Sub(base))
				clock.at(now)
				if rng.IntN(5) == 0 {
					now += rng.Int64N(80_000)
					continue
				}
				if seed%2 == 1 && rng.IntN(30) == 0 { // the upstream announces another rate
					rate := float64(5 + rng.IntN(46))
					for i := range lims {
						_, _, err := lims[i].Announced(ctx, "{acct}:global", adaptive, rate)
						require.NoError(t, err, msg)
					}
					continue
				}
				if rng.IntN(40) == 0 { // an upstream's 429 cools the shared bucket down
					d := time.Duration(rng.Int64N(300)) * time.Millisecond
					for i := range lims {
						_, err := lims[i].Cooldown(ctx, "{acct}:global", shared, d)
						require.NoError(t, err, msg)
					}
					continue
				}
				tn := []string{"a", "b", "c"}[rng.IntN(3)]
				sh := &Share{Tenant: tn, Weight: 1 + rng.IntN(3), Horizon: prioHorizon,
					Priority: rng.IntN(6), Floor: []float64{0, 0.1, 0.3}[rng.IntN(3)]}
				req := request{prefix: prefix, maxWait: []int64{-1, 0, 200_000}[rng.IntN(3)],
					one:  Bucket{Key: "{acct}:tenant:" + tn, Limit: Limit{Rate: 1000, Burst: 100}, N: 1},
					more: []Bucket{{Key: "{acct}:global", Limit: shared, N: 1 + rng.IntN(2), Share: sh}}}
				require.NoError(t, lims[0].check(&req), msg)
				var first decision
				for i, st := range stores {
					d, err := st.reserve(ctx, req)
					require.NoError(t, err, msg)
					// An adaptive grant's period travels with the request,
					// not in the script's reply: the memory store's alone sets it.
					for k := range d.taken {
						d.taken[k].per = 0
					}
					if i == 0 {
						first = d
					} else {
						require.Equal(t, first, d, "%s: %s agrees with memory", msg, names[i])
					}
				}
				if first.overShare {
					overs++
				} else if first.granted {
					grants++
					levels[sh.Priority] = true
				}
				if step%50 == 49 {
					want, wantN, err := lims[0].Shares(ctx, "{acct}:global", shared, 20)
					require.NoError(t, err, msg)
					for i := 1; i < len(lims); i++ {
						got, n, err := lims[i].Shares(ctx, "{acct}:global", shared, 20)
						require.NoError(t, err, msg)
						assert.Equal(t, wantN, n, "%s: %s counts the pairs as memory", msg, names[i])
						assert.Equal(t, want, got, "%s: %s lists the pairs as memory", msg, names[i])
					}
				}
			}
			assert.Positive(t, overs, "some calls were over their share")
			assert.Positive(t, grants, "some calls were granted")
			assert.GreaterOrEqual(t, len(levels), 4, "calls of most levels were granted")
		})
	}
}

// TestPriorityInvalid: a bad priority, floor or tenant is an error before any I/O.
func TestPriorityInvalid(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	for _, c := range []struct {
		sh   Share
		want string
	}{
		{Share{Tenant: "a", Priority: 6}, "priority 6 is not between 1 and 5"},
		{Share{Tenant: "a", Priority: -1}, "priority -1 is not between 1 and 5"},
		{Share{Tenant: "a", Floor: 0.6}, "floor 0.6 is not between 0.001 and 0.5"},
		{Share{Tenant: "a", Floor: -0.1}, "floor -0.1 is not between 0.001 and 0.5"},
		{Share{Tenant: "\x011a"}, "contains the byte 0x01"},
	} {
		sh := c.sh
		_, err := lim.ReserveAll(context.Background(), []Bucket{{Key: "q", Limit: shareGlobal, Share: &sh}}, time.Second)
		require.ErrorIs(t, err, ErrInvalid, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

// TestPriorityShares: Limiter.Shares lists each (level, tenant) pair with
// its level and its part of the rate: the highest level 1 − floor, the
// level below the floor, within each level by weight.
func TestPriorityShares(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		lim := NewLimiter(st, WithKeyPrefix(prefix))
		ctx := context.Background()
		clock.at(0)
		take := func(tenant string, w, level int) {
			_, err := lim.ReserveAll(ctx, []Bucket{{Key: "q", Limit: shareGlobal,
				Share: &Share{Tenant: tenant, Weight: w, Priority: level, Floor: 0.1, Horizon: prioHorizon}}}, time.Minute)
			require.NoError(t, err)
		}
		take("a", 3, 2)
		take("b", 1, 2)
		take("a", 1, 4)
		got, n, err := lim.Shares(ctx, "q", shareGlobal, 10)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		byPair := map[string]TenantShare{}
		for _, ts := range got {
			byPair[fmt.Sprint(ts.Priority, ts.Tenant)] = ts
		}
		assert.InDelta(t, 0.9*3/4, byPair["2a"].Share, 1e-9)
		assert.InDelta(t, 0.9*1/4, byPair["2b"].Share, 1e-9)
		assert.InDelta(t, 0.1, byPair["4a"].Share, 1e-9)
		assert.Equal(t, 4, byPair["4a"].Priority)
		assert.Equal(t, "a", byPair["4a"].Tenant)
	})
}

// TestPriorityBatch: calls of one shape with a Share, coalesced into one
// script call (reserve_batch.lua), are decided as the same calls one after
// the other: the same decisions from a batch on Redis and on miniredis as
// from single calls on a memory store, at each level.
func TestPriorityBatch(t *testing.T) {
	clock := newFakeClock()
	mr, mini := miniredisClient(t)
	prefix := redistest.Prefix(t)
	single := NewMemoryStore(WithClock(clock))
	batched := []Store{
		NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
		NewRedisStore(mini, WithClock(clock)),
		NewMemoryStore(WithClock(clock)),
	}
	lim := NewLimiter(single, WithKeyPrefix(prefix))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(26, 1))
	overs := 0
	for step := range 60 {
		now := int64(step) * 30_000
		mr.FastForward(micros(now) - clock.Now().Sub(base))
		clock.at(now)
		sh := &Share{Tenant: "send", Priority: 1 + rng.IntN(5), Horizon: prioHorizon}
		reqs := make([]request, 1+rng.IntN(6))
		for i := range reqs {
			reqs[i] = request{prefix: prefix, maxWait: []int64{-1, 0, 50_000}[rng.IntN(3)],
				one: Bucket{Key: "send", Limit: shareGlobal, N: 1, Share: sh}}
			require.NoError(t, lim.check(&reqs[i]))
		}
		want := make([]decision, len(reqs))
		for i := range reqs {
			d, err := single.reserve(ctx, reqs[i])
			require.NoError(t, err)
			want[i] = d
			if d.overShare {
				overs++
			}
		}
		for j, st := range batched {
			got, err := st.reserveBatch(ctx, reqs)
			require.NoError(t, err)
			assert.Equal(t, want, got, "step %d: batched store %d decides as single calls", step, j)
		}
	}
	assert.Positive(t, overs, "some calls were over their level's share")
}

// TestPriorityCluster: a priority Share on plain buckets (no hash tag of
// their own, as a worker's type limit) works on a Redis Cluster: the share's
// keys land in their bucket's slot, over several masters.
func TestPriorityCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	lim := NewLimiter(NewRedisStore(c.Client(t)), WithKeyPrefix(redistest.Prefix(t)))
	ctx := context.Background()
	for i := range 12 {
		name := fmt.Sprint("type", i)
		take := func(level int) (*Reservation, error) {
			return lim.ReserveAll(ctx, []Bucket{{Key: name, Limit: shareGlobal,
				Share: &Share{Tenant: name, Priority: level, Horizon: prioHorizon}}}, time.Minute)
		}
		low := 0
		for {
			_, err := take(5)
			if errors.Is(err, ErrOverShare) {
				break
			}
			require.NoError(t, err, name)
			low++
		}
		assert.Positive(t, low, "%s: priority 5 booked its horizon", name)
		r, err := take(1)
		require.NoError(t, err, name)
		assert.LessOrEqual(t, r.Delay(), prioHorizon+20*time.Millisecond, "%s: priority 1 behind the horizon booked", name)
		ts, n, err := lim.Shares(ctx, name, shareGlobal, 10)
		require.NoError(t, err, name)
		assert.Equal(t, 2, n, name)
		assert.Len(t, ts, 2, name)
	}
}

// TestPriorityCooldown: while the shared bucket cools down (an upstream's
// 429), a backlog of priority 5 books at most its horizon past the
// cooldown's end, not the whole cooldown's worth: a caller of priority 1
// that comes at the end books right behind that horizon.
func TestPriorityCooldown(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		lim := NewLimiter(st, WithKeyPrefix(prefix))
		ctx := context.Background()
		take := func(level int) (*Reservation, error) {
			return lim.ReserveAll(ctx, []Bucket{
				{Key: "{acct}:tenant:a", Limit: Limit{Rate: 1000, Burst: 100}},
				{Key: "{acct}:global", Limit: shareGlobal, Share: &Share{Tenant: "a", Priority: level, Horizon: prioHorizon}},
			}, time.Minute)
		}
		clock.at(0)
		_, err := lim.Cooldown(ctx, "{acct}:global", shareGlobal, time.Second)
		require.NoError(t, err)
		// Priority 5 asks every 10 ms through the cooldown.
		booked := 0
		for now := int64(0); now < 900_000; now += 10_000 {
			clock.at(now)
			if _, err := take(5); err == nil {
				booked++
			} else {
				require.ErrorIs(t, err, ErrOverShare)
			}
		}
		clock.at(900_000)
		r, err := take(1)
		require.NoError(t, err)
		t.Logf("priority 5 booked %d turns during the cooldown; priority 1 waits %v", booked, r.Delay())
		assert.LessOrEqual(t, booked, 6, "the horizon past the cooldown's end (100 ms: 5 turns) and one")
		assert.LessOrEqual(t, r.Delay(), 100*time.Millisecond+prioHorizon+20*time.Millisecond,
			"priority 1 books behind the horizon past the cooldown's end")
	})
}

// TestPriorityAdaptive: on an adaptive bucket whose upstream lowered its
// rate (50/s → 25/s), the tags move at the rate the bucket grants, so a
// backlog books its horizon of the bucket's time, not twice as much, and a
// caller of priority 1 waits no longer than that; the memory store and
// Redis agree.
func TestPriorityAdaptive(t *testing.T) {
	prioStores(t, func(t *testing.T, st Store, clock *fakeClock, prefix string) {
		lim := NewLimiter(st, WithKeyPrefix(prefix))
		ctx := context.Background()
		a := Adaptive{Ceiling: shareGlobal}
		clock.at(0)
		_, _, err := lim.Announced(ctx, "send", a, 25)
		require.NoError(t, err)
		take := func(level int) (*Reservation, error) {
			return lim.ReserveAll(ctx, []Bucket{{Key: "send", Limit: a,
				Share: &Share{Tenant: "send", Priority: level, Horizon: prioHorizon}}}, time.Minute)
		}
		booked := 0
		for {
			if _, err := take(5); errors.Is(err, ErrOverShare) {
				break
			}
			require.NoError(t, err)
			booked++
		}
		r, err := take(1)
		require.NoError(t, err)
		t.Logf("priority 5 booked %d turns at 25/s; priority 1 waits %v", booked, r.Delay())
		assert.LessOrEqual(t, booked, 4, "100 ms of a 25/s bucket (T = 40 ms) and one turn more")
		assert.LessOrEqual(t, r.Delay(), prioHorizon+40*time.Millisecond, "behind the horizon booked at the bucket's rate")
	})
}
