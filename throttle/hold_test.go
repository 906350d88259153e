package throttle

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The conformance table of Concurrency: every case runs, step by step at
// fixed instants, against the memory store, a real redis-server and
// miniredis, with the same explicit clock given to the scripts.

type holdOp int

const (
	opHold    holdOp = iota // hold a slot for id: granted, wait, held
	opRenew                 // renew id's lease: ok
	opRelease               // release id's slot: ok
)

type holdStep struct {
	at    int64 // µs after base
	op    holdOp
	key   string // "" means "k"
	id    string
	max   int           // opHold
	lease time.Duration // opHold, opRenew; 0 means 1s

	granted bool
	wait    int64
	held    int
	expired int
	ok      bool
}

var holdConformance = []struct {
	name  string
	steps []holdStep
}{
	{"grant up to Max, then deny until the earliest lease runs out", []holdStep{
		{at: 0, op: opHold, id: "a", max: 2, granted: true, held: 1},
		{at: 100000, op: opHold, id: "b", max: 2, granted: true, held: 2},
		{at: 200000, op: opHold, id: "c", max: 2, granted: false, wait: 800000, held: 2},
		{at: 999999, op: opHold, id: "c", max: 2, granted: false, wait: 1, held: 2},
		{at: 1000000, op: opHold, id: "c", max: 2, granted: true, held: 2, expired: 1},
		{at: 1000000, op: opRenew, id: "a", ok: false},
		{at: 1000000, op: opRelease, id: "a", ok: false},
		{at: 1000000, op: opRenew, id: "b", ok: true},
	}},
	{"a renewal extends the lease", []holdStep{
		{at: 0, op: opHold, id: "a", max: 1, granted: true, held: 1},
		{at: 500000, op: opRenew, id: "a", ok: true},
		{at: 900000, op: opHold, id: "b", max: 1, granted: false, wait: 600000, held: 1},
		{at: 1400000, op: opRenew, id: "a", lease: 2 * time.Second, ok: true},
		{at: 1500000, op: opHold, id: "b", max: 1, granted: false, wait: 1900000, held: 1},
		{at: 3400000, op: opHold, id: "b", max: 1, granted: true, held: 1, expired: 1},
		{at: 3400000, op: opRenew, id: "a", ok: false},
	}},
	{"a release frees the slot, once", []holdStep{
		{at: 0, op: opHold, id: "a", max: 2, granted: true, held: 1},
		{at: 0, op: opHold, id: "b", max: 2, granted: true, held: 2},
		{at: 0, op: opHold, id: "c", max: 2, granted: false, wait: 1000000, held: 2},
		{at: 100000, op: opRelease, id: "a", ok: true},
		{at: 100000, op: opRelease, id: "a", ok: false},
		{at: 100000, op: opRenew, id: "a", ok: false},
		{at: 100000, op: opHold, id: "c", max: 2, granted: true, held: 2},
		{at: 100000, op: opHold, id: "d", max: 2, granted: false, wait: 900000, held: 2},
		{at: 200000, op: opRelease, id: "b", ok: true},
		{at: 200000, op: opRelease, id: "c", ok: true},
		{at: 200000, op: opHold, id: "d", max: 2, granted: true, held: 1},
	}},
	{"a lease that ran out frees its slot without a release", []holdStep{
		{at: 0, op: opHold, id: "a", max: 1, lease: 300 * time.Millisecond, granted: true, held: 1},
		{at: 300000, op: opHold, id: "b", max: 1, granted: true, held: 1, expired: 1},
		{at: 300000, op: opRelease, id: "a", ok: false},
		{at: 300000, op: opHold, id: "a", max: 1, granted: false, wait: 1000000, held: 1},
	}},
	{"an id that holds a slot is not counted twice", []holdStep{
		{at: 0, op: opHold, id: "a", max: 2, granted: true, held: 1},
		{at: 500000, op: opHold, id: "a", max: 2, granted: true, held: 1},
		{at: 500000, op: opHold, id: "b", max: 2, granted: true, held: 2},
		{at: 500000, op: opHold, id: "c", max: 2, granted: false, wait: 1000000, held: 2},
		{at: 500000, op: opHold, id: "a", max: 2, granted: true, held: 2},
	}},
	{"a lowered Max waits for enough leases to run out", []holdStep{
		{at: 0, op: opHold, id: "a", max: 3, granted: true, held: 1},
		{at: 100000, op: opHold, id: "b", max: 3, granted: true, held: 2},
		{at: 200000, op: opHold, id: "c", max: 3, granted: true, held: 3},
		{at: 300000, op: opHold, id: "d", max: 2, granted: false, wait: 800000, held: 3},
		{at: 1000000, op: opHold, id: "d", max: 2, granted: false, wait: 100000, held: 2, expired: 1},
		{at: 1100000, op: opHold, id: "d", max: 2, granted: true, held: 2, expired: 1},
		{at: 1100000, op: opHold, id: "e", max: 3, granted: true, held: 3},
	}},
	{"keys are separate", []holdStep{
		{at: 0, op: opHold, id: "a", max: 1, granted: true, held: 1},
		{at: 0, op: opHold, key: "k2", id: "b", max: 1, granted: true, held: 1},
		{at: 0, op: opHold, key: "other", id: "c", max: 1, granted: true, held: 1},
		{at: 0, op: opHold, id: "d", max: 1, granted: false, wait: 1000000, held: 1},
		{at: 0, op: opRelease, key: "other", id: "a", ok: false},
	}},
	{"long leases and long idle", []holdStep{
		{at: 0, op: opHold, id: "a", max: 1, lease: 24 * time.Hour, granted: true, held: 1},
		{at: 0, op: opHold, id: "b", max: 1, granted: false, wait: 86400000000, held: 1},
		{at: 10 * 365 * 24 * 3600 * 1000000, op: opHold, id: "b", max: 1, granted: true, held: 1, expired: 1},
	}},
}

// runHoldConformance drives store through every case; prefix isolates cases.
func runHoldConformance(t *testing.T, newStore func(clock) holdStore, prefix string) {
	for ci, c := range holdConformance {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			store := newStore(clock)
			pfx := fmt.Sprintf("%sh%d:", prefix, ci)
			ctx := context.Background()
			for i, s := range c.steps {
				clock.at(s.at)
				msg := fmt.Sprintf("step %d", i)
				key := s.key
				if key == "" {
					key = "k"
				}
				lease := int64(time.Second / time.Microsecond)
				if s.lease != 0 {
					lease = int64(s.lease / time.Microsecond)
				}
				switch s.op {
				case opHold:
					r, err := store.hold(ctx, pfx, key, s.max, lease, s.id, 0)
					require.NoError(t, err, msg)
					assert.Equal(t, s.granted, r.granted, msg+" granted")
					assert.Equal(t, s.wait, r.wait, msg+" wait")
					assert.Equal(t, s.held, r.held, msg+" held")
					assert.Equal(t, s.expired, r.expired, msg+" expired")
					assert.Equal(t, base.UnixMicro()+s.at, r.now, msg+" now")
				case opRenew:
					ok, err := store.renew(ctx, pfx, key, lease, s.id)
					require.NoError(t, err, msg)
					assert.Equal(t, s.ok, ok, msg+" renewed")
				case opRelease:
					ok, err := store.release(ctx, pfx, key, s.id)
					require.NoError(t, err, msg)
					assert.Equal(t, s.ok, ok, msg+" released")
				}
			}
		})
	}
}

func TestHoldConformanceMemory(t *testing.T) {
	runHoldConformance(t, func(c clock) holdStore { return newMemoryStore(WithClock(c)) }, "")
}

func TestHoldConformanceRedis(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	runHoldConformance(t, func(c clock) holdStore { return NewRedisStore(rdb, WithClock(c)) }, redistest.Prefix(t))
}

func TestHoldConformanceMiniredis(t *testing.T) {
	_, rdb := miniredisClient(t)
	runHoldConformance(t, func(c clock) holdStore { return NewRedisStore(rdb, WithClock(c)) }, "mini:")
}

// Every invalid request fails with ErrInvalid before any I/O.
func TestHoldValidation(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	var calls atomic.Int64
	rdb.AddHook(countHook{&calls})
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lim  *Limiter
		key  string
		c    Concurrency
	}{
		{"max 0", lim, "k", Concurrency{Max: 0}},
		{"negative max", lim, "k", Concurrency{Max: -1}},
		{"huge max", lim, "k", Concurrency{Max: maxHolders + 1}},
		{"negative lease", lim, "k", Concurrency{Max: 1, Lease: -time.Second}},
		{"tiny lease", lim, "k", Concurrency{Max: 1, Lease: 50 * time.Millisecond}},
		{"huge lease", lim, "k", Concurrency{Max: 1, Lease: 25 * time.Hour}},
		{"empty key", lim, "", Concurrency{Max: 1}},
		{"long key", lim, strings.Repeat("k", MaxKeyLen+1), Concurrency{Max: 1}},
		{"bad prefix", NewLimiter(NewRedisStore(rdb), WithKeyPrefix("{x}")), "k", Concurrency{Max: 1}},
		{"store without slots", NewLimiter(storeWithoutHold{}), "k", Concurrency{Max: 1}},
	} {
		_, err := tc.lim.Hold(ctx, tc.key, tc.c)
		assert.ErrorIs(t, err, ErrInvalid, tc.name+": Hold")
		_, err = tc.lim.TryHold(ctx, tc.key, tc.c)
		assert.ErrorIs(t, err, ErrInvalid, tc.name+": TryHold")
	}
	assert.Equal(t, int64(0), calls.Load(), "no round trip")

	assert.NoError(t, Concurrency{Max: 1}.Validate())
	assert.NoError(t, Concurrency{Max: maxHolders, Lease: maxLease}.Validate())
	assert.NoError(t, Concurrency{Max: 5, Lease: minLease}.Validate())
	assert.Equal(t, "at most 5 in flight, lease 30s", Concurrency{Max: 5}.describe())
	assert.Equal(t, "at most 2 in flight, lease 1s", Concurrency{Max: 2, Lease: time.Second}.describe())
}

// storeWithoutHold is a Store that cannot hold slots, as a test fake might be.
type storeWithoutHold struct{ Store }

func (storeWithoutHold) configErr() error { return nil }

func TestHoldMemory(t *testing.T) {
	testHold(t, func(t *testing.T) (*Limiter, holdStore) {
		s := newMemoryStore()
		return NewLimiter(s), s
	})
}

func TestHoldRedis(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	testHold(t, func(t *testing.T) (*Limiter, holdStore) {
		s := NewRedisStore(rdb)
		t.Cleanup(func() { s.Close() })
		return NewLimiter(s, WithKeyPrefix(redistest.Prefix(t))), s
	})
}

// testHold runs the Limiter's Hold on a store, with the real clock.
func testHold(t *testing.T, newLimiter func(t *testing.T) (*Limiter, holdStore)) {
	ctx := context.Background()

	t.Run("TryHold grants up to Max, then says when the earliest lease runs out", func(t *testing.T) {
		lim, _ := newLimiter(t)
		c := Concurrency{Max: 2, Lease: time.Minute}
		a, err := lim.TryHold(ctx, "k", c)
		require.NoError(t, err)
		b, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		assert.Equal(t, "k", a.key)
		_, err = lim.TryHold(ctx, "k", c)
		var le *LimitedError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, ErrLimited)
		assert.InDelta(t, time.Minute, le.RetryAfter, float64(5*time.Second))

		require.NoError(t, a.Release(ctx))
		c2, err := lim.TryHold(ctx, "k", c)
		require.NoError(t, err, "a released slot is free")
		for _, l := range []*Lease{b, c2} {
			require.NoError(t, l.Release(ctx))
		}
	})

	t.Run("Release is idempotent and safe for concurrent use", func(t *testing.T) {
		lim, _ := newLimiter(t)
		c := Concurrency{Max: 1}
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, l.Release(ctx))
			}()
		}
		wg.Wait()
		require.NoError(t, l.Release(ctx))
		l2, err := lim.TryHold(ctx, "k", c)
		require.NoError(t, err)
		require.NoError(t, l2.Release(ctx))
		select {
		case <-l.Lost():
			t.Fatal("a released lease is not lost")
		default:
		}
	})

	t.Run("a held lease is renewed past its lease", func(t *testing.T) {
		lim, _ := newLimiter(t)
		c := Concurrency{Max: 1, Lease: 300 * time.Millisecond}
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		time.Sleep(time.Second) // more than three leases
		_, err = lim.TryHold(ctx, "k", c)
		assert.ErrorIs(t, err, ErrLimited, "still held")
		select {
		case <-l.Lost():
			t.Fatal("lost while renewed")
		default:
		}
		require.NoError(t, l.Release(ctx))
	})

	t.Run("a blocked Hold takes the slot a Release frees", func(t *testing.T) {
		lim, _ := newLimiter(t)
		c := Concurrency{Max: 1, Lease: time.Minute}
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		got := make(chan *Lease)
		go func() {
			l2, err := lim.Hold(ctx, "k", c)
			assert.NoError(t, err)
			got <- l2
		}()
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, l.Release(ctx))
		select {
		case l2 := <-got:
			require.NoError(t, l2.Release(ctx))
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not woken by the release")
		}
	})

	t.Run("waiters are served in arrival order", func(t *testing.T) {
		lim, hs := newLimiter(t)
		c := Concurrency{Max: 1, Lease: time.Minute}
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		const n = 5
		order := make(chan int, n)
		leases := make(chan *Lease, n)
		for i := range n {
			go func() {
				l, err := lim.Hold(ctx, "k", c)
				if !assert.NoError(t, err) {
					return
				}
				order <- i
				leases <- l
			}()
			waitWaiters(t, hs, lim, "k", i+1) // in this order
		}
		require.NoError(t, l.Release(ctx))
		for want := range n {
			select {
			case got := <-order:
				assert.Equal(t, want, got, "waiter %d", want)
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter %d never got the slot", want)
			}
			require.NoError(t, (<-leases).Release(ctx))
		}
	})
}

// waiting reports how many Holds wait for the key, and whether its releases are heard.
func (r *waitRoom) waiting(name string) (n int, heard bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[name]; q != nil {
		return len(q.ws), q.ready
	}
	return 0, false
}

// waitWaiters waits until n Holds of key wait on hs, and releases are heard.
func waitWaiters(t *testing.T, hs holdStore, lim *Limiter, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, heard := hs.waiters().waiting(semKey(lim.cfg.prefix, key))
		if got == n && (heard || n == 0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Holds of %q wait (releases heard: %v), want %d", got, key, heard, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A renewal that finds the lease gone closes Lost.
func TestHoldLostLease(t *testing.T) {
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: 300 * time.Millisecond}
	l, err := lim.Hold(ctx, "k", c)
	require.NoError(t, err)
	clock.advance(time.Second) // a pause longer than the lease
	other, err := lim.TryHold(ctx, "k", c)
	require.NoError(t, err, "the slot ran out and was taken")
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost was not closed")
	}
	require.NoError(t, l.Release(ctx))
	_, err = lim.TryHold(ctx, "k", c)
	assert.ErrorIs(t, err, ErrLimited, "releasing a lost lease frees nothing")
	require.NoError(t, other.Release(ctx))
}

// A Hold whose ctx ends while it waits returns ctx's error promptly, leaves
// no waiter behind, and no goroutine once the store is closed.
func TestHoldCancel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) (holdStore, func())
	}{
		{"memory", func(t *testing.T) (holdStore, func()) { return newMemoryStore(), func() {} }},
		{"redis", func(t *testing.T) (holdStore, func()) {
			s := NewRedisStore(redistest.Shared(t).Client(t))
			return s, func() { require.NoError(t, s.Close()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Shared(t) // started before the check: its goroutines are not the test's
			before := goleak.IgnoreCurrent()
			hs, closeStore := tc.store(t)
			lim := NewLimiter(hs.(Store), WithKeyPrefix(redistest.Prefix(t)))
			ctx := context.Background()
			c := Concurrency{Max: 1, Lease: time.Minute}
			held, err := lim.Hold(ctx, "k", c)
			require.NoError(t, err)

			for _, end := range []string{"cancel", "deadline"} {
				cctx, cancel := context.WithCancel(ctx)
				if end == "deadline" {
					cctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				}
				done := make(chan error, 1)
				go func() {
					_, err := lim.Hold(cctx, "k", c)
					done <- err
				}()
				waitWaiters(t, hs, lim, "k", 1)
				if end == "cancel" {
					cancel()
				}
				start := time.Now()
				select {
				case err := <-done:
					if end == "cancel" {
						assert.ErrorIs(t, err, context.Canceled)
					} else {
						assert.ErrorIs(t, err, context.DeadlineExceeded)
					}
					assert.Less(t, time.Since(start), time.Second, end+": returned promptly")
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: Hold did not return", end)
				}
				cancel()
				n, _ := hs.waiters().waiting(semKey(lim.cfg.prefix, "k"))
				assert.Equal(t, 0, n, end+": no waiter left")
			}
			require.NoError(t, held.Release(ctx))
			l, err := lim.TryHold(ctx, "k", c)
			require.NoError(t, err, "the cancelled Holds took nothing")
			require.NoError(t, l.Release(ctx))
			closeStore()
			goleak.VerifyNone(t, before)
		})
	}
}

// The failure policy applies to Hold as to Acquire.
func TestHoldFailurePolicy(t *testing.T) {
	srv := redistest.Start(t)
	// No retries: each call fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	srv.Kill(t) // nothing answers
	ctx := context.Background()
	c := Concurrency{Max: 4, Lease: time.Minute}

	closed := NewLimiter(NewRedisStore(rdb))
	_, err := closed.Hold(ctx, "k", c)
	assert.ErrorIs(t, err, ErrUnavailable, "FailClosed")
	var se *storeError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "hold", se.op)

	open := NewLimiter(NewRedisStore(rdb), WithFailurePolicy(FailOpen))
	l, err := open.Hold(ctx, "k", c)
	require.NoError(t, err, "FailOpen")
	assert.Equal(t, "k", l.key)
	assert.NoError(t, l.Release(ctx))

	local := NewLimiter(NewRedisStore(rdb), WithFailurePolicy(FailLocal), WithHosts(fixedHosts(2)))
	var leases []*Lease
	for i := range 2 {
		l, err := local.TryHold(ctx, "k", c)
		require.NoError(t, err, "FailLocal: slot %d of this host's 2", i)
		leases = append(leases, l)
	}
	assert.Equal(t, ModeFallback, local.Mode())
	_, err = local.TryHold(ctx, "k", c)
	assert.ErrorIs(t, err, ErrLimited, "FailLocal: 4 over 2 hosts is 2 here")
	got := make(chan error)
	go func() {
		l, err := local.Hold(ctx, "k", c)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, leases[0].Release(ctx))
	select {
	case err := <-got:
		assert.NoError(t, err, "a local release wakes a local waiter")
	case <-time.After(5 * time.Second):
		t.Fatal("the local waiter was not woken")
	}
	require.NoError(t, leases[1].Release(ctx))
}

// gatedStore is a memory store whose hold calls, from a context marked by
// gated, can be stopped in flight: shut stops the next such call at a gate
// until open, so that releases come and go while it asks.
type gatedStore struct {
	*memoryStore
	mu      sync.Mutex
	arrived chan struct{} // closed by the next gated call as it stops; nil: none stops
	gate    chan struct{} // closed by open: the stopped call goes on
}

type gatedKey struct{}

// gated marks ctx's hold calls as ones a gatedStore may stop.
func gated(ctx context.Context) context.Context { return context.WithValue(ctx, gatedKey{}, true) }

// shut stops the next gated hold call; the channel is closed when it has stopped.
func (g *gatedStore) shut() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrived, g.gate = make(chan struct{}), make(chan struct{})
	return g.arrived
}

func (g *gatedStore) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
}

func (g *gatedStore) hold(ctx context.Context, prefix, key string, max int, lease int64, id string, auto int) (holdReply, error) {
	if ctx.Value(gatedKey{}) != nil {
		g.mu.Lock()
		arrived, gate := g.arrived, g.gate
		g.arrived = nil
		g.mu.Unlock()
		if arrived != nil {
			close(arrived)
			select {
			case <-gate:
			case <-ctx.Done():
				return holdReply{}, ctx.Err()
			}
		}
	}
	return g.memoryStore.hold(ctx, prefix, key, max, lease, id, auto)
}

// idle reports how many Holds wait for the key, and whether none of them is
// asking or woken to ask.
func (r *waitRoom) idle(name string) (n int, idle bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[name]
	if q == nil {
		return 0, true
	}
	for _, w := range q.ws {
		if w.asking || w.woken {
			return len(q.ws), false
		}
	}
	return len(q.ws), true
}

// waitIdle waits until n Holds of key wait on hs, none of them asking.
func waitIdle(t *testing.T, hs holdStore, lim *Limiter, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, idle := hs.waiters().idle(semKey(lim.cfg.prefix, key))
		if got == n && idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Holds of %q wait (all idle: %v), want %d idle", got, key, idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitEntered waits until the Hold got answers, or queues behind the one
// waiter of key: it asked the store or it did not, before that waiter's ask
// comes back.
func waitEntered(t *testing.T, hs holdStore, lim *Limiter, key string, got <-chan holdResult) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, _ := hs.waiters().waiting(semKey(lim.cfg.prefix, key)); n == 2 || len(got) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Hold neither returned nor queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// holdIn runs lim.Hold in a goroutine and sends what it returns.
func holdIn(lim *Limiter, ctx context.Context, key string, c Concurrency) <-chan holdResult {
	got := make(chan holdResult, 1)
	go func() {
		l, err := lim.Hold(ctx, key, c)
		got <- holdResult{l, err}
	}()
	return got
}

type holdResult struct {
	l   *Lease
	err error
}

// requireGranted waits for a Hold started by holdIn to be granted, well
// before the earliest lease would run out, and returns its lease.
func requireGranted(t *testing.T, got <-chan holdResult, msg string) *Lease {
	t.Helper()
	select {
	case r := <-got:
		require.NoError(t, r.err, msg)
		return r.l
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: a free slot went unseen; the waiter waits for the earliest lease to run out", msg)
		return nil
	}
}

// A waiter woken by a release, whose ask is then cut short by its ctx, passes
// the wake on: the next waiter takes the slot at once.
func TestHoldCancelledAskPassesWake(t *testing.T) {
	gs := &gatedStore{memoryStore: newMemoryStore()}
	lim := NewLimiter(gs)
	ctx := context.Background()
	c := Concurrency{Max: 1, Lease: time.Minute}
	held, err := lim.Hold(ctx, "k", c)
	require.NoError(t, err)

	fctx, cancel := context.WithCancel(gated(ctx))
	defer cancel()
	first := holdIn(lim, fctx, "k", c)
	waitIdle(t, gs, lim, "k", 1)
	second := holdIn(lim, ctx, "k", c)
	waitIdle(t, gs, lim, "k", 2)

	arrived := gs.shut()
	require.NoError(t, held.Release(ctx)) // wakes the first waiter, whose ask stops in flight
	<-arrived
	cancel()
	assert.ErrorIs(t, (<-first).err, context.Canceled)
	require.NoError(t, requireGranted(t, second, "the second waiter").Release(ctx))
}

// A release that every waiter of the process is already bound to look at
// (each is asking, or woken to ask) is kept for the next Hold, which would
// otherwise queue behind them without asking and miss the free slot.
func TestHoldReleaseWhileAllAsk(t *testing.T) {
	gs := &gatedStore{memoryStore: newMemoryStore()}
	lim := NewLimiter(gs)
	ctx := context.Background()
	c := Concurrency{Max: 3, Lease: time.Minute}
	var held []*Lease
	for range 3 {
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		held = append(held, l)
	}
	first := holdIn(lim, gated(ctx), "k", c)
	waitIdle(t, gs, lim, "k", 1)

	arrived := gs.shut()
	require.NoError(t, held[0].Release(ctx)) // wakes the first waiter, whose ask stops in flight
	<-arrived
	require.NoError(t, held[1].Release(ctx)) // the first waiter will ask again
	require.NoError(t, held[2].Release(ctx)) // no waiter can take this one
	second := holdIn(lim, ctx, "k", c)
	waitEntered(t, gs, lim, "k", second)
	gs.open()
	a := requireGranted(t, first, "the first waiter")
	b := requireGranted(t, second, "the second waiter")
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))
}

// Slots freed by leases that ran out, which a grant finds, are not lost when
// every waiter is already woken: the next Hold asks.
func TestHoldExpiredWhileAllAsk(t *testing.T) {
	clock := newFakeClock()
	gs := &gatedStore{memoryStore: newMemoryStore(WithClock(clock))}
	lim := NewLimiter(gs)
	ctx := context.Background()
	c := Concurrency{Max: 3, Lease: time.Minute}
	var held []*Lease
	for range 3 {
		l, err := lim.Hold(ctx, "k", c)
		require.NoError(t, err)
		held = append(held, l)
	}
	first := holdIn(lim, gated(ctx), "k", c)
	waitIdle(t, gs, lim, "k", 1)

	arrived := gs.shut()
	clock.advance(2 * time.Minute) // every lease runs out unrenewed (renewals are 20 s apart)
	other, err := lim.TryHold(ctx, "k", c)
	require.NoError(t, err, "three slots came free; this takes one, and wakes waiters for two")
	<-arrived
	second := holdIn(lim, ctx, "k", c)
	waitEntered(t, gs, lim, "k", second)
	gs.open()
	a := requireGranted(t, first, "the first waiter")
	b := requireGranted(t, second, "the second waiter")
	for _, l := range []*Lease{a, b, other} {
		require.NoError(t, l.Release(ctx))
	}
	for _, l := range held {
		require.NoError(t, l.Release(ctx))
	}
}
