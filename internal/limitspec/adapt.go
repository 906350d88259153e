package limitspec

import (
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// The adaptive options: adapt=on|off|key, floor=RATE/UNIT.
const (
	optAdapt = "adapt"
	optFloor = "floor"
)

// adaptive is what a spec says about adapting: adapt= if given, and floor=.
type adaptive struct {
	set    bool // adapt= was given
	on     bool
	key    bool    // adapt=key: the upstream's signals go to each key's own bucket (workers.Policy.AdaptKey)
	floor  float64 // as written, per floorP
	floorP time.Duration
}

// adaptKey is the value of adapt= for an upstream that gives each key its
// own quota.
const adaptKey = "key"

// parseAdapt reads adapt='s value: on, off or key (on, for each key).
func parseAdapt(v string) (on, key bool, err error) {
	if v == adaptKey {
		return true, true, nil
	}
	on, err = parseOnOff(optAdapt, v)
	if err != nil {
		err = invalidf("%s %s: want on, off or %s", optAdapt, quote(v), adaptKey)
	}
	return on, false, err
}

// adaptValue is a limits file's "adapt": true, false, or "key".
type adaptValue struct{ on, key bool }

func (v *adaptValue) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &v.on) == nil {
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil && s == adaptKey {
		v.on, v.key = true, true
		return nil
	}
	return invalidf(`"adapt" %s: want true, false or "key"`, b)
}

// adaptTarget is the limit of s that adapts to the upstream: with a key and
// global=, the global one, since the upstream's limit is the account every
// key shares, unless adapt=key says each key has its own quota upstream;
// else the type's first limit, its own bucket.
func adaptTarget(s Spec) throttle.Policy {
	if s.KeyTemplate != "" && s.Global != nil && !s.AdaptKey {
		return s.Global
	}
	return s.All()[0].Limit
}

// adaptsByDefault reports whether a spec under p adapts unless it says
// adapt=off: a token bucket that can be an Adaptive's ceiling (any valid one).
func adaptsByDefault(p throttle.Policy) bool {
	l, isBucket := p.(throttle.Limit)
	return isBucket && throttle.Validate(throttle.Adaptive{Ceiling: l}) == nil
}

// apply sets sp.Adapt, sp.AdaptKey and sp.AdaptFloor from ad, once sp's
// limits and global= are built: the limit that adapts (adaptTarget), the
// type's own bucket or the global one, does so by default when it is a token
// bucket, which alone can adapt; a floor needs adapt on and is converted to
// that limit's period.
func (ad adaptive) apply(sp *Spec) error {
	if ad.key && (sp.KeyTemplate == "" || sp.Global == nil) {
		return invalidf("adapt=key needs key= and global= (it keeps the upstream's signals on each key's own bucket instead of the global one)")
	}
	sp.AdaptKey = ad.key
	target := adaptTarget(*sp)
	l, isBucket := target.(throttle.Limit)
	switch {
	case ad.set && ad.on && !isBucket:
		return invalidf("adapt does not apply to policy %s (adapt is for policy %s)", PolicyName(target), TokenBucket)
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
