package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/calendar"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// quotaView is a calendar quota's state (docs/quotas.md), as sluice limits
// and the dashboard show it: "1,234 of 2,000 today; resets 00:00
// America/Los_Angeles, in 5h12m".
type quotaView struct {
	Unit  string `json:"unit"` // day, week or month
	Zone  string `json:"zone"`
	Max   int    `json:"max"`
	Used  *int   `json:"used,omitempty"` // this window; absent with a bucket per key
	Reset string `json:"reset"`          // RFC 3339, in the zone
	// ResetInS is how long until the reset, in seconds.
	ResetInS float64 `json:"reset_in_s"`
	Text     string  `json:"text"`
}

// quotaOf is the view of calendar quota w, whose bucket has left of it
// (nil: a bucket per key, nothing to count), at now.
func quotaOf(w throttle.FixedWindow, left *int, now time.Time) *quotaView {
	zone := w.Zone
	if zone == nil {
		zone = time.UTC
	}
	u := calendar.Unit(w.Calendar)
	reset := calendar.Bounds(u, now, zone)[1]
	v := &quotaView{Unit: w.Calendar, Zone: zone.String(), Max: w.Max, Reset: rfc3339In(reset, zone), ResetInS: reset.Sub(now).Seconds()}
	var b strings.Builder
	if left != nil {
		used := max(w.Max-*left, 0)
		v.Used = &used
		fmt.Fprintf(&b, "%s of %s %s", thousands(used), thousands(w.Max), u.Noun())
	} else {
		fmt.Fprintf(&b, "%s per key %s", thousands(w.Max), u.Noun())
	}
	at := reset.In(zone).Format("15:04")
	if reset.Sub(now) > 24*time.Hour {
		at = reset.In(zone).Format("Mon 2 Jan 15:04")
	}
	fmt.Fprintf(&b, "; resets %s %s, in %s", at, zone, until(reset.Sub(now)))
	v.Text = b.String()
	return v
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// until writes a wait to the minute ("5h12m", "3d4h"), or in seconds under
// one.
func until(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d, 0).Seconds()))
	case d < 24*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if h == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// parkedOf says how many jobs of typ are parked until a calendar quota's
// reset, and until when (in zone): "12 parked until 00:00
// America/Los_Angeles"; "" if none, or if the queues' Redis cannot say.
func (f *fleet) parkedOf(ctx context.Context, typ string, zone *time.Location) (int, string) {
	n, last, err := workers.ParkedIn(ctx, f.qrdb, typ)
	if err != nil || n == 0 {
		return 0, ""
	}
	if zone == nil {
		zone = time.UTC
	}
	return n, rfc3339In(last, zone)
}

// rfc3339In writes t in RFC 3339 at zone's offset, or in UTC if that offset
// is not a whole minute (RFC 3339 cannot say it: some zones' old local mean
// times, a test's made-up zone).
func rfc3339In(t time.Time, zone *time.Location) string {
	if _, off := t.In(zone).Zone(); off%60 != 0 {
		return t.UTC().Format(time.RFC3339)
	}
	return t.In(zone).Format(time.RFC3339)
}

// parkedAt writes a parked job's due time (RFC 3339) as the quota line
// does: "00:00 America/Los_Angeles".
func parkedAt(rfc3339, zone string) string {
	t, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		return rfc3339
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	if time.Until(t) > 24*time.Hour {
		return t.Format("Mon 2 Jan 15:04 ") + zone
	}
	return t.Format("15:04 ") + zone
}

// calendarOf is p as a calendar quota, if it is one.
func calendarOf(p throttle.Policy) (throttle.FixedWindow, bool) {
	w, ok := p.(throttle.FixedWindow)
	return w, ok && w.Calendar != ""
}
