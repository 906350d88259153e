package throttle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// gate is a go-redis hook that counts script calls and can hold the next
// one until opened, so that a test knows which calls queue behind it.
type gate struct {
	scripts  atomic.Int64
	holdNext atomic.Bool
	entered  chan struct{}
	release  chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1), release: make(chan struct{}, 1)} }

// open lets the held call go on.
func (g *gate) open() { g.release <- struct{}{} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			g.scripts.Add(1)
			if g.holdNext.CompareAndSwap(true, false) {
				g.entered <- struct{}{}
				<-g.release
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// queuedBehind is how many calls wait in l's line of shape sh.
func queuedBehind(l *Limiter, sh shape) int {
	coalescerOf(l).mu.Lock()
	defer coalescerOf(l).mu.Unlock()
	if ln := coalescerOf(l).lines[sh]; ln != nil {
		return len(ln.queue)
	}
	return 0
}

func waitQueued(t *testing.T, l *Limiter, sh shape, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return queuedBehind(l, sh) == n }, 10*time.Second, time.Millisecond,
		"%d calls queued", n)
}

// gatedLimiter is a Limiter over the shared redis-server on clock whose
// client counts and can hold script calls, its scripts loaded.
func gatedLimiter(t *testing.T, clock clock) (*Limiter, *gate) {
	rdb := redistest.Shared(t).Client(t)
	for _, byKind := range bucketScripts[:scriptRefund] { // reserve and batch
		for _, s := range byKind {
			require.NoError(t, s.Load(context.Background(), rdb).Err())
		}
	}
	for _, s := range []*redis.Script{reserveTBScript, reserveLBScript, reserveATScript, reserveFWScript, reserveSLScript, reserveSWScript} {
		require.NoError(t, s.Load(context.Background(), rdb).Err())
	}
	g := newGate()
	rdb.AddHook(g)
	return NewLimiter(NewRedisStore(rdb, WithClock(clock)), WithKeyPrefix(redistest.Prefix(t))), g
}

// Calls that queue behind one in flight go in one script call, and the
// store's answers are exactly those of the same calls made one at a time:
// the same slots, for every policy, buckets of up to 10⁹ a second included.
func TestCoalescedCallsAreExact(t *testing.T) {
	const calls = 100
	for _, p := range append(policiesPer(time.Second), Limit{Rate: 1e9, Burst: 50}, LeakyBucket{Rate: 3e8, Capacity: 200}) {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			clock := newFakeClock()
			lim, g := gatedLimiter(t, clock)
			seq := NewLimiter(NewMemoryStore(WithClock(clock)))
			ctx := context.Background()
			req := request{one: Bucket{Key: "hot", Limit: p, N: 1}, maxWait: maxSpan}
			require.NoError(t, lim.check(&req))
			sh, ok := shapeOf(&req)
			require.True(t, ok)

			waits := make([]int64, calls)
			errs := make([]error, calls)
			g.holdNext.Store(true)
			var wg sync.WaitGroup
			call := func(i int) {
				defer wg.Done()
				r, err := lim.Reserve(ctx, "hot", p, 1, -1)
				errs[i] = err
				if err == nil {
					waits[i] = r.d.wait
				}
			}
			wg.Add(1)
			go call(0)
			<-g.entered // the first call is out: the rest queue behind it
			for i := 1; i < calls; i++ {
				wg.Add(1)
				go call(i)
			}
			waitQueued(t, lim, sh, calls-1)
			g.open()
			wg.Wait()

			want := make([]int64, calls)
			for i := range want {
				r, err := seq.Reserve(ctx, "hot", p, 1, -1)
				if err != nil {
					want[i] = -1
					continue
				}
				want[i] = r.d.wait
			}
			for i, err := range errs {
				var limited *LimitedError
				if errors.As(err, &limited) {
					waits[i] = -1
				} else {
					require.NoError(t, err)
				}
			}
			slices.Sort(waits)
			slices.Sort(want)
			assert.Equal(t, want, waits, "the same slots as one call at a time")
			assert.Equal(t, int64(2), g.scripts.Load(), "one call out, then the 99 behind it in one")
		})
	}
}

// Non-blocking calls coalesce too, with blocking ones of the same shape:
// exactly Burst of them are allowed at one instant.
func TestCoalescedTryAcquire(t *testing.T) {
	const calls = 50
	clock := newFakeClock()
	lim, g := gatedLimiter(t, clock)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Second, Burst: 10}
	req := request{one: Bucket{Key: "try", Limit: l, N: 1}}
	require.NoError(t, lim.check(&req))
	sh, _ := shapeOf(&req)

	var allowed atomic.Int64
	var wg sync.WaitGroup
	try := func() {
		defer wg.Done()
		r, err := lim.TryAcquire(ctx, "try", l, 1)
		assert.NoError(t, err)
		if r.Allowed {
			allowed.Add(1)
		}
	}
	g.holdNext.Store(true)
	wg.Add(1)
	go try()
	<-g.entered
	for range calls - 1 {
		wg.Add(1)
		go try()
	}
	waitQueued(t, lim, sh, calls-1)
	g.open()
	wg.Wait()
	assert.Equal(t, int64(10), allowed.Load(), "exactly the burst")
	assert.Equal(t, int64(2), g.scripts.Load())
}

// A caller whose context ends while it is queued leaves the queue, taking
// nothing; one whose context ends while its batch is out returns at once,
// and the turn booked for it goes back to the bucket.
func TestCoalescedCallerLeaves(t *testing.T) {
	clock := newFakeClock()
	lim, g := gatedLimiter(t, clock)
	ctx := context.Background()
	l := Limit{Rate: 1, Period: time.Minute, Burst: 1} // a turn a minute: every grant after the first lies ahead
	req := request{one: Bucket{Key: "leave", Limit: l, N: 1}, maxWait: maxSpan}
	require.NoError(t, lim.check(&req))
	sh, _ := shapeOf(&req)

	// Queued, then gone: the first call out is held; the second leaves.
	g.holdNext.Store(true)
	first := make(chan error, 1)
	go func() { _, err := lim.Reserve(ctx, "leave", l, 1, -1); first <- err }()
	<-g.entered
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { _, err := lim.Reserve(cctx, "leave", l, 1, -1); left <- err }()
	waitQueued(t, lim, sh, 1)
	cancel()
	assert.ErrorIs(t, <-left, context.Canceled)
	assert.Equal(t, 0, queuedBehind(lim, sh), "it left the queue")
	g.open()
	require.NoError(t, <-first)
	st, err := lim.Peek(ctx, "leave", l)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, st.NextFree, "only the first call took a turn")

	// Out, then gone: the batch is held at the store; its caller leaves; the
	// turn it was given (three minutes ahead) is refunded.
	g.holdNext.Store(true)
	hold := make(chan error, 1)
	go func() { _, err := lim.Reserve(ctx, "leave", l, 1, -1); hold <- err }() // out alone, held
	<-g.entered
	cctx, cancel = context.WithCancel(ctx)
	go func() { _, err := lim.Reserve(cctx, "leave", l, 1, -1); left <- err }()
	waitQueued(t, lim, sh, 1)
	g.holdNext.Store(true) // hold the batch that will carry it
	g.open()
	require.NoError(t, <-hold) // the second minute's turn
	<-g.entered                // the batch is out
	cancel()
	assert.ErrorIs(t, <-left, context.Canceled, "it returns without waiting for the store")
	g.open()
	require.Eventually(t, func() bool {
		coalescerOf(lim).mu.Lock()
		defer coalescerOf(lim).mu.Unlock()
		return coalescerOf(lim).lines[sh] == nil
	}, 10*time.Second, time.Millisecond, "the batch and its refund are done")
	st, err = lim.Peek(ctx, "leave", l)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, st.NextFree, "the turn booked for it is back")
}

// Redis down: every coalesced caller gets the store's error, none hangs.
func TestCoalescedStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(redistest.Prefix(t)))
	srv.Stop()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A bound against a hang, not a speed test: each failed batch
			// takes go-redis's dial retries, longer on a loaded machine.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, errs[i] = lim.TryAcquire(ctx, "down", Limit{Rate: 10, Burst: 1}, 1)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		var se *storeError
		assert.ErrorAs(t, err, &se)
	}
}

// coalescerOf is l's coalescing layer, or nil if stack gave it none.
func coalescerOf(l *Limiter) *coalescer {
	for s := l.seam; ; {
		switch x := s.(type) {
		case *coalescer:
			return x
		case *prefetcher:
			s = x.seam
		default:
			return nil
		}
	}
}
