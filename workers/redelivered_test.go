package workers_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/workers"
)

// A job asynq hands over again after it was sent back (here: its handler
// made the copy a send-back makes, then failed, as a worker killed between
// the two would leave it) runs no more: its copy carries it. A job handed
// over again without a copy runs again, as asynq's retry promises.
func TestRedeliveredJobWhoseCopyExistsRunsNoMore(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.RetryDelay = func(int, error, *asynq.Task) time.Duration { return 0 }
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	runs := make(map[string]int)
	p.HandleFunc("flaky", func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		mu.Lock()
		runs[string(task.Payload())]++
		first := runs[string(task.Payload())] == 1
		mu.Unlock()
		if !first {
			return nil
		}
		if string(task.Payload()) == "copied" {
			m, err := queue.MetaOf(task)
			require.NoError(t, err)
			_, err = asynq.NewClientFromRedisClient(h.rdb).Enqueue(asynq.NewTask("flaky", task.Payload()),
				asynq.Queue(h.queue), asynq.TaskID(m.CopyID(id)), asynq.ProcessIn(time.Hour))
			require.NoError(t, err)
		}
		return errors.New("lost before asynq heard it was done")
	}, &workers.Policy{Name: "paced", Limit: pace})
	start(t, p)

	copied := h.enqueue(t, queue.Task{Type: "flaky", Payload: []byte("copied")}, asynq.Retention(time.Minute))
	plain := h.enqueue(t, queue.Task{Type: "flaky", Payload: []byte("plain")}, asynq.Retention(time.Minute))
	info := h.waitState(t, copied, asynq.TaskStateCompleted, 15*time.Second)
	assert.Equal(t, 1, info.Retried, "handed over again once")
	h.waitState(t, plain, asynq.TaskStateCompleted, 15*time.Second)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, runs["copied"], "the job whose copy exists ran once")
	assert.Equal(t, 2, runs["plain"], "the job without a copy ran again")
	h.waitState(t, copied+"~1", asynq.TaskStateScheduled, time.Second)
}
