package workers_test

import (
	"context"
	"encoding/json"
	"net/http"
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

// slowUpstream serves c calls at once in s each and queues the rest, as a
// database does: the more in flight, the slower each answer. It counts the
// calls in it (queued or served) and the most at once.
type slowUpstream struct {
	slots     chan struct{}
	s         time.Duration
	in, peak  atomic.Int64
	mu        sync.Mutex
	perTenant map[string]int // calls in it now, by tenant
	tenantMax map[string]int // and the most at once
}

func newSlowUpstream(c int, s time.Duration) *slowUpstream {
	return &slowUpstream{slots: make(chan struct{}, c), s: s, perTenant: map[string]int{}, tenantMax: map[string]int{}}
}

func (u *slowUpstream) call(ctx context.Context, tenant string) error {
	n := u.in.Add(1)
	defer u.in.Add(-1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	u.mu.Lock()
	u.perTenant[tenant]++
	u.tenantMax[tenant] = max(u.tenantMax[tenant], u.perTenant[tenant])
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.perTenant[tenant]--
		u.mu.Unlock()
	}()
	select {
	case u.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-u.slots }()
	time.Sleep(u.s)
	return nil
}

// Two pools of ten workers each, with InFlightAuto over an upstream that
// serves 4 calls at once: the fleet's bound settles near 4 (not 20, the
// workers, nor 30, the ceiling), read by Limiter.InFlight with the
// baseline latency of one call, and every job runs once.
func TestPoolInFlightAuto(t *testing.T) {
	h := newHarness(t)
	up := newSlowUpstream(4, 20*time.Millisecond)
	pol := &workers.Policy{Name: "db", Limit: throttle.Limit{Rate: 10000, Burst: 1000}, InFlight: 30, InFlightAuto: true, MaxWait: 20 * time.Second}
	var done atomic.Int64
	handler := func(ctx context.Context, task *asynq.Task) error {
		err := up.call(ctx, "")
		done.Add(1)
		return err
	}
	for range 2 {
		cfg := h.config(t)
		cfg.Limiter = fleetLimiter(t, h)
		p, err := workers.NewPool(cfg)
		require.NoError(t, err)
		p.HandleFunc("db", handler, pol)
		start(t, p)
	}
	const n = 600
	for i := range n {
		h.enqueue(t, queue.Task{Type: "db", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	key, c := workers.InFlightOf(*pol)
	require.Equal(t, "db:inflight", key)
	var bounds []int
	waitFor(t, 60*time.Second, "every job to run", func() bool {
		if st, err := h.lim.InFlight(context.Background(), key, c); err == nil {
			bounds = append(bounds, st.Bound)
		}
		time.Sleep(50 * time.Millisecond)
		return done.Load() >= n
	})
	require.Greater(t, len(bounds), 20)
	late := bounds[len(bounds)/2:]
	for i, b := range late {
		assert.LessOrEqual(t, b, 8, "bound %d of the second half over twice the upstream's 4: %v", i, late)
		assert.GreaterOrEqual(t, b, 3, "bound %d: %v", i, late)
	}
	st, err := h.lim.InFlight(context.Background(), key, c)
	require.NoError(t, err)
	assert.InDelta(t, float64(20*time.Millisecond), float64(st.Baseline), float64(10*time.Millisecond), "the baseline is one call's time: %+v", st)
	assert.Less(t, up.peak.Load(), int64(15), "the upstream never saw the fleet's 20 workers at once")
	t.Logf("bounds every 50ms: %v; upstream peak %d; %+v", bounds, up.peak.Load(), st)
}

// in-flight=auto with every other option on: a key per tenant (a bound per
// tenant), a global bucket shared fairly, an adaptive rate, an upstream
// refusal that cools the bucket down (and counts as overload for the
// tenant's bound), and a policy set at runtime (SetPolicy, as `sluice set`
// does) that lowers the ceiling. Every job runs once; no tenant's calls in
// the upstream exceed its ceiling after the change; a refusal lowered the
// bound.
func TestPoolInFlightAutoWithEveryOption(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	key, err := workers.KeyTemplate("tenant:{payload.tenant}")
	require.NoError(t, err)
	policy := func(ceiling int) workers.Policy {
		return workers.Policy{Name: "api", Key: key, Limit: throttle.Limit{Rate: 500, Burst: 50},
			Global: throttle.Limit{Rate: 1000, Burst: 100}, Fair: true, Adapt: true,
			InFlight: ceiling, InFlightAuto: true, InFlightFloor: 1, MaxWait: 20 * time.Second}
	}
	pol := policy(50)
	up := newSlowUpstream(3, 10*time.Millisecond)
	var refused atomic.Bool
	var done sync.Map
	var count atomic.Int64
	p.HandleFunc("api", func(ctx context.Context, task *asynq.Task) error {
		var in struct {
			Tenant string
			Refuse bool
		}
		if err := json.Unmarshal(task.Payload(), &in); err != nil {
			return err
		}
		if in.Refuse && refused.CompareAndSwap(false, true) {
			return &workers.UpstreamError{StatusCode: http.StatusServiceUnavailable, RetryAfter: 200 * time.Millisecond}
		}
		if err := up.call(ctx, in.Tenant); err != nil {
			return err
		}
		if _, dup := done.LoadOrStore(string(task.Payload()), true); !dup {
			count.Add(1)
		}
		return nil
	}, &pol)
	start(t, p)

	job := func(tenant string, i int, refuse bool) []byte {
		b, _ := json.Marshal(map[string]any{"tenant": tenant, "i": i, "refuse": refuse})
		return b
	}
	n := 0
	for i := range 80 {
		for _, tenant := range []string{"a", "b"} {
			h.enqueue(t, queue.Task{Type: "api", Key: "tenant:" + tenant, Payload: job(tenant, i, tenant == "a" && i == 40)}, asynq.MaxRetry(0))
			n++
		}
	}
	waitFor(t, 60*time.Second, "the first batch to run", func() bool { return count.Load() >= int64(n) })
	assert.True(t, refused.Load(), "the refusal was answered")

	semA := workers.BucketKey(pol, "tenant:a", "") + ":inflight"
	c := throttle.Concurrency{Max: 50, Auto: true, Floor: 1}
	st, err := h.lim.InFlight(context.Background(), semA, c)
	require.NoError(t, err)
	assert.NotEqual(t, "cold", st.Reason, "tenant a's bound moved: %+v", st)
	assert.Positive(t, st.Baseline, "and measured its baseline")

	// Lower the ceiling at runtime: 2 calls of a tenant at once, at most.
	require.NoError(t, p.SetPolicy("api", policy(2)))
	up.mu.Lock()
	clear(up.tenantMax)
	up.mu.Unlock()
	for i := range 40 {
		for _, tenant := range []string{"a", "b"} {
			h.enqueue(t, queue.Task{Type: "api", Key: "tenant:" + tenant, Payload: job(tenant, 100+i, false)}, asynq.MaxRetry(0))
			n++
		}
	}
	waitFor(t, 60*time.Second, "the second batch to run", func() bool { return count.Load() >= int64(n) })
	up.mu.Lock()
	defer up.mu.Unlock()
	for tenant, most := range up.tenantMax {
		assert.LessOrEqual(t, most, 2, "tenant %s: at most the new ceiling in the upstream", tenant)
	}
	assert.Equal(t, int64(n), count.Load(), "every job ran once")
	stats := p.Stats()
	assert.Equal(t, int64(0), stats.Archived)
	assert.Positive(t, stats.Cooldowns, "the refusal cooled the bucket down")
}

// A rate and in-flight=auto on one type: the tighter binds. Over an upstream
// that serves 50 calls at once in 5 ms, a rate of 20/s (burst 1) is the
// tighter limit: 40 jobs take at least 39 turns of 50 ms, however high the
// learned in-flight bound climbs, and the rate's pace leaves at most a
// couple of calls in the upstream at once.
func TestPoolInFlightAutoWithTighterRate(t *testing.T) {
	h := newHarness(t)
	up := newSlowUpstream(50, 5*time.Millisecond)
	pol := &workers.Policy{Name: "db", Limit: throttle.Limit{Rate: 20, Burst: 1}, InFlight: 30, InFlightAuto: true, MaxWait: 20 * time.Second}
	var done atomic.Int64
	var first, last atomic.Int64
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	p.HandleFunc("db", func(ctx context.Context, task *asynq.Task) error {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		err := up.call(ctx, "")
		done.Add(1)
		return err
	}, pol)
	start(t, p)
	const n = 40
	for i := range n {
		h.enqueue(t, queue.Task{Type: "db", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	waitFor(t, 30*time.Second, "every job to run", func() bool { return done.Load() >= n })
	span := time.Duration(last.Load() - first.Load())
	assert.GreaterOrEqual(t, span, 39*50*time.Millisecond-time.Millisecond, "the rate binds: %d starts took %v", n, span)
	assert.LessOrEqual(t, up.peak.Load(), int64(3), "the rate's pace keeps the upstream nearly idle")
	assert.Equal(t, int64(n), done.Load(), "every job ran once")
	assert.Equal(t, int64(0), p.Stats().Archived)
}
