package workers_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// gauge counts the handlers running now and the most seen at once.
type gauge struct {
	now, peak atomic.Int64
	done      sync.Map // payload → true, once a job's handler succeeded
	count     atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *gauge) leave(payload string) {
	g.now.Add(-1)
	if _, dup := g.done.LoadOrStore(payload, true); !dup {
		g.count.Add(1)
	}
}

// fleetLimiter is a Limiter of its own over h's Redis, as another process
// would have; its store is closed at cleanup, after the pools that use it.
func fleetLimiter(t *testing.T, h *harness) *throttle.Limiter {
	store := throttle.NewRedisStore(h.rdb)
	t.Cleanup(func() { store.Close() })
	return throttle.NewLimiter(store, throttle.WithKeyPrefix(h.prefix))
}

// With InFlight 2, two pools of ten workers each never run more than two of
// the policy's handlers at once between them, and every job completes
// without going back to the queue.
func TestPoolInFlightAcrossPools(t *testing.T) {
	h := newHarness(t)
	pol := &workers.Policy{Name: "exports", Limit: throttle.Limit{Rate: 1000, Burst: 100}, InFlight: 2, MaxWait: 20 * time.Second}
	var g gauge
	handler := func(ctx context.Context, task *asynq.Task) error {
		g.enter()
		time.Sleep(50 * time.Millisecond)
		g.leave(string(task.Payload()))
		return nil
	}
	var pools []*workers.Pool
	for range 2 {
		cfg := h.config(t)
		cfg.Limiter = fleetLimiter(t, h)
		p, err := workers.NewPool(cfg)
		require.NoError(t, err)
		p.HandleFunc("export", handler, pol)
		start(t, p)
		pools = append(pools, p)
	}

	const n = 24
	begin := time.Now()
	for i := range n {
		h.enqueue(t, queue.Task{Type: "export", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	waitFor(t, 30*time.Second, "every job to run", func() bool {
		return g.count.Load() == n && pools[0].Stats().Processed+pools[1].Stats().Processed == n
	})
	took := time.Since(begin)

	assert.Equal(t, int64(2), g.peak.Load(), "at most InFlight handlers at once, and the slots used")
	assert.GreaterOrEqual(t, took, n/2*50*time.Millisecond, "two at a time")
	var processed int64
	for i, p := range pools {
		st := p.Stats()
		processed += st.Processed
		assert.Equal(t, int64(0), st.Requeued, "pool %d: no job went back", i)
		assert.Equal(t, int64(0), st.Failed, "pool %d", i)
		assert.Equal(t, int64(0), st.Archived, "pool %d", i)
		assert.Positive(t, st.Processed, "pool %d ran jobs too", i)
	}
	assert.Equal(t, int64(n), processed)
	t.Logf("%d jobs of 50ms, InFlight 2 over two pools: %v", n, took.Round(time.Millisecond))
}

// A job that finds no free slot within its wait budget goes back to the
// queue and runs later: no retry spent and nothing archived, although the
// jobs have no retries at all.
func TestPoolInFlightSendsBack(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Limiter = fleetLimiter(t, h)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	var g gauge
	p.HandleFunc("report", func(ctx context.Context, task *asynq.Task) error {
		g.enter()
		time.Sleep(100 * time.Millisecond)
		g.leave(string(task.Payload()))
		return nil
	}, &workers.Policy{Name: "reports", Limit: throttle.Limit{Rate: 1000, Burst: 100}, InFlight: 1, MaxWait: 20 * time.Millisecond})
	start(t, p)

	const n = 5
	for i := range n {
		h.enqueue(t, queue.Task{Type: "report", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	// The pool counts a job once its handler has returned: wait for both.
	waitFor(t, 60*time.Second, "every job to run", func() bool { return g.count.Load() == n && p.Stats().Processed == n })
	st := p.Stats()
	assert.Equal(t, int64(1), g.peak.Load())
	assert.Positive(t, st.Requeued, "jobs without a slot went back")
	assert.Equal(t, int64(n), st.Processed)
	assert.Equal(t, int64(0), st.Failed)
	assert.Equal(t, int64(0), st.Archived)
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)
}

// A handler whose slot is lost (here: its semaphore deleted under it, as
// after a partition longer than the lease) has its context cancelled, and the
// job goes back to run again, without counting as a failure.
func TestPoolInFlightLostSlot(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Limiter = fleetLimiter(t, h)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	var runs atomic.Int64
	p.HandleFunc("sync", func(ctx context.Context, task *asynq.Task) error {
		if runs.Add(1) > 1 {
			return nil
		}
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- ctx.Err()
		return ctx.Err()
	}, &workers.Policy{Name: "sync", Limit: throttle.Limit{Rate: 1000, Burst: 100}, InFlight: 1, InFlightLease: 300 * time.Millisecond})
	start(t, p)

	h.enqueue(t, queue.Task{Type: "sync"}, asynq.MaxRetry(0))
	recv(t, started, 10*time.Second, "the handler to start")
	n, err := h.rdb.Del(context.Background(), h.prefix+"{sync:inflight}:sem").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the semaphore's key")
	assert.ErrorIs(t, recv(t, cancelled, 10*time.Second, "the handler's context to end"), context.Canceled)
	waitFor(t, 30*time.Second, "the job to run again", func() bool { return p.Stats().Processed == 1 })
	st := p.Stats()
	assert.Equal(t, int64(1), st.Requeued)
	assert.Equal(t, int64(0), st.Failed)
	assert.Equal(t, int64(2), runs.Load())
}

// InFlight values that make no sense are refused when the pool starts.
func TestPoolInFlightValidation(t *testing.T) {
	h := newHarness(t)
	for _, pol := range []workers.Policy{
		{Name: "neg", Limit: pace, InFlight: -1},
		{Name: "huge", Limit: pace, InFlight: 1 << 21},
		{Name: "lease", Limit: pace, InFlight: 1, InFlightLease: time.Millisecond},
		{Name: "orphan", Limit: pace, InFlightLease: time.Second},
	} {
		p, err := workers.NewPool(h.config(t))
		require.NoError(t, err)
		p.HandleFunc("job", func(context.Context, *asynq.Task) error { return nil }, &pol)
		assert.ErrorContains(t, p.Start(), "In", "policy %q", pol.Name)
		require.NoError(t, p.Shutdown(context.Background()))
	}
}

// A handler that panics gives its in-flight slot back at once: the slot does
// not stay taken until its lease runs out.
func TestPoolInFlightPanicReleases(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Limiter = fleetLimiter(t, h)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	p.HandleFunc("crash", func(ctx context.Context, task *asynq.Task) error {
		panic("boom")
	}, &workers.Policy{Name: "crash", Limit: throttle.Limit{Rate: 1000, Burst: 100}, InFlight: 1, InFlightLease: time.Minute})
	start(t, p)

	id := h.enqueue(t, queue.Task{Type: "crash"}, asynq.MaxRetry(0))
	h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	n, err := h.rdb.ZCard(context.Background(), h.prefix+"{crash:inflight}:sem").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "slots held after the handler panicked")
}
