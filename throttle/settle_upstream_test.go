package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Bucket.UpstreamSettle: a token bucket settled after the booking refilled
// by its own schedule (an LLM call slower than its max_tokens take to come
// back) still gets back what an upstream that refunds on its answer would
// give: up to what the bucket lacks to be full. Without it, nothing; with a
// booking's turn ahead, nothing either. Both stores, on one clock.
func TestSettleUpstream(t *testing.T) {
	ctx := context.Background()
	tokens := Limit{Rate: 1000, Period: time.Second, Burst: 500} // T 1 ms
	for _, tc := range []struct {
		name     string
		upstream bool
		ahead    bool          // a booking waits for its turn when X settles
		at       int64         // µs: when X settles
		full     time.Duration // until the bucket is full, after X settles at 20
	}{
		{"upstream rule", true, false, 300_000, 120 * time.Millisecond},
		{"upstream rule, never above full", true, false, 450_000, 0},
		{"settled-cost rule", false, false, 300_000, 200 * time.Millisecond},
		{"upstream rule, a turn ahead", true, true, 300_000, 600 * time.Millisecond},
	} {
		stores, clock := settleStores(t)
		for name, store := range stores {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				clock.at(0)
				lim := NewLimiter(store, WithKeyPrefix(redistest.Prefix(t)))
				b := func(n int) []Bucket {
					return []Bucket{{Key: "tokens", Limit: tokens, N: n, UpstreamSettle: tc.upstream}}
				}
				x, err := lim.ReserveAll(ctx, b(100), 0) // TAT 100 ms
				require.NoError(t, err)
				_, err = lim.ReserveAll(ctx, b(400), 0) // TAT 500 ms: empty
				require.NoError(t, err)
				clock.at(tc.at) // X's own 100 came back by its schedule at 100 ms
				if tc.ahead {
					r, err := lim.ReserveAll(ctx, b(400), time.Second) // its turn at 400 ms, full at 900
					require.NoError(t, err)
					require.Greater(t, r.Delay(), time.Duration(0))
				}
				require.NoError(t, x.Settle(ctx, "tokens", 20))
				st, err := lim.Peek(ctx, "tokens", tokens)
				require.NoError(t, err)
				assert.Equal(t, tc.full, st.ResetAfter)
			})
		}
	}
}
