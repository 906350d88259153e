package throttle

import (
	_ "embed"
	"fmt"
	"math"
	"time"
)

// LeakyBucket is a meter that lets tokens through at an even pace, one every
// Period/Rate (T), never in a burst; requests line up for their turn, and
// Capacity bounds how many may be in the bucket at once. It is the leaky
// bucket as a queue: a request never waits more than (Capacity−n)·T, and
// beyond that it is refused at once instead of being queued.
//
// A request for n tokens takes the next free turn: at once if the meter is
// idle, otherwise when the tokens granted before it have gone through, and the
// turn after it is n·T later. The bucket holds the tokens whose time has not
// run out, ⌈(end of the last turn − now)/T⌉, the one going through included;
// a request for n is admitted if that plus n is at most Capacity and its wait
// fits the caller's budget. Capacity 1 is a strict pacer that queues nothing:
// one token per T, and any request sooner refused.
//
// A refused call's RetryAfter is, when only the full bucket stood in the way,
// how long until enough has leaked out for the request to fit (it then waits
// at most (Capacity−n)·T, within its budget); when the wait was beyond the
// caller's budget, the wait, after which it would be granted at once. So
// Acquire returns a *LimitedError at once on a full bucket, whatever its
// context allows. Reservation.Cancel of the last turn booked moves the meter
// back; a turn under a later one is left for the next callers at its
// instant, one after the other (see Reservation.Cancel): moving the meter
// back would put the next turn on top of the later one.
//
// The zero Period means one second. Rate must be positive and finite, no
// faster than one token per nanosecond (T is Period/Rate rounded up to a
// whole microsecond, as for Limit, or to a whole picosecond for a meter
// faster than one token per microsecond: see "Fine buckets" in the package
// documentation), and Capacity at least 1. The zero value is not valid.
type LeakyBucket struct {
	Rate     float64       // tokens per Period
	Period   time.Duration // 0 means time.Second
	Capacity int           // the most tokens in the bucket: going through or waiting their turn
}

// limit is the token bucket with the same pace, for its interval arithmetic.
func (b LeakyBucket) limit() Limit { return Limit{Rate: b.Rate, Period: b.Period, Burst: b.Capacity} }

// interval is T in whole microseconds; see Limit.interval.
func (b LeakyBucket) interval() int64 { return b.limit().interval() }

// Validate reports why b cannot be used, or nil.
func (b LeakyBucket) Validate() error {
	l := b.limit()
	switch {
	case math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0):
		return invalidf("rate %v is not a finite number", b.Rate)
	case b.Rate <= 0:
		return invalidf("rate %v must be positive", b.Rate)
	case b.Period < 0:
		return invalidf("period %v must not be negative", b.Period)
	case b.Capacity < 1:
		return invalidf("capacity %d must be at least 1", b.Capacity)
	case b.Capacity > maxBurst:
		return invalidf("capacity %d is larger than %d", b.Capacity, maxBurst)
	case l.exactInterval() < fineMinInterval:
		return invalidf("rate %v per %v is faster than one token per nanosecond", b.Rate, l.period())
	case l.exactInterval() > maxSpan || float64(l.interval())*float64(b.Capacity) > maxSpan: // the first: beyond it, interval may overflow
		return invalidf("rate %v per %v with capacity %d takes longer than %v to drain", b.Rate, l.period(), b.Capacity, micros(maxSpan))
	}
	return nil
}

func (b LeakyBucket) check(n int) error {
	if err := b.Validate(); err != nil {
		return err
	}
	return checkN(n, b.Capacity, "capacity")
}

// Quota is Capacity tokens, and the time a full bucket takes to drain.
func (b LeakyBucket) Quota() (int, time.Duration) {
	_, window := b.limit().Quota()
	return b.Capacity, window
}

func (b LeakyBucket) String() string {
	return fmt.Sprintf("%g/%v leaky bucket, capacity %d", b.Rate, b.limit().period(), b.Capacity)
}

func (LeakyBucket) isPolicy() {}

func (b LeakyBucket) kind() kind {
	if b.limit().fine() {
		return kindLF
	}
	return kindLB
}

func (b LeakyBucket) args() [3]int64 { return b.limit().args() }

// share is Rate/hosts and Capacity/hosts, at least 1, over the same Period.
func (b LeakyBucket) share(hosts int) algo {
	b.Rate /= float64(hosts)
	b.Capacity = max(1, b.Capacity/hosts)
	return b
}

func (b LeakyBucket) open(st memState, now, cool int64) module {
	if l := b.limit(); l.fine() {
		return openFine(st, now, fineTicks(l.exactInterval()), int64(b.Capacity), cool, true)
	}
	return &lbModule{tatModule: openTAT(st, now, b.interval(), cool), capacity: int64(b.Capacity)}
}

// lbModule is lua/lb.lua in Go.
type lbModule struct {
	tatModule
	capacity int64
}

func (m *lbModule) tail(now int64, n int, maxWait int64) (int64, bool, int64) {
	ahead := m.tat - now
	if over := ahead + int64(n)*m.t - m.capacity*m.t; over > 0 {
		if maxWait < 0 || ahead <= maxWait {
			return 0, false, over
		}
		return 0, false, ahead
	}
	return m.tat, true, 0
}

func (m *lbModule) figures(now int64) (int, int64) {
	ahead := m.tat - now
	return int(max(0, m.capacity-ceilDiv(ahead, m.t))), ahead
}

func (m *lbModule) rollback(now int64, n int, handle int64, hs *holes) {
	m.rollbackTo(m, handle, max(now, m.cool), hs)
}

func (m *lbModule) hold(_, till int64) { m.tat = max(m.tat, till) }

func (m *lbModule) next(at int64, n int) int64 { return at + int64(n)*m.t }
