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
// (10⁹ a second). Every rate is kept exactly, to the picosecond per token;
// slots are whole microseconds, each the instant the bucket booked rounded up.
type Limit struct {
	Rate   float64       // tokens added per Period
	Period time.Duration // 0 means time.Second
	Burst  int           // capacity in tokens
}

const (
	// minInterval is the shortest T, in µs: 10⁹ tokens a second.
	minInterval = 1e-3
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

// pace is T, the time per token a bucket works in: Period/Rate in whole µs
// and picoseconds, rounded up to a picosecond (paceOf). Rounding up means a
// bucket never grants faster than its Limit, and it loses less than a
// picosecond per token: under a millionth of the rate at 10⁶ a second.
func (l Limit) pace() pico { return paceOf(l.exactInterval()) }

// validate reports why l cannot be used, or nil (see Validate).
func (l Limit) validate() error {
	_, err := l.checkedPace()
	return err
}

// checkedPace checks l and returns its T, so a call computes it once.
func (l Limit) checkedPace() (pico, error) {
	switch {
	case math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return pico{}, invalidf("rate %v is not a finite number", l.Rate)
	case l.Rate <= 0:
		return pico{}, invalidf("rate %v must be positive", l.Rate)
	case l.Period < 0:
		return pico{}, invalidf("period %v must not be negative", l.Period)
	case l.Burst < 1:
		return pico{}, invalidf("burst %d must be at least 1", l.Burst)
	case l.Burst > maxBurst:
		return pico{}, invalidf("burst %d is larger than %d", l.Burst, maxBurst)
	}
	if err := checkPace(l.exactInterval(), l.Burst, "burst", "fill", l); err != nil {
		return pico{}, err
	}
	return l.pace(), nil
}

// checkPace checks a token or leaky bucket's interval x (µs) and size: no
// faster than one token per nanosecond, and size·T within maxSpan.
func checkPace(x float64, size int, what, verb string, l Limit) error {
	if x < minInterval {
		return invalidf("rate %v per %v is faster than one token per nanosecond", l.Rate, l.period())
	}
	if x*float64(size) > maxSpan {
		return invalidf("rate %v per %v with %s %d takes longer than %v to %s", l.Rate, l.period(), what, size, micros(maxSpan), verb)
	}
	return nil
}

func (l Limit) check(n int) error {
	if err := l.validate(); err != nil {
		return err
	}
	return checkN(n, l.Burst, "burst")
}

func (l Limit) String() string {
	return fmt.Sprintf("%g/%v burst %d", l.Rate, l.period(), l.Burst)
}

func (Limit) kind() kind { return kindTB }

// args are T's µs, the burst, 0 (a3: not adaptive) and T's picoseconds.
func (l Limit) args() [4]int64 {
	t := l.pace()
	return [4]int64{t.us, int64(l.Burst), 0, t.ps}
}

// share is Rate/hosts per Period, and Burst/hosts rounded down but at least 1.
func (l Limit) share(hosts int) algo {
	l.Rate /= float64(hosts)
	l.Burst = max(1, l.Burst/hosts)
	return l
}

func (l Limit) open(st memState, now, cool int64) module {
	m := openTB(st, now, l.pace(), int64(l.Burst), cool)
	return &m
}

// openTB is the token bucket of T t and burst over state st at now: the
// one Go token bucket, which the general path takes as a module (Limit.open)
// and the memory store's quick path calls as it is (memory_fast.go).
func openTB(st memState, now int64, t pico, burst, cool int64) tbModule {
	return tbModule{tatModule: openTAT(st, now, t, cool), burst: burst}
}

// tbModule is lua/tb.lua in Go.
type tbModule struct {
	tatModule
	burst int64
}

// tail: n fit once the TAT after taking them is at most burst·T ahead.
func (m *tbModule) tail(now int64, n int, _ int64) (int64, bool, int64) {
	return tbTail(m.tat, m.t, m.burst, now, n), true, 0
}

// tbTail is the earliest µs at or after now at which a token bucket of T t
// and size burst whose TAT is tat can grant n: the token bucket's decision,
// which its module (tail) and the memory store's quick path both make here.
func tbTail(tat, t pico, burst, now int64, n int) int64 {
	return max(now, tat.subTimes(t, burst-int64(n)).ceil())
}

func (m *tbModule) figures(now int64) (int, int64) { return m.figuresOf(now, m.burst) }

// rollback never undoes a cooldown: the TAT stays at or after its end + (burst−1)·T.
func (m *tbModule) rollback(now int64, n int, handle pico, hs *holes) {
	floor := whole(now)
	if m.cool > 0 {
		floor = maxPico(floor, whole(m.cool).add(m.t.times(m.burst-1)))
	}
	m.rollbackTo(m, handle, floor, hs)
}

// settle (settleTo): a later booking's own turn lies at least burst·T
// behind the TAT it leaves; one a call of several buckets pushed later, or
// one settled, is in hs.near.
func (m *tbModule) settle(now int64, n, used int, handle pico, slot int64, hs *holes) {
	floor := whole(now)
	if m.cool > 0 {
		floor = maxPico(floor, whole(m.cool).add(m.t.times(m.burst-1)))
	}
	m.settleTo(m, now, n, used, handle, slot, m.burst, floor, hs)
}

// refund is lua/tb.lua's refund (Bucket.UpstreamSettle): k tokens back as
// an upstream that refunds after its answer gives them, the TAT (before, as
// the settle found it) back by k·T, never before the floor nor above where
// the settle left it, while no booking's turn lies ahead of now. The caller
// checks that the bucket has no holes.
func (m *tbModule) refund(now int64, k int, before pico) {
	if whole(now).less(before.subTimes(m.t, m.burst)) {
		return
	}
	floor := whole(now)
	if m.cool > 0 {
		floor = maxPico(floor, whole(m.cool).add(m.t.times(m.burst-1)))
	}
	t := maxPico(before.subTimes(m.t, int64(k)), floor)
	if t.less(m.tat) {
		m.tat = t
	}
}

// hold: nothing before till, then one token, then one per T.
func (m *tbModule) hold(_, till int64) { m.tat = maxPico(m.tat, whole(till).add(m.t.times(m.burst-1))) }
