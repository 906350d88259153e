package limitspec

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/throttle"
)

// The in-flight option: in-flight=N (at most N jobs at once, fleet-wide),
// or in-flight=auto, auto:CEIL or auto:FLOOR-CEIL (a bound that follows
// the upstream's latency, from FLOOR, 1 if not given, to CEIL, 1000 if not
// given: throttle.Concurrency.Auto). A limits file's "in_flight" is a
// number or one of those strings.

// flightAuto is in-flight's word for an automatic bound.
const flightAuto = "auto"

// flight is what a spec says about in-flight.
type flight struct {
	max, floor int
	auto       bool
}

// parseFlight reads in-flight's value.
func parseFlight(s string) (flight, error) {
	rest, auto := strings.CutPrefix(s, flightAuto)
	if !auto {
		n, err := parseCount(optFlight, s)
		return flight{max: n}, err
	}
	f := flight{auto: true}
	if rest == "" {
		return f, nil
	}
	bounds, ok := strings.CutPrefix(rest, ":")
	if !ok || bounds == "" {
		return f, invalidf("in-flight %s: want N, auto, auto:CEIL or auto:FLOOR-CEIL", quote(s))
	}
	var err error
	if lo, hi, two := strings.Cut(bounds, "-"); two {
		if f.floor, err = parseCount("in-flight floor", lo); err != nil {
			return f, err
		}
		bounds = hi
	}
	if f.max, err = parseCount("in-flight ceiling", bounds); err != nil {
		return f, err
	}
	if f.floor > f.max {
		return f, invalidf("in-flight %s: the floor %d is above the ceiling %d", quote(s), f.floor, f.max)
	}
	return f, nil
}

// flightValue is a limits file's "in_flight": a number, or "auto…".
type flightValue struct{ flight }

func (v *flightValue) UnmarshalJSON(b []byte) error {
	var n int
	if json.Unmarshal(b, &n) == nil {
		v.flight = flight{max: n} // checked with the entry's type (file.go)
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil && strings.HasPrefix(s, flightAuto) {
		f, err := parseFlight(s)
		v.flight = f
		return err
	}
	return invalidf(`"in_flight" %s: want a number, "auto", "auto:CEIL" or "auto:FLOOR-CEIL"`, b)
}

// validateFlight checks s's in-flight bound as the worker will use it.
func validateFlight(s Spec) error {
	switch {
	case s.InFlight < 0:
		return invalidf("in-flight %d must not be negative", s.InFlight)
	case s.InFlightFloor != 0 && !s.InFlightAuto:
		return invalidf("an in-flight floor %d needs in-flight=auto", s.InFlightFloor)
	case s.InFlight > 0 || s.InFlightAuto:
		c := throttle.Concurrency{Max: s.InFlight, Auto: s.InFlightAuto, Floor: s.InFlightFloor}
		if err := c.Validate(); err != nil {
			return invalidf("in-flight: %s", reason(err))
		}
	}
	return nil
}

// writeFlight writes s's in-flight option, if it has one, as a spec says it.
func writeFlight(b *strings.Builder, s Spec) {
	switch {
	case s.InFlightAuto && s.InFlightFloor > 0:
		fmt.Fprintf(b, ",%s=%s:%d-%d", optFlight, flightAuto, s.InFlightFloor, s.InFlight)
	case s.InFlightAuto && s.InFlight > 0:
		fmt.Fprintf(b, ",%s=%s:%d", optFlight, flightAuto, s.InFlight)
	case s.InFlightAuto:
		fmt.Fprintf(b, ",%s=%s", optFlight, flightAuto)
	case s.InFlight != 0:
		fmt.Fprintf(b, ",%s=%d", optFlight, s.InFlight)
	}
}
