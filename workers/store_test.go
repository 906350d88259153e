package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// While the limiter's Redis is down (fail closed), a job goes back to its
// queue with a backoff instead of failing; it runs once the store is back.
func TestPoolLimiterStoreDown(t *testing.T) {
	h := newHarness(t)
	store := redistest.Start(t)
	cfg := h.config(t)
	cfg.Limiter = throttle.NewLimiter(throttle.NewRedisStore(store.Client(t)))
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	ran := make(chan queue.Meta, 1)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		ran <- m
		return nil
	}, &workers.Policy{Name: "paced", Limit: pace})
	start(t, p)

	store.Kill(t)
	h.enqueue(t, queue.Task{Type: "job"}, asynq.MaxRetry(0))
	waitFor(t, 10*time.Second, "the job to go back", func() bool { return p.Stats().Requeued >= 1 })
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)

	store.Restart(t)
	m := recv(t, ran, 15*time.Second, "the job after the store came back")
	assert.Positive(t, m.Requeues)
	assert.Equal(t, int64(0), p.Stats().Failed)
}

// Run starts the pool and, when its context ends, shuts it down and returns.
func TestPoolRun(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	ran := make(chan struct{}, 1)
	p.HandleFunc("job", func(context.Context, *asynq.Task) error {
		ran <- struct{}{}
		return nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()

	h.enqueue(t, queue.Task{Type: "job"})
	recv(t, ran, 10*time.Second, "the job")
	cancel()
	assert.NoError(t, recv(t, errc, 10*time.Second, "Run to return"))
	assert.ErrorIs(t, p.Start(), workers.ErrPoolClosed)
}
