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

// An answer that says a capacity but no rate (Shopify's call limit 1/5)
// sets the effective rate at which the configured bucket holds that
// capacity: configured 200/s burst 20, the upstream holds 5: 50/s burst 5.
// Then GitHub's 403 with its quota spent (remaining 0, a reset) is a
// throttle: the bucket cools down until the reset and the job comes back,
// but the rate the upstream's word set is not lowered, as a 429 would.
// A third answer with the capacity again changes nothing.
func TestPoolCapacitySetsTheRateAndASpentQuotaWaits(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	ceiling := throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}
	pol := workers.Policy{Name: "shop", Limit: ceiling, Adapt: true}
	calls := make(chan string, 8)
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		m, _ := queue.MetaOf(task)
		hdr := http.Header{}
		switch {
		case string(task.Payload()) == "shopify":
			hdr.Set("X-Shopify-Shop-Api-Call-Limit", "1/5")
			calls <- "shopify"
			workers.ObserveResponse(ctx, &http.Response{StatusCode: 200, Header: hdr})
			return nil
		case m.Requeues == 0:
			hdr.Set("x-ratelimit-remaining", "0")
			hdr.Set("x-ratelimit-used", "5")
			hdr.Set("x-ratelimit-reset", "2") // delta seconds: a spent quota for 2 s
			a := backoff.ParseAnswer(http.StatusForbidden, hdr, nil, time.Now())
			calls <- "github 403"
			workers.ObserveAnswer(ctx, a)
			return workers.FromAnswer(a)
		}
		calls <- "github again"
		return nil
	}, &pol)
	start(t, p)
	lim := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
	ctx := context.Background()
	read := func() (throttle.Limit, throttle.AdaptState) {
		l, st, err := lim.AdaptiveLimit(ctx, "shop", throttle.Adaptive{Ceiling: ceiling})
		require.NoError(t, err)
		return l, st
	}

	h.enqueue(t, queue.Task{Type: "job", Payload: []byte("shopify")}, asynq.MaxRetry(0))
	require.Equal(t, "shopify", recv(t, calls, 10*time.Second, "the shopify call"))
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
	l, st := read()
	assert.InDelta(t, 50.0, l.Rate, 1e-9, "the capacity's rate")
	assert.Equal(t, 5, l.Burst, "the burst is the capacity")
	assert.Equal(t, "header", st.Reason)

	h.enqueue(t, queue.Task{Type: "job", Payload: []byte("github")}, asynq.MaxRetry(0))
	refusedAt := time.Now()
	require.Equal(t, "github 403", recv(t, calls, 10*time.Second, "the github call"))
	waitFor(t, 5*time.Second, "the cooldown", func() bool { return p.Stats().Cooldowns == 1 })
	left, err := lim.CooldownLeft(ctx, "shop")
	require.NoError(t, err)
	assert.Greater(t, left, time.Second, "held until the reset")
	l, st = read()
	assert.InDelta(t, 50.0, l.Rate, 1e-9, "a quota spent at the upstream's word lowers nothing")
	assert.Equal(t, "header", st.Reason)

	require.Equal(t, "github again", recv(t, calls, 10*time.Second, "the job after the reset"))
	assert.GreaterOrEqual(t, time.Since(refusedAt), 2*time.Second-50*time.Millisecond, "it came back after the reset")
	waitFor(t, 5*time.Second, "both jobs done", func() bool { return p.Stats().Processed == 2 })
	assert.Zero(t, p.Stats().Failed)
	assert.Zero(t, p.Stats().Archived)
}

// Without a capacity or a rate from the upstream (the configured bucket
// holds no more than it says), a quota spent is an overload as a 429 is:
// the rate falls.
func TestPoolSpentQuotaWithoutWordLowers(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	ceiling := throttle.Limit{Rate: 200, Period: time.Second, Burst: 5}
	pol := workers.Policy{Name: "x", Limit: ceiling, Adapt: true}
	p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
		hdr := http.Header{}
		hdr.Set("X-RateLimit-Limit", "5")
		hdr.Set("X-RateLimit-Remaining", "0")
		hdr.Set("X-RateLimit-Reset", "1")
		workers.ObserveResponse(ctx, &http.Response{StatusCode: 200, Header: hdr})
		return nil
	}, &pol)
	start(t, p)
	h.enqueue(t, queue.Task{Type: "job"}, asynq.MaxRetry(0))
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
	lim := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
	l, st, err := lim.AdaptiveLimit(context.Background(), "x", throttle.Adaptive{Ceiling: ceiling})
	require.NoError(t, err)
	assert.Less(t, l.Rate, 200.0, "lowered")
	assert.Equal(t, "429", st.Reason)
}
