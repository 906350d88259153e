package workers_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// A cold adaptive bucket asks first: of jobs dequeued together, one calls
// the upstream and the others wait for its answer, which sets the rate
// before the configured burst is granted; then they run at that rate. Two
// pools on one Redis are one fleet: the claim is in the store.
func TestPoolColdStartAsksFirst(t *testing.T) {
	const jobs = 12
	h := newHarness(t)
	type call struct{ start, end time.Time }
	var mu sync.Mutex
	var calls []call
	pol := workers.Policy{Name: "api", Limit: throttle.Limit{Rate: 200, Burst: 20}, Adapt: true, AdaptFloor: 1}
	handler := func(ctx context.Context, task *asynq.Task) error {
		c := call{start: time.Now()}
		time.Sleep(50 * time.Millisecond) // the upstream's answer takes this long
		// IETF fields: 10 per second.
		hdr := http.Header{}
		hdr.Set("RateLimit-Policy", `"default";q=10;w=1`)
		hdr.Set("RateLimit", `"default";r=1;t=1`)
		workers.ObserveResponse(ctx, &http.Response{StatusCode: 200, Header: hdr})
		c.end = time.Now()
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		return nil
	}
	var pools []*workers.Pool
	for range 2 {
		cfg := h.config(t)
		cfg.Limiter = fleetLimiter(t, h) // a process of its own
		p, err := workers.NewPool(cfg)
		require.NoError(t, err)
		p.HandleFunc("job", handler, &pol)
		pools = append(pools, p)
	}
	for range jobs {
		h.enqueue(t, queue.Task{Type: "job"}, asynq.MaxRetry(0))
	}
	for _, p := range pools {
		start(t, p)
	}
	waitFor(t, 10*time.Second, "every job done", func() bool {
		return pools[0].Stats().Processed+pools[1].Stats().Processed == jobs
	})
	mu.Lock()
	defer mu.Unlock()
	first := calls[0]
	for _, c := range calls {
		if c.start.Before(first.start) {
			first = c
		}
	}
	alone := 0
	for _, c := range calls {
		if c != first && c.start.Before(first.end) {
			alone++
		}
	}
	assert.Zero(t, alone, "no call before the first one's answer")
	// At the announced 10/s (burst 20 scaled to 1): the other 11 take about 1 s.
	last := first.start
	for _, c := range calls {
		if c.start.After(last) {
			last = c.start
		}
	}
	assert.GreaterOrEqual(t, last.Sub(first.end), 800*time.Millisecond, "the rest at the announced rate, not the configured burst")
	for _, p := range pools {
		assert.Zero(t, p.Stats().Archived)
		assert.Zero(t, p.Stats().Failed)
	}
}
