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
// least 1, and a bucket may not refill faster than one token per nanosecond
// (10⁹ a second). A bucket faster than one token per microsecond is kept in
// picoseconds (see "Fine buckets" in the package documentation).
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
func (l Limit) interval() int64 { return roundUp(l.exactInterval()) }

// roundUp is x rounded up to a whole number, but a number within 1e-9·x of a
// whole one is that one.
func roundUp(x float64) int64 {
	if r := math.Round(x); math.Abs(x-r) <= 1e-9*x {
		return int64(r)
	}
	return int64(math.Ceil(x))
}

// fine reports that l is faster than one token per µs: a fine bucket (fine.go).
func (l Limit) fine() bool { return l.exactInterval() < 1 }

// Validate reports why l cannot be used, or nil.
func (l Limit) Validate() error {
	_, err := l.validate()
	return err
}

// validate checks l and returns its interval T, so a call computes it once;
// T is 0 for a fine bucket, whose T is in ticks (fine.go).
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
	if l.exactInterval() < fineMinInterval {
		return 0, invalidf("rate %v per %v is faster than one token per nanosecond", l.Rate, l.period())
	}
	if l.fine() {
		return 0, nil
	}
	t := l.interval()
	if l.exactInterval() > maxSpan || float64(t)*float64(l.Burst) > maxSpan { // the first: beyond it, t may overflow
		return 0, invalidf("rate %v per %v with burst %d takes longer than %v to fill", l.Rate, l.period(), l.Burst, time.Duration(maxSpan)*time.Microsecond)
	}
	return t, nil
}

func (l Limit) check(n int) error {
	if err := l.Validate(); err != nil {
		return err
	}
	return checkN(n, l.Burst, "burst")
}

func (l Limit) String() string {
	return fmt.Sprintf("%g/%v burst %d", l.Rate, l.period(), l.Burst)
}

func (l Limit) kind() kind {
	if l.fine() {
		return kindTF
	}
	return kindTB
}

// args are T (in ticks for a fine bucket) and the burst.
func (l Limit) args() [3]int64 {
	if l.fine() {
		return [3]int64{fineTicks(l.exactInterval()), int64(l.Burst)}
	}
	return [3]int64{l.interval(), int64(l.Burst)}
}

// share is Rate/hosts per Period, and Burst/hosts rounded down but at least 1.
func (l Limit) share(hosts int) algo {
	l.Rate /= float64(hosts)
	l.Burst = max(1, l.Burst/hosts)
	return l
}

func (l Limit) open(st memState, now, cool int64) module {
	if l.fine() {
		return openFine(st, now, fineTicks(l.exactInterval()), int64(l.Burst), cool, false)
	}
	return &tbModule{tatModule: openTAT(st, now, l.interval(), cool), burst: int64(l.Burst)}
}

// tbModule is lua/tb.lua in Go.
type tbModule struct {
	tatModule
	burst int64
}

func (m *tbModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	return max(now, m.tat+(int64(n)-m.burst)*m.t), true, 0
}

func (m *tbModule) figures(now int64) (int, int64) {
	ahead := m.tat - now
	return int(max(0, floorDiv(m.burst*m.t-ahead, m.t))), ahead
}

func (m *tbModule) rollback(now int64, n int, handle int64, hs *holes) {
	floor := now
	if m.cool > 0 {
		floor = max(floor, m.cool+(m.burst-1)*m.t)
	}
	m.rollbackTo(m, handle, floor, hs)
}

func (m *tbModule) hold(_, till int64) { m.tat = max(m.tat, till+(m.burst-1)*m.t) }
