package limitspec

import (
	"fmt"
	"strconv"
	"strings"
)

// The priority options: priority=on|off, priority-floor=PCT
// (workers.Policy.Priorities and PriorityFloor; docs/priorities.md).
const (
	optPriority      = "priority"
	optPriorityFloor = "priority-floor"
	// minPriorityFloor and maxPriorityFloor bound priority-floor=, in percent.
	minPriorityFloor = 0.1
	maxPriorityFloor = 50
)

// priorities is what a spec says about priorities: priority= if given, and
// priority-floor= (a fraction, 0 if not given).
type priorities struct {
	set   bool // priority= was given
	on    bool
	floor float64
}

// parsePriorityFloor reads priority-floor='s value: a percentage, "5" or "5%".
func parsePriorityFloor(v string) (float64, error) {
	num := strings.TrimSpace(strings.TrimSuffix(v, "%"))
	p, err := strconv.ParseFloat(num, 64)
	if err != nil || !isDecimal(num) || p < minPriorityFloor || p > maxPriorityFloor {
		return 0, invalidf("priority-floor %s is not a percentage from %g to %g (the rate the lower priorities keep, e.g. 5)",
			quote(v), float64(minPriorityFloor), float64(maxPriorityFloor))
	}
	return p / 100, nil
}

// apply sets sp.Priorities and sp.PriorityFloor from pr, once sp.Fair is
// known: on by default with fair shares (the share is there already), else
// off unless priority=on or priority-floor= is given.
func (pr priorities) apply(sp *Spec) error {
	switch {
	case pr.set && !pr.on && pr.floor != 0:
		return invalidf("priority-floor needs priority=on (leave out priority=off)")
	case pr.set:
		sp.Priorities = pr.on
	default:
		sp.Priorities = sp.Fair || pr.floor != 0
	}
	sp.PriorityFloor = pr.floor
	return nil
}

// validatePriorities checks the priority fields of s.
func validatePriorities(s Spec) error {
	switch f := s.PriorityFloor * 100; {
	case f != 0 && !s.Priorities:
		return invalidf("priority-floor needs priority=on (leave out priority=off)")
	case f != 0 && !(f >= minPriorityFloor-1e-9 && f <= maxPriorityFloor+1e-9):
		return invalidf("priority-floor %g%% is not from %g to %g", f, float64(minPriorityFloor), float64(maxPriorityFloor))
	}
	return nil
}

// writePriorities writes the priority options of s that differ from the default.
func writePriorities(b *strings.Builder, s Spec) {
	switch {
	case s.Priorities && !s.Fair && s.PriorityFloor == 0:
		fmt.Fprintf(b, ",%s=on", optPriority)
	case !s.Priorities && s.Fair:
		fmt.Fprintf(b, ",%s=off", optPriority)
	}
	if s.PriorityFloor != 0 {
		fmt.Fprintf(b, ",%s=%s", optPriorityFloor, strconv.FormatFloat(s.PriorityFloor*100, 'f', -1, 64))
	}
}
