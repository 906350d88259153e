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

// Shutdown does not wait for jobs that are waiting for their turn: they give
// their tokens back (or keep their ticket) and go back to the queue, neither
// retried nor archived, although they have no retries; and the pool leaves no
// goroutine behind (checked by the harness).
func TestPoolShutdownSendsWaitingJobsBack(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.ShutdownTimeout = 5 * time.Second
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	slow := throttle.Limit{Rate: 1, Period: 10 * time.Second, Burst: 1}
	ran := make(chan string, 8)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		ran <- string(task.Payload())
		return nil
	}, &workers.Policy{Name: "slow", Limit: slow, MaxWait: 30 * time.Second})
	require.NoError(t, p.Start())

	h.enqueue(t, queue.Task{Type: "job", Payload: []byte("first")}, asynq.MaxRetry(0))
	require.Equal(t, "first", recv(t, ran, 10*time.Second, "the first job"))
	// These two wait 10s and 20s for their turn.
	h.enqueue(t, queue.Task{Type: "job", Payload: []byte("second")}, asynq.MaxRetry(0))
	h.enqueue(t, queue.Task{Type: "job", Payload: []byte("third")}, asynq.MaxRetry(0))
	// This one holds a ticket for a slot 20s off.
	slot := time.Now().Add(20 * time.Second).Truncate(time.Microsecond)
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("job", []byte("ticket"), h.ticket(t, "slow", slot)), asynq.MaxRetry(0))
	waitFor(t, 10*time.Second, "three jobs to wait", func() bool { return p.Stats().Waiting == 3 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	require.NoError(t, p.Shutdown(ctx))
	assert.Less(t, time.Since(begin), cfg.ShutdownTimeout, "Shutdown waited for the waiting jobs")
	assert.ErrorIs(t, p.Start(), workers.ErrPoolClosed)

	// The reservations went back: the bucket is as the first job left it,
	// with its next token within 10s (not 30s).
	res, err := h.lim.TryAcquire(ctx, "slow", slow, 1)
	require.NoError(t, err)
	assert.LessOrEqual(t, res.RetryAfter, 10*time.Second)

	st := p.Stats()
	assert.Equal(t, int64(3), st.Requeued)
	assert.Equal(t, int64(0), st.Waiting)
	assert.Equal(t, int64(1), st.Processed)

	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)
	assert.Equal(t, 0, q.Active)
	back, err := h.insp.ListScheduledTasks(h.queue)
	require.NoError(t, err)
	pending, err := h.insp.ListPendingTasks(h.queue)
	require.NoError(t, err)
	back = append(back, pending...)
	require.Len(t, back, 3)
	for _, info := range back {
		assert.Equal(t, 0, info.Retried, "%s", info.Payload)
		m, err := queue.MetaOf(asynq.NewTaskWithHeaders(info.Type, info.Payload, info.Headers))
		require.NoError(t, err)
		if string(info.Payload) == "ticket" {
			// The slot as the store counts it, on this clock: within a round trip.
			assert.WithinDuration(t, slot, m.Slot, 20*time.Millisecond, "the ticket is kept")
			assert.NotEmpty(t, m.Ticket, "the ticket is kept")
			assert.Equal(t, 2, m.Requeues)
		} else {
			assert.Empty(t, m.Ticket, "%s gave its tokens back: no ticket", info.Payload)
			assert.Equal(t, 1, m.Requeues)
		}
	}
}
