package throttle

import "math"

// pico is a time or a length of time of a token or leaky bucket, exactly: us
// microseconds and ps picoseconds, 0 <= ps < psPerUs. A bucket's T (Period
// over Rate) and its TAT are picos, so a bucket keeps its rate exactly from
// one token a year to 10⁹ a second: every sum and product stays an integer
// below 2^53, exact in Lua's doubles (lua/int.lua keeps the same pairs) and
// in int64. Slots handed to callers are whole µs: a booked instant rounded
// up (ceil), never early.
type pico struct{ us, ps int64 }

// psPerUs is picoseconds per microsecond.
const psPerUs = 1_000_000

// whole is us µs as a pico.
func whole(us int64) pico { return pico{us: us} }

// norm is us µs plus ps picoseconds (|ps| < 2^50) with ps carried into us.
func norm(us, ps int64) pico {
	c := ps / psPerUs
	if ps%psPerUs < 0 {
		c--
	}
	return pico{us: us + c, ps: ps - c*psPerUs}
}

func (a pico) add(b pico) pico { return norm(a.us+b.us, a.ps+b.ps) }
func (a pico) sub(b pico) pico { return norm(a.us-b.us, a.ps-b.ps) }

// times is n·a, n >= 0 (n·ps stays below 2^50: n is at most a burst).
func (a pico) times(n int64) pico { return norm(n*a.us, n*a.ps) }

// subTimes is a − n·b, as a.sub(b.times(n)) in one carry.
func (a pico) subTimes(b pico, n int64) pico { return norm(a.us-n*b.us, a.ps-n*b.ps) }

func (a pico) less(b pico) bool { return a.us < b.us || (a.us == b.us && a.ps < b.ps) }

func maxPico(a, b pico) pico {
	if a.less(b) {
		return b
	}
	return a
}

// ceil is a rounded up to a whole µs: the slot of an instant.
func (a pico) ceil() int64 {
	if a.ps > 0 {
		return a.us + 1
	}
	return a.us
}

// before1 is the earliest instant that rounds up to slot s: a booking at s
// counts from there, so that a bucket alone never loses time to rounding.
func before1(s int64) pico { return pico{us: s - 1, ps: 1} }

// floorDivPico is ⌊a/b⌋ for a >= 0 and b > 0 whose quotient is below 2^31
// (lua/int.lua's pdiv): in int64 picoseconds when both fit, else a float
// estimate corrected by exact products.
func floorDivPico(a, b pico) int64 {
	if a.us < fitsPS && b.us < fitsPS {
		return (a.us*psPerUs + a.ps) / (b.us*psPerUs + b.ps)
	}
	q := int64(math.Floor((float64(a.us) + float64(a.ps)/psPerUs) / (float64(b.us) + float64(b.ps)/psPerUs)))
	q = max(q, 0)
	if !a.less(b.times(q + 1)) {
		return q + 1
	}
	if a.less(b.times(q)) {
		return q - 1
	}
	return q
}

// fitsPS bounds the µs of a pico whose picoseconds fit in an int64.
const fitsPS = 1 << 43

// ceilDivPico is ⌈a/b⌉ for a >= 0 and b > 0 whose quotient is below 2^31.
func ceilDivPico(a, b pico) int64 {
	if a.us < fitsPS && b.us < fitsPS {
		x, y := a.us*psPerUs+a.ps, b.us*psPerUs+b.ps
		return (x + y - 1) / y
	}
	q := floorDivPico(a, b)
	if b.times(q) != a {
		q++
	}
	return q
}

// paceOf is T for an interval of x µs: whole µs and picoseconds, the
// picoseconds rounded up (never faster than asked), but a number within
// 1e-9·x of a whole one is that one, so float noise never costs a tick.
// lua/int.lua's pace is the same, for an Adaptive bucket's effective rate.
func paceOf(x float64) pico {
	w := math.Floor(x)
	p := (x - w) * psPerUs
	r := math.Floor(p + 0.5)
	if math.Abs(p-r) > 1e-9*x {
		r = math.Ceil(p)
	}
	if r >= psPerUs {
		return pico{us: int64(w) + 1}
	}
	return pico{us: int64(w), ps: int64(r)}
}

// float is a in µs, approximately (for figures that are floats anyway).
func (a pico) float() float64 { return float64(a.us) + float64(a.ps)/psPerUs }
