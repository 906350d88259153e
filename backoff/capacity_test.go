package backoff

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A capacity under the configured burst is the rate at which the
// configured bucket's shape holds it; a rate said, no limit, or a limit at
// or above the burst say nothing.
func TestQuotaCapacityRate(t *testing.T) {
	for i, c := range []struct {
		q           Quota
		rate        float64
		burst, want float64
	}{
		{Quota{Limit: 5}, 200, 20, 50},
		{Quota{Limit: 5, Remaining: 0, Exhausted: true}, 200, 20, 50},
		{Quota{Limit: 40, Remaining: 39}, 200, 20, 0},
		{Quota{Limit: 20}, 200, 20, 0},
		{Quota{Limit: 5, Rate: 10}, 200, 20, 0},
		{Quota{Remaining: 3}, 200, 20, 0},
		{Quota{Limit: 50}, 3000, 100, 1500}, // per minute in, per minute out
	} {
		assert.InDelta(t, c.want, c.q.CapacityRate(c.rate, int(c.burst)), 1e-9, "case %d: %+v", i, c.q)
	}
}
