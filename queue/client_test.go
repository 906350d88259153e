package queue_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	ac := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	qname := queueName()
	now := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	c := queue.NewClient(ac, queue.WithClock(func() time.Time { return now }))

	extra := map[string]string{"trace-id": "abc"}
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	info, err := c.Enqueue(context.Background(),
		queue.Task{Type: "email:send", Payload: []byte(`{"to":"a@example.com"}`), Key: "tenant-42", Cost: 3, Headers: extra},
		asynq.Queue(qname), asynq.MaxRetry(4), asynq.ProcessIn(time.Hour),
		asynq.Timeout(time.Minute), asynq.Timeout(90*time.Second), // the last one wins, as in asynq
		asynq.Deadline(deadline), asynq.Retention(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"trace-id": "abc"}, extra, "the caller's map is not changed")

	stored, err := insp.GetTaskInfo(qname, info.ID)
	require.NoError(t, err)
	assert.Equal(t, asynq.TaskStateScheduled, stored.State)
	assert.Equal(t, "email:send", stored.Type)
	assert.Equal(t, `{"to":"a@example.com"}`, string(stored.Payload))
	assert.Equal(t, 5, stored.MaxRetry, "the job's budget of 4, and a spare for a worker's death")
	assert.Equal(t, "4", stored.Headers[queue.HeaderMaxRetry])
	assert.Equal(t, map[string]string{
		"trace-id":             "abc",
		queue.HeaderKey:        "tenant-42",
		queue.HeaderCost:       "3",
		queue.HeaderEnqueuedAt: "1772366400123456",
		queue.HeaderTimeout:    "1m30s",
		queue.HeaderDeadline:   strconv.FormatInt(deadline.UnixMicro(), 10),
		queue.HeaderRetention:  "2h0m0s",
		queue.HeaderMaxRetry:   "4",
	}, stored.Headers)

	m, err := queue.MetaOf(asynq.NewTaskWithHeaders(stored.Type, stored.Payload, stored.Headers))
	require.NoError(t, err)
	assert.Equal(t, "tenant-42", m.Key)
	assert.Equal(t, 3, m.Cost)
	assert.True(t, now.Truncate(time.Microsecond).Equal(m.EnqueuedAt), "EnqueuedAt %v", m.EnqueuedAt)
	assert.Equal(t, 90*time.Second, m.Timeout)
	assert.True(t, deadline.Equal(m.Deadline), "Deadline %v", m.Deadline)
	assert.Equal(t, 2*time.Hour, m.Retention)
}

func TestEnqueueMinimal(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	qname := queueName()
	c := queue.NewClient(asynq.NewClientFromRedisClient(rdb))

	before := time.Now()
	info, err := c.Enqueue(context.Background(), queue.Task{Type: "report:build"}, asynq.Queue(qname))
	require.NoError(t, err)
	stored, err := insp.GetTaskInfo(qname, info.ID)
	require.NoError(t, err)
	assert.Equal(t, asynq.TaskStatePending, stored.State)
	assert.Len(t, stored.Headers, 2, "only the enqueue time and the retry budget: %v", stored.Headers)
	assert.Equal(t, 26, stored.MaxRetry, "asynq's default of 25, and the spare")
	m, err := queue.MetaOf(asynq.NewTaskWithHeaders(stored.Type, stored.Payload, stored.Headers))
	require.NoError(t, err)
	assert.WithinDuration(t, before, m.EnqueuedAt, time.Minute)
	assert.Equal(t, queue.Meta{EnqueuedAt: m.EnqueuedAt, MaxRetry: 25, HasMaxRetry: true}, m)
}

func TestEnqueueInvalid(t *testing.T) {
	// A nil asynq client: an invalid task must be refused before any I/O.
	c := queue.NewClient(nil)
	_, err := c.Enqueue(context.Background(), queue.Task{Type: "x", Cost: -1})
	assert.True(t, errors.Is(err, queue.ErrInvalidTask), "got %v", err)
	_, err = c.Enqueue(context.Background(), queue.Task{Type: "x", Headers: map[string]string{queue.HeaderKey: "sneaky"}})
	assert.True(t, errors.Is(err, queue.ErrInvalidTask), "got %v", err)
}

func TestEnqueueTaskIDConflict(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	qname := queueName()
	c := queue.NewClient(asynq.NewClientFromRedisClient(rdb))
	task := queue.Task{Type: "x"}
	_, err := c.Enqueue(context.Background(), task, asynq.Queue(qname), asynq.TaskID("job-1"))
	require.NoError(t, err)
	_, err = c.Enqueue(context.Background(), task, asynq.Queue(qname), asynq.TaskID("job-1"))
	assert.True(t, errors.Is(err, asynq.ErrTaskIDConflict), "asynq's errors stay matchable: %v", err)
}
