package throttle

import (
	"math"
	"strconv"
)

// adaptState is the effective rate of an adaptive bucket, as lua/adapt.lua
// keeps it in Redis: the rate per period, the µs of its last change and why,
// and the successes counted since that change (from okAt).
type adaptState struct {
	rate  float64
	at    int64
	why   string
	ok    int64
	okAt  int64
	known bool
}

// adaptOp is one event: read, refused, ok (n successes), announce (rate n).
type adaptOp struct {
	op                 string
	ceiling, floor, n  float64
	period, hold, step int64 // µs
	alpha, beta        float64
	ttlMillis          int64
}

// apply is lua/adapt.lua in Go, for the MemoryStore: it moves s by op at now
// and reports whether s changed (and must be stored).
func (s *adaptState) apply(o adaptOp, now int64) bool {
	if !s.known {
		*s = adaptState{rate: o.ceiling, at: now, why: adaptCeiling, okAt: now, known: true}
	}
	s.rate = math.Min(math.Max(s.rate, o.floor), o.ceiling)
	changed := false
	set := func(rate float64, why string) {
		s.rate, s.at, s.why, s.ok, s.okAt = math.Min(math.Max(rate, o.floor), o.ceiling), now, why, 0, now
		changed = true
	}
	switch o.op {
	case "refused":
		if !(s.why == adaptRefused && now-s.at < o.hold) {
			next := s.rate * o.beta
			if s.ok >= 3 && now-s.okAt >= o.period/2 {
				next = math.Min(next, 0.95*float64(s.ok)*float64(o.period)/float64(now-s.okAt))
			}
			set(next, adaptRefused)
		}
	case "ok":
		s.ok += int64(o.n)
		if s.rate < o.ceiling && s.why != adaptHeader && now-s.at >= o.step {
			set(s.rate+o.alpha*o.ceiling*math.Floor(float64(now-s.at)/float64(o.step)), adaptRecovery)
		} else {
			changed = true
		}
	case "announce":
		set(o.n, adaptHeader)
	}
	return changed
}

// args are op's ARGV after now, for lua/adapt.lua.
func (o adaptOp) args() []any {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []any{o.op, f(o.ceiling), f(o.floor), f(o.n), o.period, o.hold, o.step, f(o.alpha), f(o.beta), o.ttlMillis}
}
