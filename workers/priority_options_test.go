package workers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// Priorities and lanes with the other options on: a key per tenant (from the
// sluice-key header), a global bucket shared fairly, an adaptive upstream
// bucket, a cooldown (an upstream 429 on one job), and a runtime change of
// the policy (SetPolicy, as `sluice set` does) in the middle. Tenant a has a
// backlog at priority 5, tenant b urgent jobs at priority 1 and some at 3.
// Every job runs once, in the member of its queue for its priority and its
// tenant's lane, whatever sent it back meanwhile (its share, the cooldown,
// the change of policy); b's priority-1 jobs are not behind a's backlog.
func TestPoolLanesWithEveryOption(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	key, err := workers.KeyTemplate("tenant:{header.sluice-key}")
	require.NoError(t, err)
	policy := func(global float64) workers.Policy {
		return workers.Policy{Name: "api", Limit: throttle.Limit{Rate: 1000, Burst: 100}, Key: key,
			Global: throttle.Limit{Rate: global, Burst: 2}, Fair: true, Adapt: true}
	}
	pol := policy(40)

	type run struct {
		id, queue string
		prio      int
	}
	var (
		mu      sync.Mutex
		runs    []run
		refused bool
	)
	done := make(chan struct{}, 400)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		q, _ := asynq.GetQueueName(ctx)
		mu.Lock()
		if !refused && m.Key == "a" && len(runs) > 20 {
			refused = true // one 429: the global bucket cools down, the job goes back
			mu.Unlock()
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: 300 * time.Millisecond}
		}
		runs = append(runs, run{string(task.Payload()), q, m.PriorityOr()})
		mu.Unlock()
		done <- struct{}{}
		return nil
	}, &pol)

	qc := queue.NewClient(asynq.NewClientFromRedisClient(h.rdb), queue.WithLanes(h.rdb))
	enq := func(tenant string, prio, i int) {
		_, err := qc.Enqueue(context.Background(), queue.Task{Type: "job", Key: tenant, Priority: prio,
			Payload: []byte(fmt.Sprintf("%s-%d-%d", tenant, prio, i))}, asynq.Queue(h.queue), asynq.MaxRetry(0))
		require.NoError(t, err)
	}
	const backlog, urgent, normal = 200, 20, 10
	for i := range backlog {
		enq("a", 5, i)
	}
	start(t, p)
	for range 20 {
		recv(t, done, 10*time.Second, "a job of a's backlog")
	}
	for i := range urgent {
		enq("b", 1, i)
	}
	for i := range normal {
		enq("b", 3, i)
	}
	// A runtime change of the limit while both tenants have work.
	for range 10 {
		recv(t, done, 10*time.Second, "a job")
	}
	fresh := policy(60)
	require.NoError(t, p.SetPolicy("api", fresh))
	for range backlog + urgent + normal - 30 {
		recv(t, done, 30*time.Second, "a job")
	}

	mu.Lock()
	defer mu.Unlock()
	assert.True(t, refused, "the upstream refused one job")
	seen := map[string]int{}
	lastUrgent, laneA, laneB := 0, -1, -1
	for i, r := range runs {
		seen[r.id]++
		base, prio, lane, _ := queue.ParseMember(r.queue)
		assert.Equal(t, h.queue, base, r.id)
		assert.Equal(t, r.prio, prio, "%s ran from %s", r.id, r.queue)
		tenant := r.id[:1]
		lanes := map[string]*int{"a": &laneA, "b": &laneB}
		if *lanes[tenant] < 0 {
			*lanes[tenant] = lane
		}
		assert.Equal(t, *lanes[tenant], lane, "%s ran from %s: its tenant's lane", r.id, r.queue)
		if r.prio == 1 {
			lastUrgent = i
		}
	}
	assert.NotEqual(t, laneA, laneB, "the tenants have lanes of their own")
	for id, n := range seen {
		assert.Equal(t, 1, n, "%s ran %d times", id, n)
	}
	assert.Len(t, seen, backlog+urgent+normal, "every job ran")
	t.Logf("b's last priority-1 job ran %d of %d; requeued %d", lastUrgent+1, len(runs), p.Stats().Requeued)
	assert.Less(t, lastUrgent, 30+urgent*4, "b's priority-1 jobs ran at b's share, not after a's backlog")
	assert.Zero(t, h.archivedAll(t), "archived")
}

// archivedAll counts the archived tasks over h's queue's family.
func (h *harness) archivedAll(t *testing.T) int {
	t.Helper()
	n := 0
	qs, err := h.insp.Queues()
	require.NoError(t, err)
	for _, q := range queue.Family(h.queue) {
		for _, known := range qs {
			if known == q {
				info, err := h.insp.GetQueueInfo(q)
				require.NoError(t, err)
				n += info.Archived
			}
		}
	}
	return n
}
