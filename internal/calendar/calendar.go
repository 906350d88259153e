// Package calendar computes the windows of calendar quotas: days, ISO weeks
// and months in a time zone, with their real lengths (a day of 23 or 25 hours
// across a daylight-saving change, a month of 28 to 31 days).
package calendar

import (
	"fmt"
	"time"
)

// Unit is a calendar window: a day, an ISO week (from Monday 00:00) or a
// month (from the 1st, 00:00), each in a zone.
type Unit string

const (
	Day   Unit = "day"
	Week  Unit = "week"
	Month Unit = "month"
)

// Parse reads a unit's name: day, week or month (or days, weeks, months).
func Parse(s string) (Unit, error) {
	switch s {
	case "day", "days":
		return Day, nil
	case "week", "weeks":
		return Week, nil
	case "month", "months":
		return Month, nil
	}
	return "", fmt.Errorf("calendar unit %q is not day, week or month", s)
}

// Valid reports whether u is Day, Week or Month.
func (u Unit) Valid() bool { return u == Day || u == Week || u == Month }

// Nominal is u's usual length (a day 24 h, a week 7 days, a month 30 days),
// for figures that need one duration (an HTTP RateLimit-Policy header).
func (u Unit) Nominal() time.Duration {
	switch u {
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 30 * 24 * time.Hour
	}
	return 24 * time.Hour
}

// Noun is the window of now in words: today, this week, this month.
func (u Unit) Noun() string {
	switch u {
	case Week:
		return "this week"
	case Month:
		return "this month"
	}
	return "today"
}

// Start is the start of the window of u in loc (nil: UTC) that holds t.
func Start(u Unit, t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := t.In(loc).Date()
	switch u {
	case Week:
		wd := int(time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday())
		d -= (wd + 6) % 7 // back to Monday
	case Month:
		d = 1
	}
	s := midnight(y, m, d, loc)
	if s.After(t) { // t is in the gap of a midnight that does not exist, resolved forward
		return Start(u, s.Add(-time.Nanosecond), loc)
	}
	return s
}

// Next is the start of the window of u in loc after the one that starts at
// start (a value Start returned).
func Next(u Unit, start time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	// the local date of the window's start (at noon: a start moved forward
	// by a gap is still on its day)
	y, m, d := start.In(loc).Add(time.Hour).Date()
	switch u {
	case Week:
		d += 7
	case Month:
		m, d = m+1, 1
	default:
		d++
	}
	return midnight(y, m, d, loc)
}

// midnight is the first instant of local date y-m-d in loc. time.Date
// resolves a wall time that does not exist (a zone that moves its clocks at
// 00:00) to one on either side of the gap; the day starts where the gap ends.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	s := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if sy, sm, sd := s.Date(); time.Date(sy, sm, sd, 0, 0, 0, 0, time.UTC).Before(want) {
		_, end := s.ZoneBounds() // s is before the gap: the day starts at the transition
		if !end.IsZero() {
			s = end
		}
	}
	return s
}

// Bounds are the starts of the window of u in loc that holds t, of the next
// one and of the one after: the three instants a store needs to count a
// window and book into the next.
func Bounds(u Unit, t time.Time, loc *time.Location) [3]time.Time {
	b0 := Start(u, t, loc)
	b1 := Next(u, b0, loc)
	return [3]time.Time{b0, b1, Next(u, b1, loc)}
}
