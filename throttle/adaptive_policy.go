package throttle

import (
	"fmt"
	"math"
	"time"
)

// Adaptive is a Policy too: Acquire, Reserve, TryAcquire (and Peek and
// Cooldown) take its tokens at the fleet's effective rate of the moment,
// read by the same store call from the state beside the bucket, so that a
// rate lowered by any process holds for every process's next call. Several
// buckets of a call may be Adaptive (an LLM API's requests and tokens), each
// taken at its own effective rate.
func (Adaptive) isPolicy() {}

// quota is the ceiling's.
func (a Adaptive) quota() (int, time.Duration) { return a.Ceiling.quota() }

func (a Adaptive) String() string {
	return fmt.Sprintf("adaptive %v, floor %g", a.Ceiling, a.floor())
}

func (a Adaptive) check(n int) error {
	if err := a.validate(); err != nil {
		return err
	}
	return checkN(n, a.Ceiling.Burst, "burst")
}

func (Adaptive) kind() kind { return kindTB }

// args are the ceiling's T and burst, and the period in µs, which marks the
// bucket adaptive for lua/tb.lua.
func (a Adaptive) args() [4]int64 {
	p := a.Ceiling.args()
	p[2] = int64(a.Ceiling.period() / time.Microsecond)
	return p
}

func (a Adaptive) share(hosts int) algo {
	a.Ceiling = a.Ceiling.share(hosts).(Limit)
	a.Floor /= float64(hosts)
	return a
}

// open is the bucket at its ceiling; a memory store opens it at the
// effective rate (at) instead.
func (a Adaptive) open(st memState, now, cool int64) module { return a.Ceiling.open(st, now, cool) }

// at is the token bucket at effective rate r, as lua/int.lua's atrate
// computes it: T is the period (in whole µs) over r, to the picosecond
// (paceOf), never under the ceiling's; the burst shrinks with it, burst·T/T'
// rounded down, at least 1. r <= 0 means the ceiling.
func (a Adaptive) at(r float64) fixedTB {
	t, burst := a.Ceiling.pace(), int64(a.Ceiling.Burst)
	per := int64(a.Ceiling.period() / time.Microsecond)
	if r > 0 {
		if x := paceOf(float64(per) / r); t.less(x) {
			burst = max(1, floorDivPico(t.times(burst), x))
			t = x
		}
	}
	return fixedTB{t: t, burst: burst, per: per}
}

// limitAt is at(r) as a Limit: the rate r (at most the ceiling's) and the
// burst at it.
func (a Adaptive) limitAt(r float64) Limit {
	l := a.Ceiling
	if r < l.Rate {
		l.Rate, l.Burst = r, int(a.at(r).burst)
	}
	return l
}

// fixedTB is a token bucket given by its T and burst: an Adaptive bucket as
// one call took it, at the effective rate of that moment, so that a refund
// of the call gives back exactly what it took (a Reservation's request
// holds it in place of the Adaptive). per is the period in µs, for Rate.
type fixedTB struct {
	t          pico
	burst, per int64
}

func (fixedTB) isPolicy()           {}
func (fixedTB) validate() error     { return nil }
func (fixedTB) kind() kind          { return kindTB }
func (f fixedTB) share(int) algo    { return f }
func (f fixedTB) args() [4]int64    { return [4]int64{f.t.us, f.burst, 0, f.t.ps} }
func (f fixedTB) check(n int) error { return checkN(n, int(f.burst), "burst") }

func (f fixedTB) quota() (int, time.Duration) { return int(f.burst), micros(f.t.times(f.burst).ceil()) }

func (f fixedTB) String() string {
	return fmt.Sprintf("%g/%v burst %d", f.rate(), micros(f.per), f.burst)
}

// rate is tokens per period.
func (f fixedTB) rate() float64 {
	if f.t == (pico{}) {
		return 0
	}
	return math.Round(float64(f.per)/f.t.float()*1e6) / 1e6
}

func (f fixedTB) open(st memState, now, cool int64) module {
	m := openTB(st, now, f.t, f.burst, cool)
	return &m
}
