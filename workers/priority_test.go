package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

// prioJob is a task of type typ whose payload names it, with a priority header.
func prioJob(typ, tenant string, i, priority int) *asynq.Task {
	b, _ := json.Marshal(map[string]any{"tenant": tenant, "n": i, "priority": priority})
	return asynq.NewTaskWithHeaders(typ, b, map[string]string{queue.HeaderPriority: strconv.Itoa(priority)})
}

// ranJob is what a test's handler saw of one run.
type ranJob struct {
	Tenant   string
	N        int
	Priority int
	at       time.Time
}

func (r ranJob) id() string { return fmt.Sprintf("%s/%d/%d", r.Tenant, r.Priority, r.N) }

// Priorities on a plain limit (no key, no global): 8 jobs of priority 1
// queued behind 60 of priority 5 run among the first of them, at the
// bucket's 95 %, instead of after the backlog. Without Priorities they run
// last: the backlog books its turns far ahead (tickets) and they queue
// behind every one.
func TestPoolPriorityPlain(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("priorities=", on), func(t *testing.T) {
			h := newHarness(t)
			p, err := workers.NewPool(h.config(t))
			require.NoError(t, err)
			ran := make(chan ranJob, 100)
			p.HandleFunc("send", func(ctx context.Context, task *asynq.Task) error {
				var r ranJob
				require.NoError(t, json.Unmarshal(task.Payload(), &r))
				ran <- r
				return nil
			}, &workers.Policy{Name: "send", Limit: throttle.Limit{Rate: 20, Burst: 1}, Priorities: on})
			start(t, p)
			for i := range 60 {
				h.enqueueRaw(t, prioJob("send", "", i, 5), asynq.MaxRetry(0))
			}
			for i := range 8 {
				h.enqueueRaw(t, prioJob("send", "", i, 1), asynq.MaxRetry(0))
			}
			seen := map[string]bool{}
			last1 := 0
			for i := range 68 {
				r := recv(t, ran, 30*time.Second, "a job")
				assert.False(t, seen[r.id()], "%s ran twice", r.id())
				seen[r.id()] = true
				if r.Priority == 1 {
					last1 = i
				}
			}
			t.Logf("priority 1's last job ran %d of 68; requeued %d", last1+1, p.Stats().Requeued)
			if on {
				assert.Less(t, last1, 30, "priority 1 ran ahead of the backlog")
				assert.Positive(t, p.Stats().Requeued, "priority 5's jobs over their level's share went back")
			} else {
				assert.GreaterOrEqual(t, last1, 60, "without priorities, behind the backlog")
			}
			assert.Zero(t, p.Stats().Archived)
		})
	}
}

// Priorities with every other option on: a key per tenant, a global bucket
// shared fairly (weights), adaptive to the upstream, a 429 that cools the
// global bucket down, and the policy changed at runtime (SetPolicy, as
// `sluice set` does). Tenant a's 40 jobs of priority 5 are queued first,
// then 8 of priority 1 (6 of b, 2 of a); one of b's is answered 429 once.
// The priority-1 jobs all run among the first of the 48, nothing runs
// inside the cooldown, every job runs once and none is archived.
func TestPoolPriorityWithEveryOption(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	key, err := workers.KeyTemplate("tenant:{payload.tenant}")
	require.NoError(t, err)
	policy := func(global float64) workers.Policy {
		return workers.Policy{Name: "api", Key: key, Limit: throttle.Limit{Rate: 1000, Burst: 100},
			Global: throttle.Limit{Rate: global, Burst: 1}, Fair: true, Weights: map[string]int{"tenant:b": 2},
			Adapt: true, Priorities: true, PriorityFloor: 0.1}
	}
	pol := policy(20)
	const retryAfter = time.Second
	var mu sync.Mutex
	var cooled time.Time
	ran := make(chan ranJob, 100)
	p.HandleFunc("api", func(ctx context.Context, task *asynq.Task) error {
		var r ranJob
		require.NoError(t, json.Unmarshal(task.Payload(), &r))
		r.at = time.Now()
		m, _ := queue.MetaOf(task)
		if r.Tenant == "b" && r.N == 0 && m.Requeues == 0 {
			mu.Lock()
			cooled = r.at
			mu.Unlock()
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: retryAfter}
		}
		ran <- r
		return nil
	}, &pol)
	start(t, p)

	for i := range 40 {
		h.enqueueRaw(t, prioJob("api", "a", i, 5), asynq.MaxRetry(0))
	}
	for i := range 6 {
		h.enqueueRaw(t, prioJob("api", "b", i, 1), asynq.MaxRetry(0))
	}
	for i := range 2 {
		h.enqueueRaw(t, prioJob("api", "a", i, 1), asynq.MaxRetry(0))
	}
	seen := map[string]bool{}
	var order []ranJob
	for i := range 48 {
		r := recv(t, ran, 30*time.Second, "a job")
		assert.False(t, seen[r.id()], "%s ran twice", r.id())
		seen[r.id()] = true
		order = append(order, r)
		if i == 20 { // at runtime, the global rate doubled
			require.NoError(t, p.SetPolicy("api", policy(40)))
		}
	}
	last1, sum1, n1 := 0, 0, 0
	for i, r := range order {
		// b's job 0, refused by the upstream, comes back after the
		// cooldown, however far the backlog is by then.
		if r.Priority == 1 && r.id() != "b/1/0" {
			last1, sum1, n1 = i, sum1+i, n1+1
		}
	}
	mu.Lock()
	c := cooled
	mu.Unlock()
	require.False(t, c.IsZero(), "the upstream refused once")
	for _, r := range order {
		// A turn granted before the 429 may start just after it (later
		// on a loaded machine under the race detector).
		inside := r.at.After(c.Add(250*time.Millisecond)) && r.at.Before(c.Add(retryAfter))
		assert.False(t, inside, "%s ran %v after the 429, inside the cooldown", r.id(), r.at.Sub(c))
	}
	st := p.Stats()
	t.Logf("priority 1's jobs (but the one refused) ran %.1fth on average, the last %dth of 48; requeued %d, cooldowns %d",
		float64(sum1)/float64(n1)+1, last1+1, st.Requeued, st.Cooldowns)
	// Queued last, they would run 41st to 48th first come, first served.
	// Through the cooldown the backlog books no further than its horizon
	// past its end (throttle's TestPriorityCooldown), so they run soon after.
	assert.Less(t, float64(sum1)/float64(n1), 20.0, "priority 1 ran ahead of the priority-5 backlog")
	assert.Less(t, last1, 30, "priority 1 ran ahead of the priority-5 backlog")
	assert.Equal(t, int64(1), st.Cooldowns)
	assert.Zero(t, st.Archived)
	select {
	case extra := <-ran:
		t.Fatalf("%s ran twice", extra.id())
	case <-time.After(300 * time.Millisecond):
	}
}
