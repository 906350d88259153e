package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
)

// Depths sums a queue's family: pending in each priority's member,
// scheduled, retry and archived, by priority.
func TestDepths(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	qc := queue.NewClient(h.ac)
	for _, p := range []int{1, 1, 3, 5} {
		_, err := qc.Enqueue(ctx, queue.Task{Type: "t", Priority: p}, asynq.Queue(h.queue))
		require.NoError(t, err)
	}
	_, err := qc.Enqueue(ctx, queue.Task{Type: "t", Priority: 2}, asynq.Queue(h.queue), asynq.ProcessIn(time.Hour))
	require.NoError(t, err)
	// A task in the archive: enqueued, then archived by the inspector.
	info, err := qc.Enqueue(ctx, queue.Task{Type: "t", Priority: 5, Payload: []byte("x")}, asynq.Queue(h.queue))
	require.NoError(t, err)
	require.NoError(t, h.insp.ArchiveTask(info.Queue, info.ID))

	ds, errs := queue.Depths(ctx, h.rdb, []string{h.queue, "nothing-here"})
	require.Empty(t, errs)
	require.Len(t, ds, 2)
	d := ds[0]
	assert.Equal(t, h.queue, d.Name)
	assert.Equal(t, 4, d.Pending)
	assert.Equal(t, 1, d.Scheduled)
	assert.Equal(t, 0, d.Retry)
	assert.Equal(t, 1, d.Archived)
	assert.Equal(t, 5, d.Queued())
	assert.Equal(t, [5]int{2, 1, 1, 0, 1}, d.ByPriority)
	assert.Equal(t, queue.Depth{Name: "nothing-here"}, ds[1])

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ds, errs = queue.Depths(cctx, h.rdb, []string{h.queue})
	assert.Empty(t, ds)
	assert.Len(t, errs, 1)
}
