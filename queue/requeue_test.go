package queue_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
)

// run is what the handler saw and did in one run of a task.
type run struct {
	id       string
	queue    string
	retried  int
	maxRetry int
	headers  map[string]string
	meta     queue.Meta
	metaErr  error

	// Set by the run that called Requeue.
	copy, again       *asynq.TaskInfo
	copyErr, againErr error
	deadErr           error
}

// TestRequeue follows a job sent back twice from inside its handler: the
// original asks to come back in 2s holding a slot, the first copy asks to come
// back at once without one, the second copy completes. It runs for a task
// with no retries at all, and for one that failed once and has retries left.
func TestRequeue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		maxRetry     int
		failFirst    bool // fail the first attempt with a real error, so Retried is 1
		copyMaxRetry int  // the job's own budget left on the copy; asynq holds one more
	}{
		{"MaxRetry 0", 0, false, 0},
		{"MaxRetry 3 after a failure", 3, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var ticks atomic.Int64 // each read of the clock is one minute later
			c := queue.NewClient(h.ac, queue.WithClock(func() time.Time {
				return t0.Add(time.Duration(ticks.Add(1)-1) * time.Minute)
			}))
			dead := queue.NewClient(asynq.NewClientFromRedisClient(deadRedis(t)))
			slot := time.Now().Add(2 * time.Second).Truncate(time.Microsecond)

			runs := make(chan run, 8)
			h.serve(t, noDelay, func(ctx context.Context, task *asynq.Task) error {
				r := run{headers: task.Headers()}
				r.id, _ = asynq.GetTaskID(ctx)
				r.queue, _ = asynq.GetQueueName(ctx)
				r.retried, _ = asynq.GetRetryCount(ctx)
				r.maxRetry, _ = asynq.GetMaxRetry(ctx)
				r.meta, r.metaErr = queue.MetaOf(task)
				switch {
				case r.meta.Requeues == 0 && tt.failFirst && r.retried == 0:
					return errors.New("boom") // a real failure: spends a retry
				case r.meta.Requeues == 0:
					r.copy, r.copyErr = c.Requeue(ctx, task, 2*time.Second, slot)
					// The same job delivered again, as after a crash between
					// enqueueing the copy and acking the original.
					r.again, r.againErr = c.Requeue(ctx, task, 2*time.Second, slot)
					_, r.deadErr = dead.Requeue(ctx, task, 2*time.Second, slot)
				case r.meta.Requeues == 1:
					r.copy, r.copyErr = c.Requeue(ctx, task, 0, time.Time{})
				}
				runs <- r
				return nil
			})

			info, err := c.Enqueue(context.Background(),
				queue.Task{Type: "email:send", Payload: []byte("hello"), Key: "tenant-42", Cost: 2, Headers: map[string]string{"trace-id": "abc"}},
				asynq.Queue(h.queue), asynq.MaxRetry(tt.maxRetry), asynq.Timeout(90*time.Second), asynq.Retention(time.Hour))
			require.NoError(t, err)
			origin := info.ID
			enqueuedAt := t0 // first clock read

			// The original: sends itself back once; the second try is a no-op.
			first := recv(t, runs, 5*time.Second, "the original's run")
			require.NoError(t, first.metaErr)
			require.NoError(t, first.copyErr)
			require.NotNil(t, first.copy)
			assert.Equal(t, origin, first.id)
			assert.Equal(t, tt.maxRetry-tt.copyMaxRetry, first.retried)
			assert.NoError(t, first.againErr, "a second requeue of the same run is not an error")
			assert.Nil(t, first.again, "and makes no copy")
			require.Error(t, first.deadErr, "a failed enqueue is reported")
			assert.True(t, strings.HasPrefix(first.deadErr.Error(), "queue: requeue email:send: "), first.deadErr.Error())

			copyID := origin + "~1"
			assert.Equal(t, copyID, first.copy.ID)
			assert.Equal(t, h.queue, first.copy.Queue)
			assert.Equal(t, tt.copyMaxRetry+1, first.copy.MaxRetry, "the budget left, and the spare")
			assert.Equal(t, asynq.TaskStateScheduled, first.copy.State)

			// The copy waits in the scheduled set, once, with its metadata.
			scheduled := h.waitState(t, copyID, asynq.TaskStateScheduled, time.Second)
			assert.Equal(t, "email:send", scheduled.Type)
			assert.Equal(t, "hello", string(scheduled.Payload))
			assert.Equal(t, tt.copyMaxRetry+1, scheduled.MaxRetry)
			assert.Equal(t, 0, scheduled.Retried)
			assert.Equal(t, 90*time.Second, scheduled.Timeout)
			assert.Equal(t, time.Hour, scheduled.Retention)
			assert.WithinDuration(t, time.Now().Add(1500*time.Millisecond), scheduled.NextProcessAt, 1500*time.Millisecond)
			all, err := h.insp.ListScheduledTasks(h.queue)
			require.NoError(t, err)
			assert.Len(t, all, 1, "one copy, however often the original asked")
			m, err := queue.MetaOf(asynq.NewTaskWithHeaders(scheduled.Type, scheduled.Payload, scheduled.Headers))
			require.NoError(t, err)
			assert.Equal(t, queue.Meta{
				Key:            "tenant-42",
				Cost:           2,
				EnqueuedAt:     enqueuedAt,
				ThrottledSince: t0.Add(time.Minute), // second clock read
				Slot:           slot.UTC(),
				Requeues:       1,
				Origin:         origin,
				Timeout:        90 * time.Second,
				Retention:      time.Hour,
				MaxRetry:       tt.copyMaxRetry,
				HasMaxRetry:    true,
			}, utcMeta(m))
			assert.Equal(t, "abc", scheduled.Headers["trace-id"])

			// The original completed: not archived, not retrying.
			orig := h.waitState(t, origin, asynq.TaskStateCompleted, 2*time.Second)
			assert.Equal(t, tt.maxRetry+1, orig.MaxRetry, "the job's budget and asynq's spare")
			archived, err := h.insp.ListArchivedTasks(h.queue)
			require.NoError(t, err)
			assert.Empty(t, archived)

			// The copy runs with the remaining retry budget and sends itself
			// back at once, without a slot.
			second := recv(t, runs, 5*time.Second, "the first copy's run")
			require.NoError(t, second.metaErr)
			require.NoError(t, second.copyErr)
			assert.Equal(t, copyID, second.id)
			assert.Equal(t, h.queue, second.queue)
			assert.Equal(t, 0, second.retried)
			assert.Equal(t, tt.copyMaxRetry+1, second.maxRetry)
			assert.False(t, time.Now().Before(slot.Add(-time.Second)), "due at most 1s early")
			require.NotNil(t, second.copy)
			assert.Equal(t, origin+"~2", second.copy.ID)

			third := recv(t, runs, 5*time.Second, "the second copy's run")
			require.NoError(t, third.metaErr)
			assert.Equal(t, origin+"~2", third.id)
			assert.Equal(t, tt.copyMaxRetry+1, third.maxRetry)
			assert.Equal(t, queue.Meta{
				Key:            "tenant-42",
				Cost:           2,
				EnqueuedAt:     enqueuedAt,
				ThrottledSince: t0.Add(time.Minute), // kept from the first requeue
				Requeues:       2,
				Origin:         origin,
				Timeout:        90 * time.Second,
				Retention:      time.Hour,
				MaxRetry:       tt.copyMaxRetry,
				HasMaxRetry:    true,
			}, utcMeta(third.meta))
			_, hasSlot := third.headers[queue.HeaderSlot]
			assert.False(t, hasSlot, "a zero slot removes the header")

			h.waitState(t, origin+"~2", asynq.TaskStateCompleted, 2*time.Second)
			info1, err := h.insp.GetTaskInfo(h.queue, copyID)
			require.NoError(t, err)
			assert.Equal(t, asynq.TaskStateCompleted, info1.State)
			q, err := h.insp.GetQueueInfo(h.queue)
			require.NoError(t, err)
			assert.Equal(t, 0, q.Archived)
		})
	}
}

func TestRequeueKeepsDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac)
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	copies := make(chan *asynq.TaskInfo, 1)
	errs := make(chan error, 1)
	h.serve(t, noDelay, func(ctx context.Context, task *asynq.Task) error {
		info, err := c.Requeue(ctx, task, time.Hour, time.Time{})
		copies <- info
		errs <- err
		return nil
	})
	_, err := c.Enqueue(context.Background(), queue.Task{Type: "x"}, asynq.Queue(h.queue), asynq.Deadline(deadline))
	require.NoError(t, err)
	info := recv(t, copies, 5*time.Second, "the copy")
	require.NoError(t, <-errs)
	require.NotNil(t, info)
	assert.True(t, deadline.Equal(info.Deadline), "Deadline %v", info.Deadline)
	assert.Equal(t, time.Duration(0), info.Timeout)
	assert.Equal(t, 26, info.MaxRetry, "asynq's default budget of 25, and the spare")
	assert.Equal(t, "25", info.Headers[queue.HeaderMaxRetry])
}

func TestRequeueOutsideHandler(t *testing.T) {
	c := queue.NewClient(nil) // never reached
	_, err := c.Requeue(context.Background(), asynq.NewTask("x", nil), time.Second, time.Time{})
	assert.True(t, errors.Is(err, queue.ErrNotInHandler), "got %v", err)
	_, err = c.Requeue(context.Background(), nil, time.Second, time.Time{})
	assert.Error(t, err)
}

// deadRedis returns a client for a loopback port where nothing listens.
func deadRedis(t *testing.T) *redis.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// utcMeta returns m with its times in UTC, for comparing with assert.Equal.
func utcMeta(m queue.Meta) queue.Meta {
	for _, p := range []*time.Time{&m.EnqueuedAt, &m.ThrottledSince, &m.Slot, &m.Deadline} {
		if !p.IsZero() {
			*p = p.UTC()
		}
	}
	return m
}

func TestRequeueDropsMalformedHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac)
	copies := make(chan *asynq.TaskInfo, 1)
	errs := make(chan error, 1)
	h.serve(t, noDelay, func(ctx context.Context, task *asynq.Task) error {
		info, err := c.Requeue(ctx, task, time.Hour, time.Time{})
		copies <- info
		errs <- err
		return nil
	})
	// Raw asynq, as a foreign enqueuer would: a cost that is not a number and
	// a requeue count out of range.
	bad := asynq.NewTaskWithHeaders("x", []byte("p"), map[string]string{
		queue.HeaderCost: "lots", queue.HeaderRequeues: "-3", "trace": "keep-me",
	})
	_, err := h.ac.Enqueue(bad, asynq.Queue(h.queue))
	require.NoError(t, err)

	info := recv(t, copies, 5*time.Second, "the copy")
	require.NoError(t, <-errs, "a malformed header is no reason to lose the job")
	require.NotNil(t, info)
	got := info.Headers
	assert.NotContains(t, got, queue.HeaderCost, "the malformed cost is dropped")
	assert.Equal(t, "1", got[queue.HeaderRequeues], "the count starts again")
	assert.Equal(t, "keep-me", got["trace"], "other headers travel with the job")
	assert.Equal(t, []byte("p"), info.Payload)
}

// A worker that dies after Requeue made the copy, before asynq dropped the
// original, has the original delivered again; by then the copy may have run
// and succeeded. The copy's id is still held (CopyRetention), so the second
// Requeue makes no copy: the job runs once more, not twice.
func TestRequeueAfterTheCopySucceededMakesNoSecondCopy(t *testing.T) {
	h := newHarness(t)
	c := queue.NewClient(h.ac)
	copies := make(chan string, 4)
	originals := make(chan struct{}, 4)
	h.serve(t, noDelay, func(ctx context.Context, task *asynq.Task) error {
		m, err := queue.MetaOf(task)
		require.NoError(t, err)
		if m.Requeues > 0 {
			copies <- m.Origin
			return nil
		}
		retried, _ := asynq.GetRetryCount(ctx)
		info, err := c.Requeue(ctx, task, 0, time.Time{})
		require.NoError(t, err)
		originals <- struct{}{}
		if retried == 0 {
			require.NotNil(t, info, "the first copy")
			// The worker "dies" here: asynq is not told the original is
			// done, and brings it back (here as a retry, once the copy ran).
			return errors.New("worker died")
		}
		assert.Nil(t, info, "a second copy")
		return nil
	})
	_, err := c.Enqueue(context.Background(), queue.Task{Type: "job"}, asynq.Queue(h.queue), asynq.MaxRetry(3))
	require.NoError(t, err)
	recv(t, originals, 10*time.Second, "the original's first run")
	recv(t, copies, 10*time.Second, "the copy")
	recv(t, originals, 10*time.Second, "the original delivered again")
	select {
	case <-copies:
		t.Fatal("the copy ran twice")
	case <-time.After(time.Second):
	}
}
