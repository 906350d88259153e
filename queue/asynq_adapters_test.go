package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
)

func TestRetryDelayFunc(t *testing.T) {
	const fallbackDelay = 42 * time.Second
	fallback := func(n int, err error, task *asynq.Task) time.Duration {
		return fallbackDelay + time.Duration(n)*time.Second
	}
	delay := queue.RetryDelayFunc(fallback)
	task := asynq.NewTask("x", nil)

	tests := []struct {
		name  string
		n     int
		err   error
		delay time.Duration
	}{
		{"throttled", 0, queue.Throttled(3*time.Second, "r"), 3 * time.Second},
		{"throttled keeps fractions above the floor", 0, queue.Throttled(2500*time.Millisecond, ""), 2500 * time.Millisecond},
		{"wrapped throttled", 5, fmt.Errorf("call api: %w", queue.Throttled(time.Minute, "")), time.Minute},
		{"sub-second throttled is floored", 0, queue.Throttled(300*time.Millisecond, ""), queue.MinRetryDelay},
		{"zero throttled is floored", 0, queue.Throttled(0, ""), queue.MinRetryDelay},
		{"negative RetryAfter is floored", 0, &queue.ThrottledError{RetryAfter: -time.Hour}, queue.MinRetryDelay},
		{"bare ErrThrottled uses fallback", 1, queue.ErrThrottled, fallbackDelay + time.Second},
		{"failure uses fallback", 2, errors.New("boom"), fallbackDelay + 2*time.Second},
		{"deadline uses fallback", 0, context.DeadlineExceeded, fallbackDelay},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.delay, delay(tt.n, tt.err, task), "step %d: %s", i, tt.name)
	}
}

func TestRetryDelayFuncDefaultFallback(t *testing.T) {
	delay := queue.RetryDelayFunc(nil)
	task := asynq.NewTask("x", nil)
	assert.Equal(t, 4*time.Second, delay(0, queue.Throttled(4*time.Second, ""), task))
	// asynq.DefaultRetryDelayFunc(0, ...) is 15s plus up to 29s of jitter.
	d := delay(0, errors.New("boom"), task)
	assert.GreaterOrEqual(t, d, 15*time.Second)
	assert.Less(t, d, 45*time.Second)
}

func TestIsFailure(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		failure bool
	}{
		{"nil", nil, false},
		{"throttled", queue.Throttled(time.Second, ""), false},
		{"wrapped throttled", fmt.Errorf("a: %w", queue.Throttled(time.Second, "")), false},
		{"bare ErrThrottled", queue.ErrThrottled, false},
		{"plain error", errors.New("boom"), true},
		{"deadline", context.DeadlineExceeded, true},
		{"skip retry", asynq.SkipRetry, true},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.failure, queue.IsFailure(tt.err), "step %d: %s", i, tt.name)
	}
}

// TestThrottledLastRetryIsArchived documents asynq's behaviour that the worker
// middleware works around: a task with no retries left is archived on any
// error, before asynq asks IsFailure, so a handler that returns Throttled
// loses a MaxRetry(0) job to the archive. The middleware calls Requeue and
// returns nil instead. (A task enqueued through queue.Client has one spare
// asynq retry, so this is shown with a task enqueued by plain asynq.)
func TestThrottledLastRetryIsArchived(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.serve(t, noDelay, func(context.Context, *asynq.Task) error {
		return queue.Throttled(2*time.Second, "tenant-42 over its limit")
	})
	info, err := h.ac.Enqueue(asynq.NewTask("x", nil), asynq.Queue(h.queue), asynq.MaxRetry(0))
	require.NoError(t, err)

	archived := h.waitState(t, info.ID, asynq.TaskStateArchived, 5*time.Second)
	assert.Equal(t, 0, archived.Retried)
	assert.Equal(t, "queue: throttled: tenant-42 over its limit: come back in 2s", archived.LastErr)
}

// TestThrottledRetryIsNotAFailure checks the safety net: a task with retries
// left that returns Throttled goes to the retry set for RetryAfter without
// spending a retry or counting as failed, and comes back.
func TestThrottledRetryIsNotAFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	seen := make(chan int, 2) // Retried as each run saw it
	var runs atomic.Int32
	h.serve(t, noDelay, func(ctx context.Context, _ *asynq.Task) error {
		n, _ := asynq.GetRetryCount(ctx)
		seen <- n
		if runs.Add(1) == 1 {
			return queue.Throttled(2*time.Second, "")
		}
		return nil
	})
	info, err := queue.NewClient(h.ac).Enqueue(context.Background(), queue.Task{Type: "x"}, asynq.Queue(h.queue), asynq.MaxRetry(2))
	require.NoError(t, err)
	assert.Equal(t, 0, recv(t, seen, 5*time.Second, "the first run"))

	retry := h.waitState(t, info.ID, asynq.TaskStateRetry, time.Second)
	assert.Equal(t, 0, retry.Retried)
	assert.Equal(t, 3, retry.MaxRetry, "the job's 2 and the spare")
	assert.Equal(t, "queue: throttled: come back in 2s", retry.LastErr)
	// Due in (1s, 2s]: asynq keeps whole seconds, truncated.
	assert.WithinDuration(t, time.Now().Add(1500*time.Millisecond), retry.NextProcessAt, 1500*time.Millisecond)
	q, err := h.insp.GetQueueInfo(h.queue)
	require.NoError(t, err)
	assert.Equal(t, 1, q.Retry)
	assert.Equal(t, 0, q.Failed)
	assert.Equal(t, 0, q.FailedTotal)

	assert.Equal(t, 0, recv(t, seen, 5*time.Second, "the run after the retry"), "the retry budget is untouched")
}
