package workers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// StatsByPolicy splits the pool's counters by policy, with the refusals of
// an upstream (429, 503) counted apart; they add up to the pool's.
func TestPoolStatsByPolicy(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	limit := throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		if m, _ := queue.MetaOf(task); m.Requeues == 0 {
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: 200 * time.Millisecond}
		}
		return nil
	}, &workers.Policy{Name: "api", Limit: limit})
	p.HandleFunc("fail", func(ctx context.Context, task *asynq.Task) error {
		return errors.New("boom")
	}, &workers.Policy{Name: "mail", Limit: limit})
	p.HandleFunc("free", func(ctx context.Context, task *asynq.Task) error { return nil }, nil)
	start(t, p)

	h.enqueue(t, queue.Task{Type: "call"}, asynq.MaxRetry(0))
	h.enqueue(t, queue.Task{Type: "fail"}, asynq.MaxRetry(0))
	h.enqueue(t, queue.Task{Type: "free"}, asynq.MaxRetry(0))
	waitFor(t, 10*time.Second, "the three jobs", func() bool {
		st := p.Stats()
		return st.Processed == 2 && st.Archived == 1
	})

	by := p.StatsByPolicy()
	assert.Equal(t, workers.Stats{Processed: 1, Requeued: 1, Cooldowns: 1, Refused: 1}, by["api"])
	assert.Equal(t, workers.Stats{Failed: 1, Archived: 1}, by["mail"])
	assert.Len(t, by, 2, "an unthrottled type is left out: %v", by)
	st := p.Stats()
	assert.Equal(t, int64(1), st.Refused)
	assert.Equal(t, by["api"].Processed+by["mail"].Processed+1, st.Processed, "the unthrottled job counts pool-wide")
	assert.Equal(t, by["api"].Requeued+by["mail"].Requeued, st.Requeued)
}

// TakeWaits gives, per policy, each key's longest wait since its job was
// enqueued, under the key the policy derives (the tenant of a fair share,
// as Limiter.Shares names it), and starts afresh.
func TestPoolTakeWaits(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	perTenant, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	ran := make(chan string, 10)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		ran <- string(task.Payload())
		return nil
	}, &workers.Policy{Name: "acct", Limit: throttle.Limit{Rate: 1000, Burst: 100}, Key: perTenant,
		Global: throttle.Limit{Rate: 5, Period: time.Second, Burst: 1}, Fair: true})
	start(t, p)

	for range 3 {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "a"}`)}, asynq.MaxRetry(0))
	}
	h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "b"}`)}, asynq.MaxRetry(0))
	// Not from a sluice client: no enqueue time, not counted.
	h.enqueueRaw(t, asynq.NewTask("job", []byte(`{"tenant": "c"}`)), asynq.MaxRetry(0))
	began := time.Now()
	for range 5 {
		recv(t, ran, 10*time.Second, "a job")
	}
	took := time.Since(began)

	waits := p.TakeWaits()
	require.Contains(t, waits, "acct")
	w := waits["acct"]
	assert.ElementsMatch(t, []string{"a", "b"}, keys(w))
	// Five jobs at 5/s with a burst of 1: the last of them waited about 0.8 s.
	assert.GreaterOrEqual(t, max(w["a"], w["b"]), 500*time.Millisecond, "%v", w)
	assert.LessOrEqual(t, max(w["a"], w["b"]), took+time.Second, "%v", w)
	assert.Empty(t, p.TakeWaits(), "drained")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
