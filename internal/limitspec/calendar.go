package limitspec

import (
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/calendar"
	"github.com/sluicehq/sluice/throttle"
)

// This file is a limit's calendar unit: RATE/day, RATE/week (ISO, from
// Monday 00:00) or RATE/month (from the 1st, 00:00), in the zone of zone=
// (an IANA name; UTC if left out). A calendar unit is a fixed window
// (throttle.FixedWindow with Calendar and Zone): with no policy= it is
// implied, and any other policy is refused, as it has no calendar meaning.

const optZone = "zone"

// parseQuota parses a limit's RATE/UNIT, where UNIT may be a calendar unit
// (cal, with period its nominal length) as well as s, m or h.
func parseQuota(s string) (rate float64, period time.Duration, cal calendar.Unit, err error) {
	if num, unit, ok := strings.Cut(s, "/"); ok {
		if u, cerr := calendar.Parse(strings.ToLower(strings.TrimSpace(unit))); cerr == nil {
			rate, _, err = parseRate(strings.TrimSpace(num) + "/s")
			return rate, u.Nominal(), u, err
		}
	}
	rate, period, err = parseRate(s)
	if err != nil && strings.Contains(err.Error(), "unknown unit") {
		_, unit, _ := strings.Cut(s, "/")
		err = invalidf("unknown unit %s (want s, m, h, day, week or month)", quote(strings.TrimSpace(unit)))
	}
	return rate, period, "", err
}

// parseZone reads zone=: an IANA time zone name, such as America/Los_Angeles;
// nil for UTC.
func parseZone(v string) (*time.Location, error) {
	switch v {
	case "":
		return nil, invalidf("zone is empty (leave it out for UTC)")
	case "Local":
		return nil, invalidf("zone Local is each host's own: name the zone, such as America/Los_Angeles")
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		return nil, invalidf("unknown zone %s (want an IANA time zone name, such as America/Los_Angeles or UTC)", quote(v))
	}
	if loc == time.UTC {
		return nil, nil // one spelling of UTC, so that equal specs are equal policies
	}
	return loc, nil
}

// buildCalendar is shape.build for a calendar unit: a FixedWindow of rate,
// a whole number, per cal in the shape's zone.
func (sh shape) buildCalendar(rate float64) (throttle.Policy, error) {
	if sh.policy != "" && sh.policy != FixedWindow {
		return nil, invalidf("policy %s has no calendar meaning: a quota per %s is a fixed window (policy=%s, or leave policy= out)", sh.policy, sh.cal, FixedWindow)
	}
	most := int(rate)
	if float64(most) != rate || rate > maxCount {
		return nil, invalidf("rate %v is not a whole number: a quota per %s is the most per %s", rate, sh.cal, sh.cal)
	}
	for _, o := range []struct {
		name string
		set  bool
	}{{optBurst, sh.burst != 0}, {optSlots, sh.slots != 0}, {optCapacity, sh.capacity != 0}} {
		if o.set {
			return nil, invalidf("%s does not apply to a quota per %s, a fixed window (%s)", o.name, sh.cal, appliesTo(o.name))
		}
	}
	return throttle.FixedWindow{Max: most, Calendar: string(sh.cal), Zone: sh.zone}, nil
}

// zoneName is how a spec writes loc: "" for UTC (left out).
func zoneName(loc *time.Location) string {
	if loc == nil || loc == time.UTC || loc.String() == "UTC" {
		return ""
	}
	return loc.String()
}
