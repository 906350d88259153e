package backoff

import (
	"time"
)

// Decorrelated is decorrelated-jitter backoff: each delay is drawn uniformly
// between Base and three times the previous delay, capped at Max. Successive
// delays grow on average but are less correlated than jittered exponential
// ones, which spreads out clients that failed together.
//
// The zero value is not usable: Base must be set. Max 0 means MaxDelay and a
// nil Rand means math/rand/v2.
//
// Decorrelated keeps no state: the caller passes the previous delay to Next.
// It is therefore safe for concurrent use as long as its Rand is.
type Decorrelated struct {
	// Base is the shortest delay. It must be > 0.
	Base time.Duration
	// Max caps every delay. 0 means MaxDelay. If set, it must be >= Base.
	Max time.Duration
	// Rand is the randomness. nil means math/rand/v2's global generator,
	// which is safe for concurrent use.
	Rand Source
}

// Next returns the delay that follows prev. A prev of 0, or anything below
// Base, means this is the first retry. The result is in
// [Base, min(cap, 3·max(prev, Base))], where the cap is Max, or MaxDelay when
// Max is 0; no prev, however large, makes it overflow.
//
// With an invalid configuration Next does not panic: a Base of 0 or less
// gives 0, and a Base above the cap gives the cap.
func (d Decorrelated) Next(prev time.Duration) time.Duration {
	if d.Base <= 0 {
		return 0
	}
	limit := capOrDefault(d.Max)
	lo := min(d.Base, limit)
	prev = max(prev, lo)
	hi := limit
	if prev <= limit/3 { // so 3·prev can neither overflow nor pass the cap
		hi = 3 * prev
	}
	return clampDuration(float64(lo)+draw(d.Rand)*float64(hi-lo), lo, hi)
}

// Validate reports whether d is a usable configuration. The error wraps
// ErrInvalidPolicy.
func (d Decorrelated) Validate() error {
	return checkBaseMax("decorrelated", d.Base, d.Max)
}
