package workers_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// rpoplpushCalls is how many RPOPLPUSH the server ran: one per asynq
// dequeue of a queue that is not paused, empty or not.
func rpoplpushCalls(t *testing.T, h *harness) int {
	t.Helper()
	info, err := h.rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_rpoplpush:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// A pool serves the 20 members of its queue's family, but a fetch does not
// ask each empty one in turn: with every job in one member, the dequeues
// the server runs are about one per job, not about ten.
func TestPoolFetchSkipsEmptyMembers(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	const jobs = 2000
	var ran atomic.Int64
	p.HandleFunc("noop", func(context.Context, *asynq.Task) error { ran.Add(1); return nil }, nil)
	for range jobs {
		h.enqueue(t, queue.Task{Type: "noop"})
	}
	before := rpoplpushCalls(t, h)
	start(t, p)
	waitFor(t, 30*time.Second, "every job to run", func() bool { return ran.Load() == jobs })
	calls := rpoplpushCalls(t, h) - before
	t.Logf("%d dequeues for %d jobs over %d queues", calls, jobs, len(queue.Family(h.queue)))
	assert.Less(t, calls, jobs*3/2, "dequeues per job")
}

// A member the pool took as empty is looked at again soon: a job another
// process enqueues there, into an idle pool, runs within a few
// TaskCheckIntervals.
func TestPoolSeesJobInEmptyMember(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	ran := make(chan time.Time, 1)
	p.HandleFunc("job", func(context.Context, *asynq.Task) error { ran <- time.Now(); return nil }, nil)
	start(t, p)
	time.Sleep(5 * cfg.TaskCheckInterval) // idle: every member found empty
	other := queue.NewClient(asynq.NewClientFromRedisClient(h.srv.Client(t)))
	enq := time.Now()
	_, err = other.Enqueue(context.Background(), queue.Task{Type: "job", Priority: 1}, asynq.Queue(h.queue))
	require.NoError(t, err)
	at := recv(t, ran, 5*time.Second, "the job")
	t.Logf("ran %v after its enqueue", at.Sub(enq))
	assert.Less(t, at.Sub(enq), 4*cfg.TaskCheckInterval+100*time.Millisecond)
}
