package workers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// An upstream 429 with Retry-After puts the bucket in cooldown for every
// host: two pools (two hosts) share the queue and the limiter's Redis, a
// third limiter of its own sees the bucket closed, and neither the refused job
// nor a newer one runs again before the cooldown is over. The refused job is
// not a failure and spends no retry.
func TestPoolUpstreamCooldownPausesTheFleet(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 10, Period: time.Second, Burst: 1}
	const retryAfter = 2 * time.Second

	type call struct {
		payload  string
		at       time.Time
		requeues int
	}
	calls := make(chan call, 8)
	handler := func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		calls <- call{string(task.Payload()), time.Now(), m.Requeues}
		if string(task.Payload()) == "refused" && m.Requeues == 0 {
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: retryAfter}
		}
		return nil
	}
	var pools []*workers.Pool
	for range 2 {
		p, err := workers.NewPool(h.config(t))
		require.NoError(t, err)
		p.HandleFunc("call", handler, &workers.Policy{Name: "api", Limit: limit})
		start(t, p)
		pools = append(pools, p)
	}
	stats := func() (s workers.Stats) {
		for _, p := range pools {
			st := p.Stats()
			s.Processed += st.Processed
			s.Failed += st.Failed
			s.Requeued += st.Requeued
			s.Cooldowns += st.Cooldowns
			s.Archived += st.Archived
		}
		return s
	}

	h.enqueue(t, queue.Task{Type: "call", Payload: []byte("refused")}, asynq.MaxRetry(0))
	refused := recv(t, calls, 10*time.Second, "the refused call")
	require.Equal(t, "refused", refused.payload)
	waitFor(t, 5*time.Second, "the cooldown", func() bool { return stats().Cooldowns == 1 })

	// Another host's limiter on the same Redis is refused until the cooldown ends.
	other := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
	asked := time.Now()
	res, err := other.TryAcquire(context.Background(), "api", limit, 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "the bucket is in cooldown")
	assert.GreaterOrEqual(t, res.RetryAfter, refused.at.Add(retryAfter).Sub(asked)-time.Millisecond)

	h.enqueue(t, queue.Task{Type: "call", Payload: []byte("newer")}, asynq.MaxRetry(0))
	for range 2 {
		c := recv(t, calls, 10*time.Second, "the calls after the cooldown")
		assert.GreaterOrEqual(t, c.at.Sub(refused.at), retryAfter, "%s ran during the cooldown", c.payload)
		if c.payload == "refused" {
			assert.Equal(t, 1, c.requeues, "the refused job went back once")
		}
	}

	waitFor(t, 5*time.Second, "both jobs to be done", func() bool { return stats().Processed == 2 })
	st := stats()
	assert.Equal(t, int64(1), st.Requeued)
	assert.Equal(t, int64(0), st.Failed)
	assert.Equal(t, int64(0), st.Archived)
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)
}

// A handler's queue.ThrottledError sends the job back for its RetryAfter,
// with no ticket and no retry spent, even with MaxRetry 0.
func TestPoolHandlerThrottled(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	type call struct {
		at   time.Time
		meta queue.Meta
	}
	calls := make(chan call, 4)
	p.HandleFunc("later", func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		calls <- call{time.Now(), m}
		if m.Requeues == 0 {
			return queue.Throttled(1500*time.Millisecond, "not yet")
		}
		return nil
	}, nil)
	start(t, p)

	h.enqueue(t, queue.Task{Type: "later"}, asynq.MaxRetry(0))
	first := recv(t, calls, 10*time.Second, "the first run")
	second := recv(t, calls, 10*time.Second, "the second run")
	// asynq keeps due times in whole seconds: up to a second early.
	assert.GreaterOrEqual(t, second.at.Sub(first.at), 500*time.Millisecond)
	assert.Equal(t, 1, second.meta.Requeues)
	assert.Empty(t, second.meta.Ticket, "no ticket")
	waitFor(t, 5*time.Second, "the job to be done", func() bool { return p.Stats().Processed == 1 })
	q := h.queueInfo(t)
	assert.Equal(t, 0, q.Archived)
	assert.Equal(t, 0, q.Retry)
}

// A job holding a ticket booked before a cooldown began does not run inside
// the cooldown: it gives its turn up and comes back after the cooldown to take
// a new one, not counted as a failure.
func TestPoolTicketHeedsCooldown(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 10, Period: time.Second, Burst: 1}
	const cooldown = 2 * time.Second

	ran := make(chan time.Time, 4)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		ran <- time.Now()
		return nil
	}, &workers.Policy{Name: "api", Limit: limit})

	// Another host saw a 429: the bucket is in cooldown. (Its clock is Redis
	// TIME, read inside the call: take ours before it.)
	cooled := time.Now()
	_, err = h.lim.Cooldown(context.Background(), "api", limit, cooldown)
	require.NoError(t, err)
	// A job that was sent back earlier with a turn due now.
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("call", nil, h.ticket(t, "api", time.Now())), asynq.MaxRetry(0))
	start(t, p)

	at := recv(t, ran, 15*time.Second, "the ticket holder's run")
	assert.GreaterOrEqual(t, at.Sub(cooled), cooldown, "it ran inside the cooldown")
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
	st := p.Stats()
	assert.Equal(t, int64(1), st.Requeued, "it went back once, to after the cooldown")
	assert.Equal(t, int64(0), st.Failed)
	assert.Equal(t, int64(0), st.Archived)
}

// A ticket far past its slot is not honoured: its tokens were counted long
// ago, and running every overdue ticket at once would bunch them past the
// bucket's burst. The job takes a new turn instead.
func TestPoolLateTicketTakesANewTurn(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	ran := make(chan struct{}, 1)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		ran <- struct{}{}
		return nil
	}, &workers.Policy{Name: "api", Limit: limit, MaxWait: 100 * time.Millisecond})

	require.NoError(t, h.lim.Acquire(context.Background(), "api", limit, 1)) // the hour's token is gone
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("call", nil, h.ticket(t, "api", time.Now().Add(-10*time.Second))), asynq.MaxRetry(0))
	start(t, p)

	waitFor(t, 10*time.Second, "the job sent back for a new turn", func() bool { return p.Stats().Requeued == 1 })
	select {
	case <-ran:
		t.Fatal("a ticket ten seconds late ran without taking tokens")
	default:
	}
	assert.Equal(t, int64(0), p.Stats().Archived)
}

// A 503 without Retry-After is an outage, not a limit: the refused job comes
// back after the backoff, spending no retry, and the bucket is not paused for
// anyone else.
func TestPoolUpstreamOutageDoesNotPause(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 10, Period: time.Second, Burst: 1}
	calls := make(chan int, 4)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		calls <- m.Requeues
		if m.Requeues == 0 {
			return &workers.UpstreamError{StatusCode: 503}
		}
		return nil
	}, &workers.Policy{Name: "api", Limit: limit})
	start(t, p)

	h.enqueue(t, queue.Task{Type: "call"}, asynq.MaxRetry(0))
	assert.Equal(t, 0, recv(t, calls, 10*time.Second, "the refused call"))
	waitFor(t, 5*time.Second, "the job sent back", func() bool { return p.Stats().Requeued == 1 })
	left, err := h.lim.CooldownLeft(context.Background(), "api")
	require.NoError(t, err)
	assert.Zero(t, left, "an outage pauses no one")
	assert.Equal(t, int64(0), p.Stats().Cooldowns)

	assert.Equal(t, 1, recv(t, calls, 15*time.Second, "the come-back"))
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
	assert.Equal(t, int64(0), p.Stats().Failed)
	assert.Equal(t, 0, h.queueInfo(t).Archived)
}

// How late a ticket may be follows its limits: half the time the tighter
// bucket takes to grant its quota (here 20/s burst 2: 50 ms), not a fixed
// two seconds, so that the tickets of a fleet held up together (a Redis
// paused for a second) do not all run at once, more than a burst of them.
func TestPoolTicketLatenessFollowsTheBurst(t *testing.T) {
	h := newHarness(t)
	limit := throttle.Limit{Rate: 20, Period: time.Second, Burst: 2}
	global := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	ran := make(chan struct{}, 1)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	pol := workers.Policy{Name: "api", Limit: limit, Global: global, MaxWait: 100 * time.Millisecond}
	p.HandleFunc("call", func(ctx context.Context, task *asynq.Task) error {
		ran <- struct{}{}
		return nil
	}, &pol)

	require.NoError(t, h.lim.Acquire(context.Background(), workers.GlobalKey(pol), global, 1)) // the hour's global token is gone
	h.enqueueRaw(t, asynq.NewTaskWithHeaders("call", nil, h.ticket(t, "{api}:api", time.Now().Add(-300*time.Millisecond))), asynq.MaxRetry(0))
	start(t, p)

	waitFor(t, 10*time.Second, "the job sent back for a new turn", func() bool { return p.Stats().Requeued == 1 })
	select {
	case <-ran:
		t.Fatal("a ticket 300 ms late, six times its bucket's lateness, ran without taking tokens")
	default:
	}
}

// FromResponse reads a refusal in any dialect backoff.ParseAnswer knows: a
// GitHub 403 with its quota spent is an *UpstreamError, a plain 403 is not.
func TestFromResponse(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	resp := func(status int, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	cases := []struct {
		name string
		resp *http.Response
		want *workers.UpstreamError // nil: no error
	}{
		{"429 with Retry-After", resp(429, "Retry-After", "7"), &workers.UpstreamError{StatusCode: 429, RetryAfter: 7 * time.Second}},
		{"a limit's 403", resp(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1800000042"), &workers.UpstreamError{StatusCode: 403, RetryAfter: 42 * time.Second}},
		{"a plain 403", resp(403, "X-RateLimit-Remaining", "10"), nil},
		{"429 with a bad Retry-After", resp(429, "Retry-After", "soon"), &workers.UpstreamError{StatusCode: 429, Reason: `backoff: invalid Retry-After: "soon" is neither delta-seconds nor an HTTP-date`}},
		{"200", resp(200), nil},
		{"no response", nil, nil},
	}
	for _, c := range cases {
		err := workers.FromResponse(c.resp, now)
		if c.want == nil {
			assert.NoError(t, err, c.name)
			continue
		}
		var up *workers.UpstreamError
		if assert.ErrorAs(t, err, &up, c.name) {
			assert.Equal(t, c.want, up, c.name)
		}
	}
	a := backoff.ParseAnswer(429, http.Header{}, []byte(`{"retry_after": 0.64}`), now)
	var up *workers.UpstreamError
	require.ErrorAs(t, workers.FromAnswer(a), &up)
	assert.Equal(t, 640*time.Millisecond, up.RetryAfter, "Discord's body")
}
