package throttle

import (
	"fmt"
	"math"
	"time"
)

// Limit is a token bucket: it refills at Rate tokens per Period and holds at most
// Burst tokens. A full bucket grants Burst tokens at once; after that, one token
// every Period/Rate.
//
// The zero Period means one second. Rate must be positive and finite, Burst at
// least 1, and a bucket may not refill faster than one token per microsecond.
type Limit struct {
	Rate   float64       // tokens added per Period
	Period time.Duration // 0 means time.Second
	Burst  int           // capacity in tokens
}

// PerSecond returns a Limit of rate tokens per second with the given burst.
func PerSecond(rate float64, burst int) Limit {
	return Limit{Rate: rate, Period: time.Second, Burst: burst}
}

const (
	// maxBurst bounds a bucket's capacity.
	maxBurst = 1 << 30
	// maxSpan bounds how far ahead, in microseconds, a bucket's state may reach
	// (about three years): it keeps server-time arithmetic exact in float64.
	maxSpan = 1e14
)

func (l Limit) period() time.Duration {
	if l.Period == 0 {
		return time.Second
	}
	return l.Period
}

// exactInterval is Period/Rate in microseconds, unrounded.
func (l Limit) exactInterval() float64 {
	return float64(l.period()) / float64(time.Microsecond) / l.Rate
}

// interval is T, the microseconds per token a bucket works in: Period/Rate
// rounded up to a whole microsecond (a quotient within 1e-9 of a whole number
// is that number, so float noise never costs a microsecond). Working in whole
// microseconds keeps every store's arithmetic exact; rounding up means a bucket
// never grants faster than its Limit, and at most 1 µs per token slower.
func (l Limit) interval() int64 {
	t := l.exactInterval()
	if r := math.Round(t); math.Abs(t-r) <= 1e-9*t {
		return int64(r)
	}
	return int64(math.Ceil(t))
}

// Validate reports why l cannot be used, or nil.
func (l Limit) Validate() error {
	_, err := l.validate()
	return err
}

// validate checks l and returns its interval T, so a call computes it once.
func (l Limit) validate() (int64, error) {
	switch {
	case math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return 0, invalidf("rate %v is not a finite number", l.Rate)
	case l.Rate <= 0:
		return 0, invalidf("rate %v must be positive", l.Rate)
	case l.Period < 0:
		return 0, invalidf("period %v must not be negative", l.Period)
	case l.Burst < 1:
		return 0, invalidf("burst %d must be at least 1", l.Burst)
	case l.Burst > maxBurst:
		return 0, invalidf("burst %d is larger than %d", l.Burst, maxBurst)
	}
	if l.exactInterval() < 1 {
		return 0, invalidf("rate %v per %v is faster than one token per microsecond", l.Rate, l.period())
	}
	t := l.interval()
	if l.exactInterval() > maxSpan || float64(t)*float64(l.Burst) > maxSpan { // the first: beyond it, t may overflow
		return 0, invalidf("rate %v per %v with burst %d takes longer than %v to fill", l.Rate, l.period(), l.Burst, time.Duration(maxSpan)*time.Microsecond)
	}
	return t, nil
}

// check validates l and a request for n tokens from it, and returns l's interval.
func (l Limit) check(n int) (int64, error) {
	t, err := l.validate()
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, invalidf("n %d must be at least 1", n)
	}
	if n > l.Burst {
		return 0, &InvalidError{Reason: fmt.Sprintf("n %d is larger than burst %d: it could never be granted", n, l.Burst), tooLarge: true}
	}
	return t, nil
}

func (l Limit) String() string {
	return fmt.Sprintf("%g/%v burst %d", l.Rate, l.period(), l.Burst)
}
