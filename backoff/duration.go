package backoff

import "time"

// MaxDelay is the longest delay Exponential and Decorrelated return when their
// Max is 0. It also bounds the arithmetic: no attempt count or factor can make
// a delay overflow.
const MaxDelay = 24 * time.Hour

// capOrDefault returns max, or MaxDelay when max is 0 or negative.
func capOrDefault(max time.Duration) time.Duration {
	if max <= 0 {
		return MaxDelay
	}
	return max
}

// clampDuration converts f nanoseconds to a Duration in [lo, hi]. It works for
// any float, including NaN and ±Inf, and never converts a float that does not
// fit in an int64. It assumes 0 <= lo <= hi.
func clampDuration(f float64, lo, hi time.Duration) time.Duration {
	switch {
	case !(f > float64(lo)): // also catches NaN
		return lo
	case f >= float64(hi):
		return hi
	}
	// Here float64(lo) < f < float64(hi) <= 2^63, so the conversion is
	// defined; rounding of lo and hi to float64 can still put it a few
	// nanoseconds outside [lo, hi].
	d := time.Duration(f)
	return min(max(d, lo), hi)
}
