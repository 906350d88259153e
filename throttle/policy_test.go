package throttle

import (
	"testing"
	"time"
)

// Only this package's policy values are policies: nil, and pointers (whose
// methods a nil one would panic in), fail with ErrInvalid before any I/O.
func TestPolicyValuesOnly(t *testing.T) {
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
		{"*FixedWindow", &FixedWindow{Max: 1, Window: time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkBeforeIO(t, "k", c.p, 1, ErrInvalid)
		})
	}
}
