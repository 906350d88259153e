package queue_test

import (
	"github.com/sluicehq/sluice/internal/asynqtest"

	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// harness is a redis-server of the test's own with an asynq client and
// inspector on it, and a queue name no other test uses.
type harness struct {
	rdb   *redis.Client
	ac    *asynq.Client
	insp  *asynq.Inspector
	queue string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	return &harness{
		rdb:   rdb,
		ac:    asynq.NewClientFromRedisClient(rdb), // shares rdb, which the helper closes
		insp:  asynq.NewInspectorFromRedisClient(rdb),
		queue: queueName(),
	}
}

func queueName() string { return asynqtest.QueueName() }

// serve runs an asynq server on h's queue with sluice's retry adapters, a
// 200ms forwarder, a fast task check and one worker, and shuts it down at
// cleanup.
// fallback decides the retry delay of real failures.
func (h *harness) serve(t *testing.T, fallback asynq.RetryDelayFunc, handler asynq.HandlerFunc) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(h.rdb, asynq.Config{
		Concurrency:              1, // one run at a time: runs report in order
		Queues:                   map[string]int{h.queue: 1},
		TaskCheckInterval:        50 * time.Millisecond,
		DelayedTaskCheckInterval: 200 * time.Millisecond,
		RetryDelayFunc:           queue.RetryDelayFunc(fallback),
		IsFailure:                queue.IsFailure,
		ShutdownTimeout:          2 * time.Second,
		LogLevel:                 asynq.ErrorLevel,
	})
	require.NoError(t, srv.Start(handler))
	t.Cleanup(srv.Shutdown)
}

// noDelay is a fallback RetryDelayFunc that retries a failed task on the next
// forwarder tick.
func noDelay(int, error, *asynq.Task) time.Duration { return 0 }

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	asynqtest.WaitFor(t, timeout, what, cond)
}

func (h *harness) waitState(t *testing.T, id string, state asynq.TaskState, timeout time.Duration) *asynq.TaskInfo {
	t.Helper()
	return asynqtest.WaitState(t, h.insp, h.queue, id, state, timeout)
}

func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	return asynqtest.Recv(t, ch, timeout, what)
}
