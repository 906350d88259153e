package limitspec

import (
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// The adaptive options: adapt=on|off, floor=RATE/UNIT.
const (
	optAdapt = "adapt"
	optFloor = "floor"
)

// adaptive is what a spec says about adapting: adapt= if given, and floor=.
type adaptive struct {
	set    bool // adapt= was given
	on     bool
	floor  float64 // as written, per floorP
	floorP time.Duration
}

// parseAdapt reads adapt='s value.
func parseAdapt(v string) (bool, error) { return parseOnOff(optAdapt, v) }

// adaptsByDefault reports whether a spec under p adapts unless it says
// adapt=off: a token bucket that can be an Adaptive's ceiling (any valid one).
func adaptsByDefault(p throttle.Policy) bool {
	l, isBucket := p.(throttle.Limit)
	return isBucket && throttle.Validate(throttle.Adaptive{Ceiling: l}) == nil
}

// apply sets sp.Adapt and sp.AdaptFloor from ad, once sp.Limit is built: on by
// default for a token bucket, which alone can adapt; a floor needs adapt on
// and is converted to the limit's period.
func (ad adaptive) apply(sp *Spec) error {
	l, isBucket := sp.Limit.(throttle.Limit)
	switch {
	case ad.set && ad.on && !isBucket:
		return invalidf("adapt does not apply to policy %s (adapt is for policy %s)", PolicyName(sp.Limit), TokenBucket)
	case ad.set && ad.on && !adaptsByDefault(l):
		return invalidf("adapt=on does not apply to this limit (leave adapt out)")
	case ad.set:
		sp.Adapt = ad.on
	default:
		sp.Adapt = adaptsByDefault(l)
	}
	if ad.floorP == 0 {
		return nil
	}
	if !sp.Adapt {
		return invalidf("floor needs adapt=on (the least rate an adaptive limit falls to)")
	}
	sp.AdaptFloor = ad.floor / ad.floorP.Seconds() * l.Period.Seconds()
	if sp.AdaptFloor > l.Rate {
		return invalidf("floor is above the rate: the least rate must not exceed the limit")
	}
	return nil
}
