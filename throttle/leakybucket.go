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
// faster than one token per nanosecond (T is Period/Rate to the picosecond,
// as for Limit: turns are booked exactly, and each slot is its turn rounded
// up to a whole microsecond), and Capacity at least 1. The zero value is not
// valid.
type LeakyBucket struct {
	Rate     float64       // tokens per Period
	Period   time.Duration // 0 means time.Second
	Capacity int           // the most tokens in the bucket: going through or waiting their turn
}

// limit is the token bucket with the same pace, for its interval arithmetic.
func (b LeakyBucket) limit() Limit { return Limit{Rate: b.Rate, Period: b.Period, Burst: b.Capacity} }

// validate reports why b cannot be used, or nil (see Validate).
func (b LeakyBucket) validate() error {
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
	}
	return checkPace(l.exactInterval(), b.Capacity, "capacity", "drain", l)
}

func (b LeakyBucket) check(n int) error {
	if err := b.validate(); err != nil {
		return err
	}
	return checkN(n, b.Capacity, "capacity")
}

// quota is Capacity tokens, and the time a full bucket takes to drain.
func (b LeakyBucket) quota() (int, time.Duration) {
	_, window := b.limit().quota()
	return b.Capacity, window
}

func (b LeakyBucket) String() string {
	return fmt.Sprintf("%g/%v leaky bucket, capacity %d", b.Rate, b.limit().period(), b.Capacity)
}

func (LeakyBucket) isPolicy() {}

func (LeakyBucket) kind() kind { return kindLB }

func (b LeakyBucket) args() [4]int64 { return b.limit().args() }

// share is Rate/hosts and Capacity/hosts, at least 1, over the same Period.
func (b LeakyBucket) share(hosts int) algo {
	b.Rate /= float64(hosts)
	b.Capacity = max(1, b.Capacity/hosts)
	return b
}

func (b LeakyBucket) open(st memState, now, cool int64) module {
	return &lbModule{tatModule: openTAT(st, now, b.limit().pace(), cool), capacity: int64(b.Capacity)}
}

// lbModule is lua/lb.lua in Go.
type lbModule struct {
	tatModule
	capacity int64
}

// tail: the turn is the TAT; n more fit if TAT − now + n·T <= capacity·T.
func (m *lbModule) tail(now int64, n int, maxWait int64) (int64, bool, int64) {
	ahead := m.tat.sub(whole(now))
	if over := ahead.sub(m.t.times(m.capacity - int64(n))); whole(0).less(over) {
		if maxWait < 0 || ahead.ceil() <= maxWait {
			return 0, false, over.ceil()
		}
		return 0, false, ahead.ceil()
	}
	return m.tat.ceil(), true, 0
}

func (m *lbModule) figures(now int64) (int, int64) { return m.figuresOf(now, m.capacity) }

func (m *lbModule) rollback(now int64, n int, handle pico, hs *holes) {
	m.rollbackTo(m, handle, whole(max(now, m.cool)), hs)
}

// settle (settleTo): every turn lies at least T behind the TAT its booking
// leaves, whichever call booked it, until one is settled (hs.near).
func (m *lbModule) settle(now int64, n, used int, handle pico, slot int64, hs *holes) {
	m.settleTo(m, now, n, used, handle, slot, 1, whole(max(now, m.cool)), hs)
}

// hold: the next turn no sooner than till.
func (m *lbModule) hold(_, till int64) { m.tat = maxPico(m.tat, whole(till)) }

// fromHole: the rest of the turn starts n·T after the instant the grant
// takes, at the slot that rounds up to.
func (m *lbModule) fromHole(h *hole, n int) pico {
	at := m.instant(h)
	h.handle = at.add(m.t.times(int64(n)))
	h.at = h.handle.ceil()
	h.till = m.holeTill(h.at)
	return at
}
