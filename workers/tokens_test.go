package workers_test

import (
	"context"
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
