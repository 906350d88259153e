package workers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// TestExhaustedHold: a spent quota holds the bucket until the announced
// reset, except that a reset of one second (rounded up: "within the
// second") beside an announced rate holds for one request's time at it.
func TestExhaustedHold(t *testing.T) {
	for _, c := range []struct {
		q    backoff.Quota
		rate float64 // known from the upstream's word, per second
		want time.Duration
	}{
		{backoff.Quota{Rate: 50, Exhausted: true, Reset: time.Second}, 50, 20 * time.Millisecond},
		{backoff.Quota{Rate: 0.5, Exhausted: true, Reset: time.Second}, 0.5, time.Second},
		{backoff.Quota{Rate: 50, Exhausted: true, Reset: 3 * time.Second}, 50, 3 * time.Second},
		{backoff.Quota{Exhausted: true, Reset: time.Second}, 0, time.Second},
		// A capacity's rate (GitHub's limit beside a Unix-time reset).
		{backoff.Quota{Limit: 5, Exhausted: true, Reset: time.Second}, 50, 20 * time.Millisecond},
	} {
		assert.Equal(t, c.want, exhaustedHold(c.q, c.rate), "%+v", c.q)
	}
}

// TestCapacityRate: a capacity under the configured burst is the rate at
// which the configured bucket's shape holds it; a rate said, no limit, or a
// limit at or above the burst say nothing.
func TestCapacityRate(t *testing.T) {
	a := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 200, Period: time.Second, Burst: 20}}
	for i, c := range []struct {
		q    backoff.Quota
		want float64
	}{
		{backoff.Quota{Limit: 5}, 50},
		{backoff.Quota{Limit: 40, Remaining: 39}, 0},
		{backoff.Quota{Limit: 20}, 0},
		{backoff.Quota{Limit: 5, Rate: 10}, 0},
		{backoff.Quota{Remaining: 3}, 0},
	} {
		assert.InDelta(t, c.want, capacityRate(a, c.q), 1e-9, "case %d: %+v", i, c.q)
	}
	perMinute := throttle.Adaptive{Ceiling: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 100}}
	assert.InDelta(t, 1500.0, capacityRate(perMinute, backoff.Quota{Limit: 50}), 1e-9, "per the ceiling's period")
}

// TestStaleTurn: a job that woke later after its turn than its policy
// honours a ticket gives the turn up, once; then it runs however late.
func TestStaleTurn(t *testing.T) {
	slot := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := &job{pol: &policy{late: 50 * time.Millisecond}}
	assert.False(t, staleTurn(j, slot, slot.Add(50*time.Millisecond)), "within the lateness a ticket has")
	assert.True(t, staleTurn(j, slot, slot.Add(200*time.Millisecond)), "a stall: a new turn")
	assert.False(t, staleTurn(j, slot, slot.Add(time.Second)), "once only")
}
