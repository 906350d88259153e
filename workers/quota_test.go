package workers_test

import (
	"context"
	"encoding/json"
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

// zoneWithMidnightIn is a fixed zone whose next local midnight is about d
// from now, on a whole second: a day the test can wait out.
func zoneWithMidnightIn(d time.Duration) (*time.Location, time.Time) {
	m := time.Now().Add(d).Truncate(time.Second).UTC()
	sec := m.Hour()*3600 + m.Minute()*60 + m.Second()
	return time.FixedZone("test", -sec), m
}

// runLog records when each task id ran.
type runLog struct {
	mu   sync.Mutex
	runs map[string][]time.Time // by the id of the task as first enqueued (queue.Meta.Origin)
}

func (l *runLog) handler(ctx context.Context, task *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	if m, err := queue.MetaOf(task); err == nil && m.Origin != "" {
		id = m.Origin
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id] = append(l.runs[id], time.Now())
	return nil
}

func (l *runLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// Jobs over a daily quota are parked until the zone's midnight: sent back
// once each, due after it, listed as parked, never archived although the
// horizon is far shorter than the wait; after midnight each runs once.
func TestPoolParksOverQuota(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Horizon = time.Second
	cfg.MaxWait = 200 * time.Millisecond
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	zone, midnight := zoneWithMidnightIn(4 * time.Second)
	daily := throttle.FixedWindow{Max: 3, Calendar: "day", Zone: zone}
	log := &runLog{runs: make(map[string][]time.Time)}
	p.HandleFunc("q", log.handler, &workers.Policy{Name: "q", Limit: daily,
		Limits: []workers.NamedLimit{{Name: "second", Limit: throttle.FixedWindow{Max: 10, Window: time.Second}}}})
	start(t, p)

	var ids []string
	for range 5 {
		ids = append(ids, h.enqueue(t, queue.Task{Type: "q"}, asynq.MaxRetry(0)))
	}
	waitFor(t, 3*time.Second, "3 runs and 2 parked", func() bool {
		n, _, err := p.Parked(context.Background(), "q")
		return err == nil && n == 2 && log.count() == 3
	})
	n, until, err := p.Parked(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.True(t, until.Equal(midnight), "parked until the zone's midnight %v, not %v", midnight, until)
	scheduled, err := h.insp.ListScheduledTasks(h.queue)
	require.NoError(t, err)
	require.Len(t, scheduled, 2)
	for _, s := range scheduled {
		assert.False(t, s.NextProcessAt.Before(midnight), "due at the reset, not before")
		assert.True(t, s.NextProcessAt.Before(midnight.Add(3*time.Second)), "within the first seconds after it")
		m, err := queue.MetaOf(asynq.NewTaskWithHeaders(s.Type, s.Payload, s.Headers))
		require.NoError(t, err)
		assert.True(t, m.ParkedUntil.Equal(midnight))
		assert.Equal(t, 1, m.Parks)
	}

	waitFor(t, time.Until(midnight)+5*time.Second, "every job run after midnight", func() bool { return log.count() == 5 })
	log.mu.Lock()
	after := 0
	for id, runs := range log.runs {
		assert.Len(t, runs, 1, "job %s ran once", id)
		if !runs[0].Before(midnight) {
			after++
		}
	}
	log.mu.Unlock()
	assert.Equal(t, 2, after, "the parked jobs ran after midnight")
	assert.Equal(t, int64(0), p.Stats().Archived, "none archived by the 1s horizon")
	assert.Equal(t, int64(2), p.Stats().Requeued, "each parked once")
	n, _, err = p.Parked(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, 0, n, "none parked any more")
	for _, id := range ids {
		_, err := h.insp.GetTaskInfo(h.queue, id)
		if err == nil {
			info, _ := h.insp.GetTaskInfo(h.queue, id)
			assert.NotEqual(t, asynq.TaskStateArchived, info.State, id)
		}
	}
}

// A raised quota brings the parked jobs back within 2 s, long before the
// reset; those the raise has no room for are parked again, once.
func TestPoolQuotaRaiseUnparks(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	zone, _ := zoneWithMidnightIn(time.Hour)
	daily := throttle.FixedWindow{Max: 2, Calendar: "day", Zone: zone}
	log := &runLog{runs: make(map[string][]time.Time)}
	pol := workers.Policy{Name: "q", Limit: daily}
	p.HandleFunc("q", log.handler, &pol)
	start(t, p)
	for range 6 {
		h.enqueue(t, queue.Task{Type: "q"})
	}
	waitFor(t, 3*time.Second, "2 runs and 4 parked", func() bool {
		n, _, err := p.Parked(context.Background(), "q")
		return err == nil && n == 4 && log.count() == 2
	})
	raised := pol
	raised.Limit = throttle.FixedWindow{Max: 5, Calendar: "day", Zone: zone}
	at := time.Now()
	require.NoError(t, p.SetPolicy("q", raised))
	waitFor(t, 3*time.Second, "3 more runs", func() bool { return log.count() == 5 })
	assert.Less(t, time.Since(at), 2500*time.Millisecond, "the parked jobs came back within about 2 s of the raise")
	waitFor(t, 3*time.Second, "the last one parked again", func() bool {
		s, err := h.insp.ListScheduledTasks(h.queue)
		if err != nil || len(s) != 1 {
			return false
		}
		m, _ := queue.MetaOf(asynq.NewTaskWithHeaders(s[0].Type, s[0].Payload, s[0].Headers))
		return m.Parks == 2
	})
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 5, log.count(), "no room for the sixth until the reset")
	assert.Equal(t, int64(0), p.Stats().Archived)
}

// A calendar quota with the other options on: a key per tenant, a global
// bucket shared fairly and adaptive, a per-second limit beside the quota,
// an upstream 429 that cools the global bucket down, and a raise set at
// runtime (SetPolicy, as sluice set does). Each tenant's quota is its own;
// a tenant over it is parked until midnight while another runs; the 429's
// job comes back after the cooldown; the raise brings one parked job back at
// once and parks the other again; after midnight it runs. None archived.
func TestPoolQuotaWithEveryOption(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Horizon = 2 * time.Second
	p, err := workers.NewPool(cfg)
	require.NoError(t, err)
	zone, midnight := zoneWithMidnightIn(7 * time.Second)
	key, err := workers.KeyTemplate("tenant:{payload.tenant}")
	require.NoError(t, err)
	policy := func(perDay int) workers.Policy {
		return workers.Policy{Name: "api", Key: key, Fair: true, Adapt: true,
			Global: throttle.Limit{Rate: 100, Period: time.Second, Burst: 100},
			Limits: []workers.NamedLimit{
				{Name: "second", Limit: throttle.FixedWindow{Max: 10, Window: time.Second}},
				{Name: "day", Limit: throttle.FixedWindow{Max: perDay, Calendar: "day", Zone: zone}},
			}}
	}
	pol := policy(2)
	type run struct {
		tenant, id string
		at         time.Time
	}
	ran := make(chan run, 32)
	var refused sync.Once
	p.HandleFunc("api", func(ctx context.Context, task *asynq.Task) error {
		var in struct{ Tenant, ID string }
		require.NoError(t, json.Unmarshal(task.Payload(), &in))
		if in.ID == "b1" {
			hit := false
			refused.Do(func() { hit = true })
			if hit {
				return &workers.UpstreamError{StatusCode: 429, RetryAfter: time.Second}
			}
		}
		ran <- run{in.Tenant, in.ID, time.Now()}
		return nil
	}, &pol)
	start(t, p)
	job := func(tenant, id string) []byte {
		b, _ := json.Marshal(map[string]string{"tenant": tenant, "id": id})
		return b
	}
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		h.enqueue(t, queue.Task{Type: "api", Payload: job("a", id)}, asynq.MaxRetry(0))
	}
	got := map[string]time.Time{}
	for range 2 {
		r := recv(t, ran, 5*time.Second, "tenant a's quota")
		got[r.id] = r.at
	}
	waitFor(t, 3*time.Second, "2 of tenant a parked", func() bool {
		n, _, err := p.Parked(context.Background(), "api")
		return err == nil && n == 2
	})
	// tenant b has a quota of its own; its 429 cools the global bucket down
	h.enqueue(t, queue.Task{Type: "api", Payload: job("b", "b1")}, asynq.MaxRetry(0))
	cooled := time.Now()
	r := recv(t, ran, 5*time.Second, "tenant b's job after the cooldown")
	assert.Equal(t, "b1", r.id)
	assert.GreaterOrEqual(t, r.at.Sub(cooled), 900*time.Millisecond, "after the 1 s cooldown")
	assert.True(t, r.at.Before(midnight), "b's own quota had room: not parked")

	// raised at runtime: one parked job of a runs now, the other is parked again
	raised := policy(3)
	set := time.Now()
	require.NoError(t, p.SetPolicy("api", raised))
	r = recv(t, ran, 3*time.Second, "a parked job after the raise")
	assert.Equal(t, "a", r.tenant)
	assert.Less(t, r.at.Sub(set), 2500*time.Millisecond)
	got[r.id] = r.at
	r = recv(t, ran, time.Until(midnight)+5*time.Second, "the last one after midnight")
	assert.Equal(t, "a", r.tenant)
	assert.False(t, r.at.Before(midnight), "after midnight")
	got[r.id] = r.at
	assert.Len(t, got, 4, "each of a's jobs ran once")
	select {
	case extra := <-ran:
		t.Fatalf("a job ran twice: %+v", extra)
	case <-time.After(300 * time.Millisecond):
	}
	assert.Equal(t, int64(0), p.Stats().Archived, "none archived by the 2 s horizon")
}
