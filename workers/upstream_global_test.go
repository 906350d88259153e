package workers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// With Key and Global, an upstream's 429 describes the account every tenant
// shares: it cools the global bucket down, so another tenant pauses too, and
// the global bucket's effective rate falls. With AdaptKey (each tenant has
// its own quota upstream) it cools and lowers only the refused tenant's own
// bucket, and the other tenant goes on.
func TestPoolUpstreamCoolsTheUpstreamBucket(t *testing.T) {
	const retryAfter = 2 * time.Second
	for _, tc := range []struct {
		name     string
		adaptKey bool
		named    bool // with a named limit "tokens" beside the requests one
	}{{"global by default", false, false}, {"global, with a named limit", false, true}, {"AdaptKey: each tenant its own", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p, err := workers.NewPool(h.config(t))
			require.NoError(t, err)
			perTenant, err := workers.KeyTemplate("{payload.tenant}")
			require.NoError(t, err)
			// A burst of 5 s: a's turn booked after its own cooldown takes
			// from the global bucket then, which holds the bucket until the
			// turn less its burst (a token bucket keeps no earlier room).
			global := throttle.Limit{Rate: 100, Period: time.Second, Burst: 500}
			pol := workers.Policy{
				Name: "acct", Limit: throttle.Limit{Rate: 100, Burst: 10}, Key: perTenant, Global: &global,
				Fair: true, Adapt: true, AdaptKey: tc.adaptKey,
			}
			if tc.named {
				pol.Limits = []workers.NamedLimit{{Name: "tokens", Limit: throttle.Limit{Rate: 1000, Burst: 100}, Cost: 10}}
			}
			type call struct {
				tenant string
				at     time.Time
			}
			calls := make(chan call, 8)
			p.HandleFunc("job", func(ctx context.Context, task *asynq.Task) error {
				var pl struct{ Tenant string }
				_ = json.Unmarshal(task.Payload(), &pl)
				m, _ := queue.MetaOf(task)
				calls <- call{pl.Tenant, time.Now()}
				if pl.Tenant == "a" && m.Requeues == 0 {
					return &workers.UpstreamError{StatusCode: 429, RetryAfter: retryAfter}
				}
				return nil
			}, &pol)
			start(t, p)

			h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "a"}`)}, asynq.MaxRetry(0))
			refused := recv(t, calls, 10*time.Second, "tenant a's refused call")
			require.Equal(t, "a", refused.tenant)
			waitFor(t, 5*time.Second, "the cooldown", func() bool { return p.Stats().Cooldowns == 1 })

			lim := throttle.NewLimiter(throttle.NewRedisStore(h.srv.Client(t)), throttle.WithKeyPrefix(h.prefix))
			ctx := context.Background()
			globalLeft, err := lim.CooldownLeft(ctx, workers.GlobalKey(pol))
			require.NoError(t, err)
			ownLeft, err := lim.CooldownLeft(ctx, workers.BucketKey(pol, "a", ""))
			require.NoError(t, err)
			_, globalRate, err := lim.AdaptiveLimit(ctx, workers.GlobalKey(pol), throttle.Adaptive{Ceiling: global})
			require.NoError(t, err)
			_, ownRate, err := lim.AdaptiveLimit(ctx, workers.BucketKey(pol, "a", ""), throttle.Adaptive{Ceiling: throttle.Limit{Rate: 100, Burst: 10}})
			require.NoError(t, err)

			h.enqueue(t, queue.Task{Type: "job", Payload: []byte(`{"tenant": "b"}`)}, asynq.MaxRetry(0))
			after := map[string]time.Time{}
			for range 2 {
				c := recv(t, calls, 10*time.Second, "the calls after the refusal")
				after[c.tenant] = c.at
			}
			require.Len(t, after, 2, "one call of each tenant")
			other, again := call{"b", after["b"]}, call{"a", after["a"]}
			if tc.adaptKey {
				assert.Zero(t, globalLeft, "the global bucket is not cooled")
				assert.Greater(t, ownLeft, time.Duration(0), "tenant a's own bucket is cooled")
				assert.Less(t, ownRate.Rate, 100.0, "tenant a's own rate falls")
				assert.Equal(t, 100.0, globalRate.Rate, "the global rate stays")
				assert.Less(t, other.at.Sub(refused.at), retryAfter/2, "tenant b goes on")
			} else {
				assert.Greater(t, globalLeft, time.Duration(0), "the global bucket is cooled")
				assert.Zero(t, ownLeft, "tenant a's own bucket is not")
				assert.Less(t, globalRate.Rate, 100.0, "the global rate falls")
				assert.Equal(t, 100.0, ownRate.Rate, "tenant a's own rate stays")
				assert.GreaterOrEqual(t, other.at.Sub(refused.at), retryAfter, "tenant b pauses too")
			}
			assert.GreaterOrEqual(t, again.at.Sub(refused.at), retryAfter)
			waitFor(t, 5*time.Second, "both jobs done", func() bool { return p.Stats().Processed == 2 })
			assert.Zero(t, p.Stats().Failed)
			assert.Zero(t, p.Stats().Archived)
		})
	}
}
