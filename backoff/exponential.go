package backoff

import (
	"fmt"
	"math"
	"time"
)

// Jitter selects how Exponential randomises a delay.
type Jitter int

const (
	// NoJitter returns the computed delay unchanged.
	NoJitter Jitter = iota
	// FullJitter returns a delay drawn uniformly from [0, d], where d is the
	// computed (capped) delay. It spreads retries out the most.
	FullJitter
)

// Exponential is capped exponential backoff: attempt k (counting from 0) waits
// Base·Factor^k, at most Max, and that delay is then jittered.
//
// The zero value is not usable: Base must be set. The other fields have
// defaults: Max 0 means MaxDelay, Factor 0 means 2, Jitter's zero value is
// NoJitter and a nil Rand means math/rand/v2. Validate reports a bad
// configuration; Delay does not check, and with bad fields it still returns a
// duration in [0, the cap] rather than panicking.
//
// Delay is the method most callers want. An Exponential is a plain value with
// no state, so it is safe for concurrent use as long as its Rand is.
type Exponential struct {
	// Base is the delay before jitter for attempt 0. It must be > 0.
	Base time.Duration
	// Max caps every delay. 0 means MaxDelay. If set, it must be >= Base.
	Max time.Duration
	// Factor is the growth per attempt. 0 means 2; otherwise it must be a
	// finite number >= 1 (1 gives a constant delay).
	Factor float64
	// Jitter selects the randomisation; the zero value is NoJitter.
	Jitter Jitter
	// Rand is the randomness for jitter. nil means math/rand/v2's global
	// generator, which is safe for concurrent use.
	Rand Source
}

// Delay returns how long to wait before retry number attempt, counting from
// 0. A negative attempt counts as 0. Any attempt count, however large, gives
// at most the cap (Max, or MaxDelay when Max is 0); the result is never
// negative.
func (e Exponential) Delay(attempt int) time.Duration {
	if e.Base <= 0 {
		return 0
	}
	attempt = max(attempt, 0)
	limit := capOrDefault(e.Max)

	factor := e.Factor
	switch {
	case factor == 0:
		factor = 2
	case !(factor >= 1): // below 1, negative or NaN: Validate rejects these
		factor = 1
	}

	// In float64, Base·Factor^k goes to +Inf rather than wrapping, and
	// clampDuration brings +Inf back to the cap.
	d := clampDuration(float64(e.Base)*math.Pow(factor, float64(attempt)), 0, limit)
	if e.Jitter == FullJitter {
		d = clampDuration(float64(d)*draw(e.Rand), 0, d)
	}
	return d
}

// Validate reports whether e is a usable configuration. The error wraps
// ErrInvalidPolicy.
func (e Exponential) Validate() error {
	if err := checkBaseMax("exponential", e.Base, e.Max); err != nil {
		return err
	}
	switch {
	case math.IsNaN(e.Factor) || math.IsInf(e.Factor, 0):
		return fmt.Errorf("%w: exponential Factor %v must be finite", ErrInvalidPolicy, e.Factor)
	case e.Factor != 0 && e.Factor < 1:
		return fmt.Errorf("%w: exponential Factor %v must be 0 (meaning 2) or >= 1", ErrInvalidPolicy, e.Factor)
	case e.Jitter != NoJitter && e.Jitter != FullJitter:
		return fmt.Errorf("%w: unknown Jitter %d", ErrInvalidPolicy, int(e.Jitter))
	}
	return nil
}
