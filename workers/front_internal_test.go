package workers

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/asynqtest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// A job that comes back at its turn goes to the front of its queue, ahead of
// the jobs already pending (asynq's RunTask would put it behind them), and
// asynq's inspector and dequeue see it as any pending task. It relies on
// asynq's key layout: this test fails if an asynq upgrade changes it.
func TestFrontMovesAScheduledTaskAheadOfThePending(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	qname := asynqtest.QueueName()
	ac := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, id := range []string{"a", "b"} {
		_, err := ac.Enqueue(asynq.NewTask("job", nil), asynq.Queue(qname), asynq.TaskID(id))
		require.NoError(t, err)
	}
	_, err := ac.Enqueue(asynq.NewTask("job", nil), asynq.Queue(qname), asynq.TaskID("back"), asynq.ProcessIn(time.Hour))
	require.NoError(t, err)

	moved, err := front(ctx, rdb, qname, "back")
	require.NoError(t, err)
	assert.True(t, moved)
	info, err := insp.GetTaskInfo(qname, "back")
	require.NoError(t, err)
	assert.Equal(t, asynq.TaskStatePending, info.State)
	// asynq pops the right end of the pending list: "back" goes first.
	ids, err := rdb.LRange(ctx, "asynq:{"+qname+"}:pending", 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "a", "back"}, ids)
	qi, err := insp.GetQueueInfo(qname)
	require.NoError(t, err)
	assert.Equal(t, 3, qi.Pending)
	assert.Equal(t, 0, qi.Scheduled)

	// Not scheduled any more (or never): nothing to do.
	for _, id := range []string{"back", "a", "none"} {
		moved, err = front(ctx, rdb, qname, id)
		require.NoError(t, err)
		assert.False(t, moved, id)
	}

	// The first asynq server to ask takes it first.
	got := make(chan string, 3)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{qname: 1}, LogLevel: asynq.ErrorLevel})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		got <- id
		return nil
	})))
	defer srv.Shutdown()
	assert.Equal(t, "back", asynqtest.Recv(t, got, 10*time.Second, "the first job"))
}
