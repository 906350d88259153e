package limitspec

import (
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/calendar"
	"github.com/sluicehq/sluice/throttle"
)

// The policies a spec names with policy=, as throttle has them.
const (
	TokenBucket   = "token-bucket"   // throttle.Limit: RATE/UNIT on average, bursts up to burst (the default)
	FixedWindow   = "fixed-window"   // throttle.FixedWindow: at most RATE per calendar UNIT
	SlidingLog    = "sliding-log"    // throttle.SlidingLog: at most RATE in any span of UNIT, exactly
	SlidingWindow = "sliding-window" // throttle.SlidingWindow: about RATE in any span of UNIT, in constant memory
	LeakyBucket   = "leaky-bucket"   // throttle.LeakyBucket: an even pace, capacity bounds the queue
)

// defaultSlots is a sliding window's slots when the spec gives none, as throttle's default.
const defaultSlots = 10

// policyNames lists the policies in the order errors name them.
var policyNames = []string{TokenBucket, FixedWindow, SlidingLog, SlidingWindow, LeakyBucket}

// shape is what a spec says about its limit's policy, beyond RATE/UNIT: the
// policy's name and the options only some policies take (0: not given).
type shape struct {
	policy   string // "" means TokenBucket, or FixedWindow with a calendar unit
	burst    int    // token-bucket only
	slots    int    // sliding-window only
	capacity int    // leaky-bucket only

	cal  calendar.Unit  // a calendar unit: RATE/day, /week or /month (calendar.go)
	zone *time.Location // zone=, for a calendar unit; nil: UTC
	zset bool           // zone= was given
}

// policyOptions says which of the per-policy options each policy takes.
var policyOptions = map[string][]string{
	TokenBucket:   {optBurst},
	FixedWindow:   nil,
	SlidingLog:    nil,
	SlidingWindow: {optSlots},
	LeakyBucket:   {optCapacity},
}

// build makes the limit's policy from RATE/UNIT and the shape. For the
// window policies RATE/UNIT reads as Max per Window, so RATE must be whole.
// An option the chosen policy does not take is an error naming both.
func (sh shape) build(rate float64, period time.Duration) (throttle.Policy, error) {
	if sh.cal != "" {
		return sh.buildCalendar(rate)
	}
	if sh.zset {
		return nil, invalidf("zone is for a quota per day, week or month (RATE/day, RATE/week, RATE/month)")
	}
	name := sh.policy
	if name == "" {
		name = TokenBucket
	}
	takes, ok := policyOptions[name]
	if !ok {
		return nil, invalidf("unknown policy %s (want %s)", quote(name), strings.Join(policyNames, ", "))
	}
	for _, o := range []struct {
		name string
		set  bool
	}{{optBurst, sh.burst != 0}, {optSlots, sh.slots != 0}, {optCapacity, sh.capacity != 0}} {
		if o.set && !contains(takes, o.name) {
			return nil, invalidf("%s does not apply to policy %s (%s)", o.name, name, appliesTo(o.name))
		}
	}
	switch name {
	case TokenBucket:
		burst := sh.burst
		if burst == 0 {
			burst = DefaultBurst(rate, period)
		}
		return throttle.Limit{Rate: rate, Period: period, Burst: burst}, nil
	case LeakyBucket:
		capacity := sh.capacity
		if capacity == 0 {
			capacity = DefaultBurst(rate, period)
		}
		return throttle.LeakyBucket{Rate: rate, Period: period, Capacity: capacity}, nil
	}
	most := int(rate)
	if float64(most) != rate || rate > maxCount || math.IsInf(rate, 0) {
		return nil, invalidf("rate %v is not a whole number: with policy %s, RATE/UNIT is the most per UNIT", rate, name)
	}
	switch name {
	case FixedWindow:
		return throttle.FixedWindow{Max: most, Window: period}, nil
	case SlidingLog:
		return throttle.SlidingLog{Max: most, Window: period}, nil
	}
	slots := sh.slots
	if slots == 0 {
		slots = defaultSlots
	}
	return throttle.SlidingWindow{Max: most, Window: period, Slots: slots}, nil
}

// appliesTo says which policy takes an option, for errors.
func appliesTo(option string) string {
	for _, name := range policyNames {
		if contains(policyOptions[name], option) {
			return option + " is for policy " + name
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shapeOf is the shape that builds p, and p's RATE/UNIT: the inverse of build.
func shapeOf(p throttle.Policy) (sh shape, rate float64, period time.Duration) {
	switch p := p.(type) {
	case throttle.Limit:
		return shape{policy: TokenBucket, burst: p.Burst}, p.Rate, p.Period
	case throttle.LeakyBucket:
		return shape{policy: LeakyBucket, capacity: p.Capacity}, p.Rate, p.Period
	case throttle.FixedWindow:
		if p.Calendar != "" {
			u := calendar.Unit(p.Calendar)
			return shape{policy: FixedWindow, cal: u, zone: p.Zone, zset: zoneName(p.Zone) != ""}, float64(p.Max), u.Nominal()
		}
		return shape{policy: FixedWindow}, float64(p.Max), p.Window
	case throttle.SlidingLog:
		return shape{policy: SlidingLog}, float64(p.Max), p.Window
	case throttle.SlidingWindow:
		slots := p.Slots
		if slots == 0 {
			slots = defaultSlots
		}
		return shape{policy: SlidingWindow, slots: slots}, float64(p.Max), p.Window
	}
	return shape{}, 0, 0
}

// most is what a policy grants at once, and what that figure is called.
func most(p throttle.Policy) (int, string) {
	n, _ := throttle.QuotaOf(p)
	switch p.(type) {
	case throttle.Limit:
		return n, optBurst
	case throttle.LeakyBucket:
		return n, optCapacity
	}
	return n, "max"
}

// validatePolicy checks p with throttle, keeping throttle's reason but not
// its package prefix.
func validatePolicy(what string, p throttle.Policy) error {
	if p == nil {
		return invalidf("%sno limit", what)
	}
	if err := throttle.Validate(p); err != nil {
		return invalidf("%s%s", what, reason(err))
	}
	return nil
}

// reason is throttle's error without its package prefix.
func reason(err error) string { return strings.TrimPrefix(err.Error(), "throttle: ") }

// RateOf is p's RATE/UNIT as a spec writes it: a token or leaky bucket's
// Rate per Period, a window policy's Max per Window (a calendar unit's
// nominal length: a day 24 h, a week 7 days, a month 30); (0, 0) for a
// policy a spec cannot name.
func RateOf(p throttle.Policy) (rate float64, period time.Duration) {
	_, rate, period = shapeOf(p)
	return rate, period
}

// PolicyName is the policy= name of p ("token-bucket", ...); "" for a
// policy a spec cannot name.
func PolicyName(p throttle.Policy) string {
	sh, _, period := shapeOf(p)
	switch {
	case period == 0:
		return ""
	case sh.policy == "":
		return TokenBucket
	}
	return sh.policy
}
