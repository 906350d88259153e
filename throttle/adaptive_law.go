package throttle

import (
	"math"
	"strconv"
)

// adaptState is the effective rate of an adaptive bucket, as lua/adapt.lua
// keeps it in Redis: the rate per period, the µs of its last change and why,
// the rate at the last refusal, and the successes counted since the last
// change between the first and the latest report (okAt, okLast).
type adaptState struct {
	rate   float64
	at     int64
	why    string
	peak   float64
	ok     int64
	okAt   int64
	okLast int64
	known  bool
}

// adaptOp is one event: read, refused, ok (n successes), announce (rate n).
type adaptOp struct {
	op                 string
	ceiling, floor, n  float64
	period, hold, step int64 // µs
	alpha, beta, gamma float64
	ttlMillis          int64
	quiet              int64 // µs: no increase so soon after a decrease
}

// apply is lua/adapt.lua in Go, for the memory store: it moves s by op at now
// and reports whether s changed (and must be stored).
func (s *adaptState) apply(o adaptOp, now int64) bool {
	if !s.known {
		*s = adaptState{rate: o.ceiling, at: now, why: adaptCold, known: true}
	}
	clamp := func(r float64) float64 { return math.Min(math.Max(r, o.floor), o.ceiling) }
	if s.why == adaptCeiling || s.why == adaptCold {
		s.rate = o.ceiling // at the ceiling: follow it if it moves
	}
	s.rate = clamp(s.rate)
	changed := false
	set := func(rate float64, why string) {
		s.rate, s.at, s.why, s.ok, s.okAt, s.okLast = clamp(rate), now, why, 0, 0, 0
		changed = true
	}
	switch o.op {
	case "refused":
		if !(s.why == adaptRefused && now-s.at < o.hold) {
			next := s.rate * o.beta
			ref := next
			if s.ok >= 3 && s.okLast-s.okAt >= o.period/2 {
				next = 0.9 * float64(s.ok) * float64(o.period) / float64(s.okLast-s.okAt)
				ref = math.Max(s.rate, 0.9*s.peak)
			}
			s.peak = ref
			set(math.Min(next, s.rate), adaptRefused)
		}
	case "ok":
		if s.okAt == 0 {
			s.okAt = now
		} else {
			s.ok += int64(o.n)
		}
		s.okLast = now
		changed = true
		steps := (now - s.at) / o.step
		if s.rate < o.ceiling && s.why != adaptHeader && steps >= 1 && !(s.why == adaptRefused && now-s.at < o.quiet) {
			target := s.peak
			if target <= 0 {
				target = o.ceiling
			}
			next := s.rate
			for range steps {
				if next < 0.8*target {
					next = math.Min(next*o.gamma, 0.8*target)
				} else {
					next += o.alpha * o.ceiling
				}
			}
			ok, okAt, okLast := s.ok, s.okAt, s.okLast
			if next >= o.ceiling {
				set(o.ceiling, adaptCeiling)
			} else {
				set(next, adaptRecovery)
			}
			s.ok, s.okAt, s.okLast = ok, okAt, okLast
		}
	case "announce":
		// A rate lower than one announced within the hold is the same quota
		// read less closely (see lua/adapt.lua), not a drop.
		// One within 5 % under it confirms it: the hold runs from it.
		if !(s.why == adaptHeader && o.n < s.rate && now-s.at < o.hold) {
			set(o.n, adaptHeader)
		} else if o.n >= 0.95*s.rate {
			s.at, changed = now, true
		}
	}
	if changed && s.why == adaptCold {
		s.why = adaptCeiling // answered: no longer cold
	}
	return changed
}

// args are op's ARGV after now, for lua/adapt.lua.
func (o adaptOp) args() []any {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []any{o.op, f(o.ceiling), f(o.floor), f(o.n), o.period, o.hold, o.step, f(o.alpha), f(o.beta), o.ttlMillis, o.quiet, f(o.gamma)}
}
