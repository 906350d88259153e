package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// An LLM API's answer announces its quota of requests and of tokens
// (OpenAI's fields): the requests one sets the request bucket's rate, the
// tokens one the rate of the limit named "tokens"; a second answer saying
// the tokens spent holds the tokens limit until their reset, and leaves
// the request bucket's rate and cooldown alone. Without Adapt nothing moves.
func TestPoolTokensAnnouncementsGoToTheTokensLimit(t *testing.T) {
	for _, adapt := range []bool{true, false} {
		t.Run(map[bool]string{true: "adapt", false: "adapt off"}[adapt], func(t *testing.T) {
			h := newHarness(t)
			p, err := workers.NewPool(h.config(t))
			require.NoError(t, err)
			requests := throttle.Limit{Rate: 5, Period: time.Second, Burst: 5}
			tokens := throttle.Limit{Rate: 10000, Period: time.Second, Burst: 5000}
			pol := workers.Policy{Name: "llm", Adapt: adapt, Limits: []workers.NamedLimit{
				{Name: "requests", Limit: requests}, {Name: "tokens", Limit: tokens, Cost: 10}}}
			p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
				hdr := http.Header{}
				hdr.Set("x-ratelimit-limit-requests", "600")
				hdr.Set("x-ratelimit-remaining-requests", "300")
				hdr.Set("x-ratelimit-reset-requests", "1m") // (300−1)/60 s: 4.98/s
				hdr.Set("x-ratelimit-limit-tokens", "1000")
				if string(task.Payload()) == "spent" {
					hdr.Set("x-ratelimit-remaining-tokens", "0")
					hdr.Set("x-ratelimit-reset-tokens", "3s")
				} else {
					hdr.Set("x-ratelimit-remaining-tokens", "400")
					hdr.Set("x-ratelimit-reset-tokens", "6s") // (600−1)/6 s: 99.83/s
				}
				workers.ObserveResponse(ctx, &http.Response{StatusCode: 200, Header: hdr})
				return nil
			}, &pol)
			start(t, p)
			lim := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
			ctx := context.Background()
			tokensKey, requestsKey := workers.BucketKey(pol, "llm", "tokens"), workers.BucketKey(pol, "llm", "requests")

			h.enqueue(t, queue.Task{Type: "job", Payload: []byte("first")}, asynq.MaxRetry(0))
			waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 1 })
			tl, tst, err := lim.AdaptiveLimit(ctx, tokensKey, throttle.Adaptive{Ceiling: tokens, Floor: tokens.Rate / 1000})
			require.NoError(t, err)
			rl, _, err := lim.AdaptiveLimit(ctx, requestsKey, throttle.Adaptive{Ceiling: requests})
			require.NoError(t, err)
			if !adapt {
				assert.Equal(t, "cold", tst.Reason, "no announcement reaches a limit that does not adapt")
				assert.Equal(t, tokens.Rate, tl.Rate)
				return
			}
			assert.InDelta(t, 599.0/6, tl.Rate, 1e-6, "the tokens limit takes the tokens announced")
			assert.Equal(t, "header", tst.Reason)
			assert.InDelta(t, 299.0/60, rl.Rate, 1e-6, "the request bucket takes the requests announced")
			assert.Equal(t, 49, tl.Burst, "the tokens burst scales with the rate")

			h.enqueue(t, queue.Task{Type: "job", Payload: []byte("spent")}, asynq.MaxRetry(0))
			waitFor(t, 5*time.Second, "the second job done", func() bool { return p.Stats().Processed == 2 })
			left, err := lim.CooldownLeft(ctx, tokensKey)
			require.NoError(t, err)
			assert.Greater(t, left, 2*time.Second, "the tokens limit waits for the tokens' reset")
		})
	}
}

// Tokens announcements with the other options on: a key per tenant, a
// global limit shared fairly, adapt=key (each tenant's own quota upstream:
// its own tokens limit adapts), a 429's cooldown, and a runtime change of
// the limits. Tenant a's tokens limit takes a's announcements, b's stays
// untouched; after SetPolicy lowers the tokens limit below the announced
// rate, the next announcement is held to the new ceiling.
func TestPoolTokensWithEveryOption(t *testing.T) {
	h := newHarness(t)
	p, err := workers.NewPool(h.config(t))
	require.NoError(t, err)
	perTenant, err := workers.KeyTemplate("t:{payload.tenant}")
	require.NoError(t, err)
	requests := throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}
	tokens := throttle.Limit{Rate: 10000, Period: time.Second, Burst: 5000}
	global := throttle.Limit{Rate: 1000, Period: time.Second, Burst: 100}
	pol := workers.Policy{Name: "llm", Key: perTenant, Global: global, Fair: true, Adapt: true, AdaptKey: true,
		Limits: []workers.NamedLimit{{Name: "requests", Limit: requests}, {Name: "tokens", Limit: tokens, Cost: 10}}}
	type call struct {
		tenant   string
		requeues int
	}
	ran := make(chan call, 16)
	p.HandleFunc("llm", func(ctx context.Context, task *asynq.Task) error {
		var v struct{ Tenant, Say string }
		require.NoError(t, json.Unmarshal(task.Payload(), &v))
		m, _ := queue.MetaOf(task)
		ran <- call{v.Tenant, m.Requeues}
		if v.Say == "429" && m.Requeues == 0 {
			return &workers.UpstreamError{StatusCode: 429, RetryAfter: 300 * time.Millisecond}
		}
		if v.Tenant == "a" {
			hdr := http.Header{}
			hdr.Set("x-ratelimit-limit-tokens", "1000")
			hdr.Set("x-ratelimit-remaining-tokens", "400")
			hdr.Set("x-ratelimit-reset-tokens", "6s") // 99.83/s
			workers.ObserveResponse(ctx, &http.Response{StatusCode: 200, Header: hdr})
		}
		return nil
	}, &pol)
	start(t, p)
	enqueue := func(tenant, say string) {
		h.enqueue(t, queue.Task{Type: "llm", Payload: fmt.Appendf(nil, `{"tenant": %q, "say": %q}`, tenant, say)}, asynq.MaxRetry(0))
	}
	lim := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
	ctx := context.Background()
	read := func(p workers.Policy, tenant string, ceiling throttle.Limit) (throttle.Limit, throttle.AdaptState) {
		l, st, err := lim.AdaptiveLimit(ctx, workers.BucketKey(p, "t:"+tenant, "tokens"), throttle.Adaptive{Ceiling: ceiling, Floor: ceiling.Rate / 1000})
		require.NoError(t, err)
		return l, st
	}

	enqueue("a", "")
	enqueue("b", "429")
	got := map[call]bool{}
	for range 3 { // a's, b's refused, b's again after the cooldown
		got[recv(t, ran, 10*time.Second, "a job")] = true
	}
	assert.Equal(t, map[call]bool{{"a", 0}: true, {"b", 0}: true, {"b", 1}: true}, got)
	waitFor(t, 5*time.Second, "every job done", func() bool { return p.Stats().Processed == 2 })
	la, sta := read(pol, "a", tokens)
	assert.InDelta(t, 599.0/6, la.Rate, 1e-6, "a's tokens limit follows a's announcement")
	assert.Equal(t, "header", sta.Reason)
	_, stb := read(pol, "b", tokens)
	assert.Equal(t, "cold", stb.Reason, "b's tokens limit untouched")
	assert.Equal(t, int64(1), p.Stats().Cooldowns, "b's 429 cooled b's bucket")

	// At runtime the tokens limit drops under the announced rate: the
	// announcement is held to the new ceiling.
	lower := throttle.Limit{Rate: 50, Period: time.Second, Burst: 25}
	changed := pol
	changed.Limits = []workers.NamedLimit{{Name: "requests", Limit: requests}, {Name: "tokens", Limit: lower, Cost: 10}}
	require.NoError(t, p.SetPolicy("llm", changed))
	enqueue("a", "")
	assert.Equal(t, call{"a", 0}, recv(t, ran, 10*time.Second, "a's job under the new limits"))
	waitFor(t, 5*time.Second, "the job done", func() bool { return p.Stats().Processed == 3 })
	la, _ = read(changed, "a", lower)
	assert.InDelta(t, 50.0, la.Rate, 1e-6, "held to the new ceiling")
	assert.Zero(t, p.Stats().Failed)
	assert.Zero(t, p.Stats().Archived)
}
