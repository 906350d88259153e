package workers_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// runs records the handler runs of a test's jobs, by payload.
type runs struct {
	mu       sync.Mutex
	at       map[string]time.Time // first successful run of each job
	requeues map[string]int       // the job's sluice-requeues header on that run
}

func newRuns() *runs { return &runs{at: map[string]time.Time{}, requeues: map[string]int{}} }

func (r *runs) handler(ctx context.Context, t *asynq.Task) error {
	m, _ := queue.MetaOf(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.at[string(t.Payload())]; !dup {
		r.at[string(t.Payload())] = time.Now()
		r.requeues[string(t.Payload())] = m.Requeues
	}
	return nil
}

func (r *runs) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}

func (r *runs) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, at := range r.at {
		if at.After(last) {
			last = at
		}
	}
	return last
}

const jobs = 40

var pace = throttle.Limit{Rate: 20, Period: time.Second, Burst: 2}

// (jobs - Burst) tokens come one every 1/Rate after the first Burst.
var minRun = time.Duration(float64(jobs-pace.Burst) / pace.Rate * float64(time.Second))

// With a wait budget longer than the whole run, every job waits in the
// worker for its turn: none goes back to the queue, and the bucket's pace
// holds.
func TestPoolLongBudgetWaitsInWorker(t *testing.T) {
	h := newHarness(t)
	spans := tracetest.NewSpanRecorder()
	cfg := h.config(t)
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	r := newRuns()
	p.HandleFunc("job", r.handler, &workers.Policy{Name: "paced", Limit: pace, MaxWait: 10 * time.Second})
	start(t, p)

	begin := time.Now()
	for i := range jobs {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	waitFor(t, 20*time.Second, "every job to run", func() bool { return r.count() == jobs })

	assert.GreaterOrEqual(t, r.last().Sub(begin), minRun, "the bucket's pace")
	st := p.Stats()
	assert.Equal(t, int64(jobs), st.Processed)
	assert.Equal(t, int64(0), st.Requeued)
	assert.Equal(t, int64(0), st.Archived)
	assert.Equal(t, int64(0), st.Waiting)
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)

	// Each job has a span, and its throttle wait is a child of it.
	waitFor(t, 5*time.Second, "the job spans to end", func() bool { return countSpans(spans, "workers.job") == jobs })
	jobSpans := map[string]bool{}
	for _, s := range spans.Ended() {
		if s.Name() == "workers.job" {
			jobSpans[s.SpanContext().SpanID().String()] = true
		}
	}
	for _, s := range spans.Ended() {
		if s.Name() == "workers.throttle" {
			assert.True(t, jobSpans[s.Parent().SpanID().String()], "workers.throttle is a child of workers.job")
		}
	}
	assert.Equal(t, jobs, countSpans(spans, "workers.throttle"))
}

func countSpans(r *tracetest.SpanRecorder, name string) int {
	n := 0
	for _, s := range r.Ended() {
		if s.Name() == name {
			n++
		}
	}
	return n
}

// With a tiny wait budget, a job whose turn is further off goes back to the
// queue holding its turn, and runs when it comes back without asking again:
// one requeue per denied job, none for the others, no retry spent and nothing
// archived although the tasks have no retries at all.
func TestPoolTinyBudgetRequeuesEachDeniedJobOnce(t *testing.T) {
	h := newHarness(t)
	reader := sdkmetric.NewManualReader()
	cfg := h.config(t)
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	r := newRuns()
	p.HandleFunc("job", r.handler, &workers.Policy{Name: "paced", Limit: pace, MaxWait: 50 * time.Millisecond})
	start(t, p)

	begin := time.Now()
	for i := range jobs {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(strconv.Itoa(i))}, asynq.MaxRetry(0))
	}
	waitFor(t, 30*time.Second, "every job to run", func() bool { return r.count() == jobs })
	waitFor(t, 5*time.Second, "the queue to drain", func() bool {
		q := h.queueInfo(t)
		return q.Size-q.Completed == 0 && q.Active == 0 // sent-back copies stay completed for queue.CopyRetention
	})

	assert.GreaterOrEqual(t, r.last().Sub(begin), minRun, "the bucket's pace")
	sentBack := 0
	for job, n := range r.requeues {
		assert.LessOrEqual(t, n, 1, "job %s was sent back more than once", job)
		sentBack += n
	}
	st := p.Stats()
	assert.Positive(t, sentBack, "some jobs must have been denied with a 50ms budget")
	assert.Equal(t, int64(sentBack), st.Requeued, "requeues")
	assert.Equal(t, int64(jobs), st.Processed)
	assert.Equal(t, int64(0), st.Archived)
	assert.Equal(t, int64(0), st.Failed)
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)

	// The metrics say the same, by policy and reason.
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	assert.Equal(t, int64(sentBack), sumCounter(t, rm, "sluice.jobs.requeues", "sluice.reason", "budget"))
	assert.Equal(t, int64(jobs), sumCounter(t, rm, "sluice.jobs.processed", "sluice.outcome", "done"))
	assert.Equal(t, int64(sentBack), sumCounter(t, rm, "sluice.jobs.processed", "sluice.outcome", "requeued"))
}

// sumCounter adds up the points of counter name whose attribute key is value,
// checking that each point carries the policy and never a bucket key.
func sumCounter(t *testing.T, rm metricdata.ResourceMetrics, name, key, value string) int64 {
	t.Helper()
	var n int64
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/sluicehq/sluice/workers" {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 sum", name)
			for _, dp := range sum.DataPoints {
				pol, _ := dp.Attributes.Value("sluice.policy")
				assert.Equal(t, "paced", pol.AsString(), "%s: sluice.policy", name)
				assert.Equal(t, 2, dp.Attributes.Len(), "%s: attributes %v", name, dp.Attributes.ToSlice())
				if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// A job with no policy runs at once, and its handler's errors reach asynq
// unchanged.
func TestPoolUnthrottledAndFailures(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	ran := make(chan string, 4)
	p.HandleFunc("free", func(ctx context.Context, task *asynq.Task) error {
		ran <- string(task.Payload())
		return nil
	}, nil)
	p.HandleFunc("fails", func(ctx context.Context, task *asynq.Task) error {
		return fmt.Errorf("card declined")
	}, &workers.Policy{Name: "paced", Limit: pace})
	start(t, p)

	h.enqueue(t, queue.Task{Type: "free", Payload: []byte("a")})
	assert.Equal(t, "a", recv(t, ran, 10*time.Second, "the unthrottled job"))
	id := h.enqueue(t, queue.Task{Type: "fails"}, asynq.MaxRetry(0))
	info := h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	assert.Equal(t, "card declined (its 0 retries are spent): skip retry for the task", info.LastErr,
		"archived on the job's own budget, not on asynq's spare retry")
	assert.Equal(t, 0, info.Retried, "never retried: MaxRetry(0)")
	waitFor(t, 5*time.Second, "the failure to be counted", func() bool { return p.Stats().Failed == 1 })
	assert.Equal(t, int64(1), p.Stats().Processed)
	assert.Equal(t, int64(1), p.Stats().Archived, "asynq archived it in the pool's hands, and the pool says so")
}

// SetPolicy changes a running pool's policy: jobs that begin afterwards take
// their turns under the new limit; a bad policy or an unknown name is refused
// and leaves the old one.
func TestPoolSetPolicy(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	ran := make(chan time.Time, 8)
	fast := throttle.Limit{Rate: 100, Period: time.Second, Burst: 5}
	slow := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		ran <- time.Now()
		return nil
	}, &workers.Policy{Name: "api", Limit: fast, MaxWait: 100 * time.Millisecond})
	start(t, p)

	h.enqueue(t, queue.Task{Type: "call"})
	h.enqueue(t, queue.Task{Type: "call"})
	recv(t, ran, 10*time.Second, "a job under the fast limit")
	recv(t, ran, 10*time.Second, "another job under the fast limit")

	assert.ErrorContains(t, p.SetPolicy("nope", workers.Policy{Limit: slow}), "no task type is registered")
	assert.Error(t, p.SetPolicy("api", workers.Policy{Limit: throttle.Limit{Rate: -1, Period: time.Second, Burst: 1}}))
	assert.ErrorContains(t, p.SetPolicy("api", workers.Policy{Name: "other", Limit: slow}), "named")

	// One an hour from now on: of two jobs, one runs and one goes back.
	require.NoError(t, p.SetPolicy("api", workers.Policy{Limit: slow, MaxWait: 100 * time.Millisecond}))
	h.enqueue(t, queue.Task{Type: "call"})
	h.enqueue(t, queue.Task{Type: "call"})
	recv(t, ran, 10*time.Second, "the hour's one job")
	waitFor(t, 10*time.Second, "the other sent back for its turn", func() bool { return p.Stats().Requeued == 1 })
	select {
	case <-ran:
		t.Fatal("a second job ran under one an hour")
	case <-time.After(300 * time.Millisecond):
	}
	assert.Equal(t, int64(3), p.Stats().Processed)
}
