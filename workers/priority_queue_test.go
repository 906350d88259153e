package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// TestPoolPriorityDequeuedFirst is issue #26's queue side: a priority-1 job
// enqueued behind 1,000 pending priority-5 jobs of the same queue starts
// within the booking horizon (the turns of the jobs waiting in the pool's
// slots), with the same worker count, not behind the backlog. The pool is
// configured with the queue's name only: it serves its members.
func TestPoolPriorityDequeuedFirst(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.MaxWait = time.Minute // jobs wait for their turn in their slot: the backlog stays pending
	reader := sdkmetric.NewManualReader()
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	const rate, backlog = 20.0, 1000
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	type run struct {
		prio int
		at   time.Time
	}
	ran := make(chan run, backlog+1)
	p.HandleFunc("job", func(_ context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		ran <- run{m.Priority, time.Now()}
		return nil
	}, &workers.Policy{Name: "api", Limit: throttle.Limit{Rate: rate, Burst: 1}})

	for range backlog {
		h.enqueue(t, queue.Task{Type: "job", Priority: queue.LowestPriority})
	}
	start(t, p)
	for range 5 {
		r := recv(t, ran, 10*time.Second, "a priority-5 job")
		require.Equal(t, queue.LowestPriority, r.prio)
	}
	// Seen: the jobs waiting in the slots are counted by priority, in Stats
	// (the worker's status line) and in sluice.jobs.waiting.
	waitFor(t, 5*time.Second, "priority-5 jobs waiting", func() bool { return p.Stats().WaitingByPriority[4] > 0 })
	assert.Equal(t, [5]int64{0, 0, 0, 0, p.Stats().WaitingByPriority[4]}, p.Stats().WaitingByPriority)
	assert.Positive(t, waitingMetric(t, reader, 5), "sluice.jobs.waiting{sluice.priority=5}")
	by := p.WaitingByPriority()["api"]
	assert.Positive(t, by[4], "by policy and priority: %v", by)
	assert.Zero(t, by[0]+by[1]+by[2]+by[3], "by policy and priority: %v", by)
	enq := time.Now()
	h.enqueue(t, queue.Task{Type: "job", Priority: queue.HighestPriority})
	var first time.Time
	low := 0
	for first.IsZero() {
		r := recv(t, ran, 10*time.Second, "the priority-1 job")
		if r.prio == queue.HighestPriority {
			first = r.at
		} else {
			low++
		}
	}
	// The horizon: the jobs waiting in the slots (Concurrency) booked a turn
	// each, one every 1/rate; the priority-1 job's turn comes after them.
	horizon := time.Duration(float64(cfg.Concurrency+1) / rate * float64(time.Second))
	pending, err := h.insp.GetQueueInfo(queue.Member(h.queue, queue.LowestPriority, 0))
	require.NoError(t, err)
	t.Logf("priority 1 started %v after its enqueue, after %d priority-5 jobs; %d priority-5 jobs still pending; horizon %v",
		first.Sub(enq), low, pending.Pending, horizon)
	assert.Less(t, first.Sub(enq), horizon+500*time.Millisecond, "within the booking horizon")
	assert.LessOrEqual(t, low, cfg.Concurrency+2, "only the jobs already in the slots ran before it")
	assert.Greater(t, pending.Pending, backlog/2, "the backlog was still there: it did not wait for it")
}

// waitingMetric is the sum of sluice.jobs.waiting at priority prio.
func waitingMetric(t *testing.T, reader *sdkmetric.ManualReader, prio int) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != "sluice.jobs.waiting" || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value("sluice.priority"); ok && v.AsInt64() == int64(prio) {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestPoolRefusesMemberQueue: a queue configured under a member's name is a
// configuration mistake.
func TestPoolRefusesMemberQueue(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Queues = map[string]int{h.queue: 2, h.queue + ":p1": 1}
	_, err := workers.NewPool(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "named like a member of a queue's family")
}
