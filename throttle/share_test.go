package throttle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// shareGlobal is the shared bucket of these tests: 50/s, burst 5 (T = 20 ms).
var shareGlobal = Limit{Rate: 50, Period: time.Second, Burst: 5}

// shareReq is a call of tenant t (weight w) on its own bucket and the shared one.
func shareReq(prefix, t string, w int, maxWait int64) request {
	return request{prefix: prefix, maxWait: maxWait,
		one:  Bucket{Key: "{acct}:tenant:" + t, Limit: Limit{Rate: 1000, Burst: 100}, N: 1},
		more: []Bucket{{Key: "{acct}:global", Limit: shareGlobal, N: 1, Share: &Share{Tenant: t, Weight: w}}}}
}

// TestShareLockstep drives random calls of three tenants (weights 1, 1 and
// 3) through one shared bucket on a memory store, a real redis-server and
// miniredis, and requires the same answer from each at every step:
// share.lua and share_memory.go are one law.
func TestShareLockstep(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 12))
			mr, mini := miniredisClient(t)
			clock := newFakeClock()
			stores := []Store{
				NewMemoryStore(WithClock(clock)),
				NewRedisStore(persisting{redistest.Shared(t).Client(t)}, WithClock(clock)),
				NewRedisStore(mini, WithClock(clock)),
			}
			names := []string{"memory", "redis", "miniredis"}
			prefix := redistest.Prefix(t)
			lim := NewLimiter(stores[0], WithKeyPrefix(prefix))
			tenants := []struct {
				name string
				w    int
			}{{"a", 1}, {"b", 1}, {"c", 3}}
			ctx := context.Background()
			now, overs, grants := int64(0), 0, 0
			for step := range 400 {
				msg := fmt.Sprintf("seed %d step %d", seed, step)
				mr.FastForward(micros(now) - clock.Now().Sub(base))
				clock.at(now)
				if rng.IntN(4) == 0 {
					now += rng.Int64N(60_000)
					continue
				}
				tn := tenants[rng.IntN(len(tenants))]
				req := shareReq(prefix, tn.name, tn.w, []int64{-1, 0, 200_000}[rng.IntN(3)])
				require.NoError(t, lim.check(&req), msg)
				var first decision
				for i, st := range stores {
					d, err := st.reserve(ctx, req)
					require.NoError(t, err, msg)
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
				}
			}
			assert.Positive(t, overs, "some calls were over their share")
			assert.Positive(t, grants, "some calls were granted")
		})
	}
}

// fairSim runs tenants that always have work through a shared 50/s bucket
// on a memory store with a fake clock: each asks at its come-back place when
// over its share, else as soon as its last turn is due, and takes every
// turn offered within a second. It returns each tenant's turns in [from, to).
func fairSim(t *testing.T, weights map[string]int, from, to time.Duration) map[string]int {
	t.Helper()
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	next := map[string]int64{} // when each tenant asks next, µs
	for name := range weights {
		next[name] = 0
	}
	got := map[string]int{}
	end := int64(to / time.Microsecond)
	for {
		// The tenant that asks first (by name on a tie, for a fixed order).
		who, at := "", int64(-1)
		for name, n := range next {
			if at < 0 || n < at || (n == at && name < who) {
				who, at = name, n
			}
		}
		if at >= end {
			return got
		}
		clock.at(at)
		r, err := lim.ReserveAll(context.Background(), []Bucket{
			{Key: "{acct}:tenant:" + who, Limit: Limit{Rate: 1000, Burst: 100}},
			{Key: "{acct}:global", Limit: shareGlobal, Share: &Share{Tenant: who, Weight: weights[who]}},
		}, time.Second)
		var lerr *LimitedError
		switch {
		case errors.As(err, &lerr):
			require.True(t, lerr.OverShare, "a second's wait is always enough for the bucket alone")
			next[who] = at + max(int64(lerr.RetryAfter/time.Microsecond), 1)
		case err != nil:
			t.Fatal(err)
		default:
			slot := micros(r.d.slot() - base.UnixMicro())
			if slot >= from && slot < to {
				got[who]++
			}
			next[who] = at + 1 // asks again at once: it has work
		}
	}
}

// TestShareEqual: two tenants with work get the shared bucket half each.
func TestShareEqual(t *testing.T) {
	got := fairSim(t, map[string]int{"a": 1, "b": 1}, 2*time.Second, 12*time.Second)
	t.Logf("turns in 10 s: %v", got)
	assert.InDelta(t, 250, got["a"], 5)
	assert.InDelta(t, 250, got["b"], 5)
}

// TestShareWeighted: weights 3:1 get turns 3:1.
func TestShareWeighted(t *testing.T) {
	got := fairSim(t, map[string]int{"paid": 3, "free": 1}, 2*time.Second, 12*time.Second)
	t.Logf("turns in 10 s: %v", got)
	assert.InDelta(t, 375, got["paid"], 5)
	assert.InDelta(t, 125, got["free"], 5)
}

// TestShareAlone: a tenant alone has all of the shared bucket, and one that
// joins later gets its share at once, behind at most the first's horizon.
func TestShareAlone(t *testing.T) {
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	ctx := context.Background()
	take := func(who string) (*Reservation, error) {
		return lim.ReserveAll(ctx, []Bucket{
			{Key: "{acct}:tenant:" + who, Limit: Limit{Rate: 1000, Burst: 100}},
			{Key: "{acct}:global", Limit: shareGlobal, Share: &Share{Tenant: who}},
		}, time.Minute)
	}
	// Alone, a books the bucket's burst at once and then one turn every
	// 20 ms until its bookings reach the horizon (500 ms) ahead.
	var last *Reservation
	booked := 0
	for {
		r, err := take("a")
		if err != nil {
			var lerr *LimitedError
			require.ErrorAs(t, err, &lerr)
			require.ErrorIs(t, err, ErrOverShare)
			require.ErrorIs(t, err, ErrLimited)
			assert.Equal(t, 20*time.Millisecond, lerr.RetryAfter, "the first come-back place: when a's share has room for one more")
			break
		}
		last, booked = r, booked+1
	}
	assert.Equal(t, 26, booked, "the horizon's 25 turns and the one that crossed it")
	assert.Equal(t, int64(420_000), last.d.wait)
	// Each caller sent away gets its own place, one turn apart.
	_, err := take("a")
	var lerr *LimitedError
	require.ErrorAs(t, err, &lerr)
	assert.Equal(t, 40*time.Millisecond, lerr.RetryAfter)

	// b joins: within its share, it books behind what a booked.
	r, err := take("b")
	require.NoError(t, err)
	assert.Equal(t, int64(440_000), r.d.wait)
	// b's tag moved 2·T (W = 2): it may book ahead to its horizon too.
	n := 1
	for ; ; n++ {
		if _, err := take("b"); err != nil {
			require.ErrorIs(t, err, ErrOverShare)
			break
		}
	}
	assert.Equal(t, 13, n, "b books half as far ahead per turn as a did alone")
}

// TestShareForgets: a tenant's state goes once its tag has passed, in the
// memory store and in Redis (the keys expire), and the others' shares grow.
func TestShareForgets(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	ctx := context.Background()
	_, err := lim.ReserveAll(ctx, []Bucket{
		{Key: "{acct}:tenant:a", Limit: Limit{Rate: 1000, Burst: 100}},
		{Key: "{acct}:global", Limit: Limit{Rate: 10, Burst: 10}, Share: &Share{Tenant: "a", Weight: 2}},
	}, time.Second)
	require.NoError(t, err)
	tags, info := shareKeys(prefix, "{acct}:global")
	score, err := rdb.ZScore(ctx, tags, "a").Result()
	require.NoError(t, err)
	assert.Positive(t, score)
	assert.Equal(t, "2", rdb.HGet(ctx, info, "W").Val())
	ttl := rdb.PTTL(ctx, info).Val()
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, 100*time.Millisecond+ttlSlack, "the keys live as long as the furthest tag (one turn at 10/s), and the slack")
	require.Eventually(t, func() bool {
		return rdb.Exists(ctx, tags, info).Val() == 0
	}, time.Second+ttlSlack, 5*time.Millisecond, "the tenants' keys expire")
}

// TestShareInvalid: a bad Share is an error before any I/O.
func TestShareInvalid(t *testing.T) {
	lim := NewLimiter(NewMemoryStore())
	ctx := context.Background()
	call := func(sh, sh2 *Share) error {
		_, err := lim.ReserveAll(ctx, []Bucket{
			{Key: "{acct}:tenant:a", Limit: Limit{Rate: 10, Burst: 10}, Share: sh2},
			{Key: "{acct}:global", Limit: Limit{Rate: 10, Burst: 10}, Share: sh},
		}, time.Second)
		return err
	}
	for _, c := range []struct {
		sh, sh2 *Share
		want    string
	}{
		{&Share{}, nil, `share of "{acct}:global": tenant: bucket name is empty`},
		{&Share{Tenant: "a", Weight: -1}, nil, "weight -1 is not between 1 and 1000000"},
		{&Share{Tenant: "a", Weight: 2_000_000}, nil, "weight 2000000 is not between 1 and 1000000"},
		{&Share{Tenant: "a", Horizon: -time.Second}, nil, "horizon -1s is not between 0 and 1h0m0s"},
		{&Share{Tenant: "a"}, &Share{Tenant: "a"}, "both have a Share"},
	} {
		err := call(c.sh, c.sh2)
		require.ErrorIs(t, err, ErrInvalid, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

// TestShares: Limiter.Shares lists the tenants with turns ahead, furthest
// first, with their shares and their callers sent away, the same on a
// memory store and on Redis.
func TestShares(t *testing.T) {
	clock := newFakeClock()
	prefix := redistest.Prefix(t)
	for name, st := range map[string]Store{
		"memory": NewMemoryStore(WithClock(clock)),
		"redis":  NewRedisStore(redistest.Shared(t).Client(t), WithClock(clock)),
	} {
		t.Run(name, func(t *testing.T) {
			clock.at(0)
			lim := NewLimiter(st, WithKeyPrefix(prefix+name))
			ctx := context.Background()
			take := func(who string, w int) error {
				_, err := lim.ReserveAll(ctx, []Bucket{
					{Key: "{acct}:tenant:" + who, Limit: Limit{Rate: 1000, Burst: 100}},
					{Key: "{acct}:global", Limit: shareGlobal, Share: &Share{Tenant: who, Weight: w}},
				}, time.Minute)
				return err
			}
			for take("a", 1) == nil {
			}
			require.NoError(t, take("b", 3))
			for range 4 { // four of a's callers sent away, holding places
				require.ErrorIs(t, take("a", 1), ErrOverShare)
			}
			got, count, err := lim.Shares(ctx, "{acct}:global", shareGlobal, 10)
			require.NoError(t, err)
			assert.Equal(t, 2, count)
			require.Len(t, got, 2)
			assert.Equal(t, TenantShare{Tenant: "a", Weight: 1, Priority: 3, Share: 0.25, Ahead: 520 * time.Millisecond, Waiting: 5}, got[0],
				"a booked 520 ms ahead; five places handed out, one per 20 ms (the first was the refusal that ended the loop)")
			assert.Equal(t, TenantShare{Tenant: "b", Weight: 3, Priority: 3, Share: 0.75, Ahead: 26667 * time.Microsecond}, got[1],
				"b's turn moved its clock by T·W/w = 20 ms · 4/3")
			top, count, err := lim.Shares(ctx, "{acct}:global", shareGlobal, 1)
			require.NoError(t, err)
			assert.Equal(t, 2, count)
			assert.Len(t, top, 1)
		})
	}
}

// TestShareAcquireAll: AcquireAll's callers of two tenants with work take
// turns by their shares: a caller over its share sleeps until its place
// and asks again. Real time, on a 1000/s shared bucket: 60 turns of each
// tenant's 120 callers come in the first 120 grants, give or take the
// first's horizon.
func TestShareAcquireAll(t *testing.T) {
	lim := NewLimiter(NewRedisStore(redistest.Shared(t).Client(t)), WithKeyPrefix(redistest.Prefix(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	global := Limit{Rate: 1000, Burst: 10}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b"} {
		for range 120 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := lim.AcquireAll(ctx, []Bucket{
					{Key: "{acct}:tenant:" + who, Limit: Limit{Rate: 100000, Burst: 1000}},
					{Key: "{acct}:global", Limit: global, Share: &Share{Tenant: who, Horizon: 20 * time.Millisecond}},
				})
				if assert.NoError(t, err) {
					mu.Lock()
					order = append(order, who)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	require.Len(t, order, 240)
	a := 0
	for _, who := range order[:120] {
		if who == "a" {
			a++
		}
	}
	t.Logf("a's turns in the first 120: %d", a)
	assert.InDelta(t, 60, a, 25, "each tenant about half while both wait")
}
