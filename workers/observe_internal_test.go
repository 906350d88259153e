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
		want time.Duration
	}{
		{backoff.Quota{Rate: 50, Exhausted: true, Reset: time.Second}, 20 * time.Millisecond},
		{backoff.Quota{Rate: 0.5, Exhausted: true, Reset: time.Second}, time.Second},
		{backoff.Quota{Rate: 50, Exhausted: true, Reset: 3 * time.Second}, 3 * time.Second},
		{backoff.Quota{Exhausted: true, Reset: time.Second}, time.Second},
	} {
		assert.Equal(t, c.want, exhaustedHold(c.q), "%+v", c.q)
	}
}
