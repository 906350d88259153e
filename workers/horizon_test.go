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

// A job throttled for longer than the horizon is archived, with the reason in
// asynq's record, when it would have to wait again; one past the horizon that
// can run at once runs.
func TestPoolHorizonArchives(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t)) // Horizon 24h
	require.NoError(t, err)
	hourly := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	rare := throttle.Limit{Rate: 1, Period: 30 * time.Hour, Burst: 1}
	ran := make(chan string, 4)
	handler := func(ctx context.Context, task *asynq.Task) error {
		ran <- task.Type()
		return nil
	}
	p.HandleFunc("hourly", handler, &workers.Policy{Name: "hourly", Limit: hourly})
	p.HandleFunc("rare", handler, &workers.Policy{Name: "rare", Limit: rare})
	start(t, p)
	ctx := context.Background()

	// Sent back first 25 hours ago, and its bucket is full: it runs.
	old := map[string]string{queue.HeaderThrottledSince: micros(time.Now().Add(-25 * time.Hour)), queue.HeaderRequeues: "7"}
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("hourly", nil, old), asynq.MaxRetry(5))
	assert.Equal(t, "hourly", recv(t, ran, 10*time.Second, "the old job with a token"))

	// Again, but now its bucket is empty for an hour.
	id := h.enqueueRaw(t, asynq.NewTaskWithHeaders("hourly", nil, old), asynq.MaxRetry(5))
	info := h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	assert.Regexp(t, `^workers: throttled for 25h0m\d+s, past the 24h0m0s horizon`, info.LastErr)
	assert.Equal(t, 0, info.Retried, "no retry spent")

	// Enqueued just now, but its turn is 30 hours off.
	res, err := h.lim.TryAcquire(ctx, "rare", rare, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	id = h.enqueue(t, queue.Task{Type: "rare"}, asynq.MaxRetry(5))
	info = h.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
	assert.Regexp(t, `^workers: throttled for \d+ms, and its next turn in 30h0m0s would pass the 24h0m0s horizon`, info.LastErr)

	assert.Equal(t, int64(2), p.Stats().Archived)
	assert.Equal(t, int64(0), p.Stats().Requeued)
}
