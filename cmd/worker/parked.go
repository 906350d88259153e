package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// quotaOf is pol's first calendar quota (a FixedWindow with a Calendar
// unit), among its limits; nil if it has none.
func quotaOf(pol workers.Policy) *throttle.FixedWindow {
	all := append([]workers.NamedLimit{{Limit: pol.Limit}}, pol.Limits...)
	for _, l := range append(all, workers.NamedLimit{Limit: pol.Global}) {
		if w, ok := l.Limit.(throttle.FixedWindow); ok && w.Calendar != "" {
			return &w
		}
	}
	return nil
}

// readParked reads how many jobs of each policy with a calendar quota are
// parked until its reset, for the next snapshot: "12 parked until 00:00
// America/Los_Angeles".
func (r *rates) readParked(ctx context.Context, pool *workers.Pool) {
	r.mu.Lock()
	var ps []*policyRate
	for _, p := range r.policies {
		if p.quota != nil {
			ps = append(ps, p)
		}
	}
	r.mu.Unlock()
	for _, p := range ps {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		n, until, err := pool.Parked(cctx, p.name)
		cancel()
		r.mu.Lock()
		p.parked = ""
		if err == nil && n > 0 && p.quota != nil {
			p.parked = fmt.Sprintf("%d parked until %s", n, localReset(until, p.quota.Zone))
		}
		r.mu.Unlock()
	}
}

// localReset writes a reset instant in the quota's zone: "00:00
// America/Los_Angeles", with the date if it is not within a day.
func localReset(t time.Time, zone *time.Location) string {
	if zone == nil {
		zone = time.UTC
	}
	lt := t.In(zone)
	if d := time.Until(t); d > 24*time.Hour || d < -time.Hour {
		return lt.Format("2006-01-02 15:04 ") + zone.String()
	}
	return lt.Format("15:04 ") + zone.String()
}
