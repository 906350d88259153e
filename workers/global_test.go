package workers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// With Global, a job takes from its own bucket and the policy's global one
// together, and both keys share the policy's hash tag.
func TestPoolGlobalBucket(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.MaxWait = 50 * time.Millisecond
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	perTenant, err := workers.KeyTemplate("{payload.tenant}")
	require.NoError(t, err)
	global := throttle.Limit{Rate: 1, Period: 10 * time.Second, Burst: 1}
	ran := make(chan string, 4)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		ran <- string(task.Payload())
		return nil
	}, &workers.Policy{Name: "acct", Limit: throttle.Limit{Rate: 100, Burst: 10}, Key: perTenant, Global: &global})
	start(t, p)

	h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "a"}`)}, asynq.MaxRetry(0))
	assert.Equal(t, `{"tenant": "a"}`, recv(t, ran, 10*time.Second, "the first job"))
	// Another tenant, with a full bucket of its own, waits for the global one.
	h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "b"}`)}, asynq.MaxRetry(0))
	waitFor(t, 10*time.Second, "the second job to go back", func() bool { return p.Stats().Requeued == 1 })

	keys, err := h.rdb.Keys(context.Background(), h.prefix+"*").Result()
	require.NoError(t, err)
	// The tenants' buckets refill in milliseconds and expire; the global one
	// is there for 20s.
	assert.Contains(t, keys, h.prefix+"{acct}:*global*")
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, h.prefix+"{acct}:"), "%s carries the policy's hash tag", k)
	}
}
