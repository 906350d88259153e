package workers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// With Fair, a key's backlog does not hold back another key's jobs: tenant
// a's 60 jobs are queued first, b's 8 after, and b's run among a's, at b's
// share of the global bucket, instead of after all of them. Every job runs
// once; a's jobs over its share go back and return at their places.
func TestPoolFairShares(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	perTenant, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	ran := make(chan string, 100)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		var v struct{ Tenant string }
		if err := json.Unmarshal(task.Payload(), &v); err != nil {
			return err
		}
		ran <- v.Tenant
		return nil
	}, &workers.Policy{Name: "acct", Limit: throttle.Limit{Rate: 1000, Burst: 100}, Key: perTenant,
		Global: throttle.Limit{Rate: 20, Burst: 1}, Fair: true})
	start(t, p)

	for range 60 {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "a"}`)}, asynq.MaxRetry(0))
	}
	for range 8 {
		h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "b"}`)}, asynq.MaxRetry(0))
	}
	var order []string
	for range 68 {
		order = append(order, recv(t, ran, 30*time.Second, "a job"))
	}
	lastB := 0
	for i, who := range order {
		if who == "b" {
			lastB = i
		}
	}
	t.Logf("b's last job ran %d of 68; requeued %d", lastB+1, p.Stats().Requeued)
	assert.Less(t, lastB, 40, "b's jobs ran at its share, not after a's backlog")
	assert.Positive(t, p.Stats().Requeued, "a's jobs over its share went back")
	select {
	case extra := <-ran:
		t.Fatalf("a job of %s ran twice", extra)
	case <-time.After(300 * time.Millisecond):
	}
}
