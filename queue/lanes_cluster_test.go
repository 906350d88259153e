package queue_test

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// On a Redis Cluster, the members of a family are in different slots (and
// nodes): the lanes' load is read over all of them in one pipeline, and a
// key behind another's backlog still gets a lane of its own.
func TestLanesCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	cc := c.Client(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(cc), queue.WithLanes(cc))
	ctx := context.Background()
	enq := func(key string, prio int) string {
		t.Helper()
		info, err := qc.Enqueue(ctx, queue.Task{Type: "t", Key: key, Priority: prio}, asynq.Queue("lanes"))
		require.NoError(t, err)
		return info.Queue
	}
	for range 10 {
		assert.Equal(t, "lanes:p5", enq("A", 5), "A alone: lane 0")
	}
	b := enq("B", 5)
	_, p, lane, ok := queue.ParseMember(b)
	require.True(t, ok, b)
	assert.Equal(t, 5, p)
	assert.NotZero(t, lane, "B is not behind A's backlog in lane 0")
	assert.Equal(t, queue.Member("lanes", 1, lane), enq("B", 1), "B's lane at another priority")
}
