package limitspec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/throttle"
)

func TestRateOfAndPolicyName(t *testing.T) {
	for _, c := range []struct {
		p      throttle.Policy
		name   string
		rate   float64
		period time.Duration
	}{
		{throttle.Limit{Rate: 50, Period: time.Second, Burst: 5}, TokenBucket, 50, time.Second},
		{throttle.LeakyBucket{Rate: 2, Period: time.Minute, Capacity: 4}, LeakyBucket, 2, time.Minute},
		{throttle.FixedWindow{Max: 100, Window: time.Hour}, FixedWindow, 100, time.Hour},
		{throttle.SlidingLog{Max: 40, Window: time.Second}, SlidingLog, 40, time.Second},
		{throttle.SlidingWindow{Max: 60, Window: time.Minute}, SlidingWindow, 60, time.Minute},
	} {
		rate, period := RateOf(c.p)
		assert.Equal(t, c.rate, rate, "%T", c.p)
		assert.Equal(t, c.period, period, "%T", c.p)
		assert.Equal(t, c.name, PolicyName(c.p), "%T", c.p)
	}
}
