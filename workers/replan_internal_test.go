package workers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/throttle"
)

// A re-plan follows a change that may let jobs through sooner, and brings
// forward what the tighter bucket can grant within replanWindow.
func TestReplanLooserAndWave(t *testing.T) {
	mk := func(p Policy) *policy {
		t.Helper()
		pp, err := newPolicy(p, time.Second, 10)
		require.NoError(t, err)
		return pp
	}
	slow := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 2, Burst: 1}})
	fast := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 100, Burst: 10}})
	bigger := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 2, Burst: 5}})
	keyed := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 100, Burst: 10}, Global: throttle.Limit{Rate: 60, Burst: 6}})
	keyedFast := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 100, Burst: 10}, Global: throttle.Limit{Rate: 90, Burst: 9}})
	keyedNoGlobal := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 100, Burst: 10}})
	in2 := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 2, Burst: 1}, InFlight: 2})
	in4 := mk(Policy{Name: "a", Limit: throttle.Limit{Rate: 2, Burst: 1}, InFlight: 4})

	for i, c := range []struct {
		old, new *policy
		want     bool
	}{
		{slow, fast, true},
		{fast, slow, false},
		{slow, bigger, true},
		{slow, slow, false},
		{keyed, keyedFast, true},
		{keyedFast, keyed, false},
		{keyed, keyedNoGlobal, true},
		{in2, in4, true},
		{in4, in2, false},
		{in2, slow, true},
	} {
		assert.Equal(t, c.want, looser(c.old, c.new), "step %d", i)
	}
	assert.Equal(t, 510, replanWave(fast), "burst 10 + 100/s over 5 s")
	assert.Equal(t, 306, replanWave(keyed), "the global bucket binds: 6 + 60/s over 5 s")
	assert.Equal(t, 11, replanWave(slow))
}

// A turn is given up for a lower adaptive rate only when the rate fell by
// more than 5 %: the rate read back from a bucket's T (rounded to a
// picosecond) may exceed the rate itself in its last digits, which once
// made every turn look dropped and a worker re-book forever.
func TestDropped(t *testing.T) {
	assert.False(t, dropped(24.4999999, 24.5), "the same rate, read back")
	assert.False(t, dropped(24, 24.5))
	assert.True(t, dropped(19.6, 24.5), "lowered after a 429")
}
