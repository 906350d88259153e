package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A nil policy, or a nil pointer to one, is refused before any I/O (its
// methods would panic); a non-nil pointer is taken as its value, so that
// code holding a *Limit (workers.Policy.Global) works unchanged.
func TestPolicyNilRefusedPointerTaken(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
	}{
		{"nil", nil},
		{"nil *Limit", (*Limit)(nil)},
		{"nil *FixedWindow", (*FixedWindow)(nil)},
		{"nil *SlidingLog", (*SlidingLog)(nil)},
		{"nil *SlidingWindow", (*SlidingWindow)(nil)},
		{"nil *LeakyBucket", (*LeakyBucket)(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkBeforeIO(t, "k", c.p, 1, ErrInvalid)
		})
	}
	lim := NewLimiter(NewMemoryStore(WithClock(newFakeClock())))
	for _, p := range []Policy{&Limit{Rate: 1, Burst: 1}, &FixedWindow{Max: 1, Window: time.Second}, &SlidingLog{Max: 1, Window: time.Second},
		&SlidingWindow{Max: 1, Window: time.Second}, &LeakyBucket{Rate: 1, Capacity: 1}} {
		res, err := lim.TryAcquire(context.Background(), fmt.Sprintf("%T", p), p, 1)
		require.NoError(t, err, "%T", p)
		assert.True(t, res.Allowed, "%T: the first call is granted", p)
		res, err = lim.TryAcquire(context.Background(), fmt.Sprintf("%T", p), p, 1)
		require.NoError(t, err, "%T", p)
		assert.False(t, res.Allowed, "%T: the second is refused, as for its value", p)
	}
}
