package workers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/backoff"
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

// TestStaleTurn: a job that woke later after its turn than its policy
// honours a ticket gives the turn up, once; then it runs however late.
func TestStaleTurn(t *testing.T) {
	slot := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := &job{pol: &policy{late: 50 * time.Millisecond}}
	assert.False(t, staleTurn(j, slot, slot.Add(50*time.Millisecond)), "within the lateness a ticket has")
	assert.True(t, staleTurn(j, slot, slot.Add(200*time.Millisecond)), "a stall: a new turn")
	assert.False(t, staleTurn(j, slot, slot.Add(time.Second)), "once only")
}
