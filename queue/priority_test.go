package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
)

// TestEnqueuePriority: a task's Priority goes into its header and picks the
// member of its queue; a task without one goes to the queue itself, as
// before priorities.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac)
	ctx := context.Background()
	for i, p := range []int{0, 1, 2, 3, 4, 5} {
		info, err := c.Enqueue(ctx, queue.Task{Type: "t", Priority: p}, asynq.Queue(h.queue))
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, queue.Member(h.queue, p, 0), info.Queue, "step %d", i)
		stored, err := h.insp.GetTaskInfo(info.Queue, info.ID)
		require.NoError(t, err, "step %d", i)
		m, err := queue.MetaOf(asynq.NewTaskWithHeaders(stored.Type, nil, stored.Headers))
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, p, m.Priority, "step %d", i)
		want := p
		if p == 0 {
			want = queue.DefaultPriority
		}
		assert.Equal(t, want, m.PriorityOr(), "step %d", i)
	}
}

// TestRequeueKeepsPriority: a job sent back goes to the member it came
// from, with its priority header, however many times.
func TestRequeueKeepsPriority(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac, queue.WithLanes(h.rdb))
	member := queue.Member(h.queue, 1, 0)
	type seen struct {
		queue string
		meta  queue.Meta
	}
	runs := make(chan seen, 4)
	srv := asynq.NewServerFromRedisClient(h.rdb, asynq.Config{
		Concurrency: 1, Queues: queueWeights(queue.Family(h.queue)),
		TaskCheckInterval: 50 * time.Millisecond, DelayedTaskCheckInterval: 100 * time.Millisecond,
		LogLevel: asynq.ErrorLevel,
	})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		q, _ := asynq.GetQueueName(ctx)
		m, _ := queue.MetaOf(task)
		runs <- seen{q, m}
		if m.Requeues < 2 {
			_, err := c.Requeue(ctx, task, 0, time.Time{})
			return err
		}
		return nil
	})))
	t.Cleanup(srv.Shutdown)
	_, err := c.Enqueue(context.Background(), queue.Task{Type: "t", Priority: 1}, asynq.Queue(h.queue))
	require.NoError(t, err)
	for i := range 3 {
		r := recv(t, runs, 10*time.Second, "run "+strconv.Itoa(i))
		assert.Equal(t, member, r.queue, "run %d", i)
		assert.Equal(t, 1, r.meta.Priority, "run %d", i)
		assert.Equal(t, i, r.meta.Requeues, "run %d", i)
	}
}

func queueWeights(names []string) map[string]int {
	out := make(map[string]int, len(names))
	for _, n := range names {
		out[n] = 1
	}
	return out
}

// TestEnqueueBadPriority: a priority out of range, or a queue named like a
// member of another's family, is refused with ErrInvalidTask and nothing is
// sent.
func TestEnqueueBadPriority(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac)
	for _, p := range []int{-1, 6, 100} {
		_, err := c.Enqueue(context.Background(), queue.Task{Type: "t", Priority: p}, asynq.Queue(h.queue))
		require.ErrorIs(t, err, queue.ErrInvalidTask, "priority %d", p)
		assert.Contains(t, err.Error(), "priority "+strconv.Itoa(p)+" is out of range [1, 5]")
	}
	_, err := c.Enqueue(context.Background(), queue.Task{Type: "t"}, asynq.Queue(h.queue+":p1"))
	require.ErrorIs(t, err, queue.ErrInvalidTask)
	assert.Contains(t, err.Error(), "set Task.Priority")
	qs, err := h.insp.Queues()
	require.NoError(t, err)
	assert.Empty(t, qs, "nothing was sent")
}

// TestLanes: with WithLanes, a key is given the least-loaded lane of its
// queue when first seen and keeps it, at every priority; a second client
// (another process) reads the same lane; a task without a key stays in lane 0.
func TestLanes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	c := queue.NewClient(h.ac, queue.WithLanes(h.rdb))
	enq := func(c *queue.Client, key string, p int) string {
		t.Helper()
		info, err := c.Enqueue(ctx, queue.Task{Type: "t", Key: key, Priority: p}, asynq.Queue(h.queue))
		require.NoError(t, err)
		return info.Queue
	}
	// Tenant A first: every lane is empty, A gets one, and its backlog loads it.
	laneOf := func(q string) int { _, _, lane, _ := queue.ParseMember(q); return lane }
	a := laneOf(enq(c, "A", 0))
	for range 20 {
		assert.Equal(t, queue.Member(h.queue, 3, a), enq(c, "A", 0), "A keeps its lane")
	}
	// B is new: it gets an empty lane, the same at every priority.
	b := laneOf(enq(c, "B", 0))
	assert.NotEqual(t, a, b, "B is not behind A's backlog")
	assert.Equal(t, queue.Member(h.queue, 1, b), enq(c, "B", 1), "the same lane at another priority")
	// Another client, with an empty cache, reads B's lane from Redis, and
	// gives C, new, a lane that neither A nor B has.
	other := queue.NewClient(h.ac, queue.WithLanes(h.rdb))
	assert.Equal(t, queue.Member(h.queue, 5, b), enq(other, "B", 5))
	cl := laneOf(enq(other, "C", 0))
	assert.NotContains(t, []int{a, b}, cl, "C's lane")
	assert.Equal(t, h.queue, enq(other, "", 0), "no key: lane 0 of the default priority, the queue itself")
	// The lanes are kept with a TTL: nothing grows without bound.
	ttl, err := h.rdb.PTTL(ctx, "sluice:lane:{"+h.queue+"}:B").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 23*time.Hour)
	// Without WithLanes, a key has no lane.
	plain := queue.NewClient(h.ac)
	assert.Equal(t, h.queue, enq(plain, "B", 0))
}

// TestLanesSpreadNewKeys: a key alone on empty lanes takes lane 0 (where
// it went before lanes); keys first seen together behind a backlog in lane
// 0 are spread over the free lanes by a hash, not all given lane 1.
func TestLanesSpreadNewKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := queue.NewClient(h.ac, queue.WithLanes(h.rdb))
	first, err := c.Enqueue(context.Background(), queue.Task{Type: "t", Key: "first"}, asynq.Queue(h.queue))
	require.NoError(t, err)
	assert.Equal(t, h.queue, first.Queue, "alone on empty lanes: lane 0")
	lanes := map[string]bool{}
	for i := range 16 {
		q, err := c.Enqueue(context.Background(), queue.Task{Type: "t", Key: "k" + strconv.Itoa(i)}, asynq.Queue(h.queue), asynq.ProcessIn(time.Hour))
		require.NoError(t, err)
		lanes[q.Queue] = true
		// Scheduled jobs count as load too: remove it, so that every key
		// finds the free lanes empty, as keys enqueued at once do.
		require.NoError(t, h.insp.DeleteTask(q.Queue, q.ID))
	}
	assert.NotContains(t, lanes, h.queue, "lane 0 holds a backlog")
	assert.Greater(t, len(lanes), 1, "16 new keys on free lanes all went to one lane: %v", lanes)
}
