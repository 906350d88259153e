package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// A task its policy cannot derive a bucket from is archived at once with the
// reason, never retried and never lost silently; a malformed sluice header is
// ignored, and the job still runs and can still be sent back.
func TestPoolBadTasks(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	byTenant, err := workers.KeyTemplate("tenant:{payload.tenant}")
	require.NoError(t, err)
	byHeader, err := workers.KeyTemplate("{header.sluice-key}")
	require.NoError(t, err)
	once := throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}

	type run struct {
		payload string
		headers map[string]string
		meta    queue.Meta
	}
	ran := make(chan run, 8)
	handler := func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		ran <- run{string(task.Payload()), task.Headers(), m}
		return nil
	}
	p.HandleFunc("tenant", handler, &workers.Policy{Name: "tenant", Limit: pace, Key: byTenant})
	p.HandleFunc("keyed", handler, &workers.Policy{Name: "keyed", Limit: pace, Key: byHeader})
	p.HandleFunc("tiny", handler, &workers.Policy{Name: "tiny", Limit: once, MaxWait: 50 * time.Millisecond})
	start(t, p)

	cases := []struct {
		name    string
		task    *asynq.Task
		lastErr string
	}{
		{"payload not JSON", asynq.NewTask("tenant", []byte("tenant=42")),
			`workers: cannot derive the bucket key: policy "tenant": key template "tenant:{payload.tenant}": payload is not a JSON object; archived`},
		{"field missing", asynq.NewTask("tenant", []byte(`{"other": 1}`)),
			`payload field "tenant" is missing or empty`},
		{"field an object", asynq.NewTask("tenant", []byte(`{"tenant": {"id": 1}}`)),
			`payload field "tenant" is not a string or a number`},
		{"header missing", asynq.NewTask("keyed", nil),
			`key template "{header.sluice-key}": header "sluice-key" is missing or empty`},
		{"cost over burst", asynq.NewTaskWithHeaders("tenant", []byte(`{"tenant": "a"}`), map[string]string{queue.HeaderCost: "5"}),
			`workers: bad job cost: policy "tenant": cost 5 is more than its burst 2; archived`},
	}
	for _, c := range cases {
		id := h.enqueueRaw(t, c.task, asynq.MaxRetry(3))
		info := h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
		assert.Contains(t, info.LastErr, c.lastErr, c.name)
		assert.Equal(t, 0, info.Retried, c.name)
	}
	assert.Equal(t, int64(len(cases)), p.Stats().Archived)

	// Malformed sluice headers count as absent: the job runs on the policy's cost.
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("tenant", []byte(`{"tenant": 7}`), map[string]string{
		queue.HeaderCost: "lots", queue.HeaderEnqueuedAt: "yesterday",
	}), asynq.MaxRetry(0))
	r := recv(t, ran, 10*time.Second, "the job with malformed headers")
	assert.Equal(t, `{"tenant": 7}`, r.payload)

	// And one whose turn is far off goes back and comes back, without them.
	res, err := h.lim.TryAcquire(context.Background(), "tiny", once, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("tiny", []byte("x"), map[string]string{
		queue.HeaderCost: "lots", queue.HeaderRequeues: "-1",
	}), asynq.MaxRetry(0))
	r = recv(t, ran, 10*time.Second, "the sent-back job with malformed headers")
	assert.Equal(t, 1, r.meta.Requeues)
	assert.NotContains(t, r.headers, queue.HeaderCost)
	assert.Equal(t, int64(1), p.Stats().Requeued)
}
