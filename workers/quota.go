package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/internal/calendar"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// This file is where a job over a calendar quota (a throttle.FixedWindow
// with a Calendar unit: so many a day, a week, a month) is parked: sent back
// once, to come back after the quota's reset, instead of spinning on it or
// being archived by the horizon. acquire books no turn across a reset (a
// turn there would be a ticket due at midnight for every job at once); a
// refusal whose wait reaches a reset parks the job (refused): it goes back
// due at the reset plus its place among the jobs parked for that reset, so
// that they come back in the order they were parked, spread over the
// first parkSpread after it, and the short limits stacked with the quota
// spread them further. The horizon does not count the time a job was
// parked (throttledFor). A job is parked at most twice for one reset: once
// when the quota is spent, and once more if a raise of the quota brought it
// back early (replan) and the raise did not make room for it.
// The jobs parked are listed per type (parked.go).

const (
	// parkSpread is how far past the reset the last of the first
	// parkSpreadJobs parked jobs comes back; the ones parked after them come
	// back with it.
	parkSpread     = 10 * time.Second
	parkSpreadJobs = 1000
	// parkMost is how many times a job is parked for one reset at most.
	parkMost = 2
)

// calendarOf is p as a calendar quota, if it is one.
func calendarOf(p throttle.Policy) (throttle.FixedWindow, bool) {
	switch w := p.(type) {
	case throttle.FixedWindow:
		return w, w.Calendar != ""
	case *throttle.FixedWindow:
		if w != nil {
			return *w, w.Calendar != ""
		}
	}
	return throttle.FixedWindow{}, false
}

// printed is p written out for a fingerprint: %#v, but a calendar quota's
// Zone by its name, since a *time.Location prints as its address, which
// differs between processes and between loads of the same zone.
func printed(p throttle.Policy) string {
	if w, ok := calendarOf(p); ok {
		zone := "UTC"
		if w.Zone != nil {
			zone = w.Zone.String()
		}
		return fmt.Sprintf("throttle.FixedWindow{Max:%d, Calendar:%q, Zone:%q}", w.Max, w.Calendar, zone)
	}
	return fmt.Sprintf("%#v", p)
}

// samePolicy reports whether a and b are the same limit (a calendar quota's
// zones by name).
func samePolicy(a, b throttle.Policy) bool {
	if _, ok := calendarOf(a); ok {
		return printed(a) == printed(b)
	}
	return a == b
}

// quotas lists pol's calendar quotas, among its limits and Global.
func (pol *policy) quotas() []throttle.FixedWindow {
	var out []throttle.FixedWindow
	for _, l := range pol.limits {
		if w, ok := calendarOf(l.Limit); ok {
			out = append(out, w)
		}
	}
	if w, ok := calendarOf(pol.global); ok {
		out = append(out, w)
	}
	return out
}

// nextReset is the earliest end, after now, of the windows of now of pol's
// calendar quotas; false if it has none.
func (pol *policy) nextReset(now time.Time) (time.Time, bool) {
	var first time.Time
	for _, w := range pol.quota {
		b := calendar.Bounds(calendar.Unit(w.Calendar), now, w.Zone)
		if first.IsZero() || b[1].Before(first) {
			first = b[1]
		}
	}
	return first, !first.IsZero()
}

// resetAt is the reset of one of pol's calendar quotas nearest to at, an
// instant a refusal named (now plus its RetryAfter, which the store's clock
// measured): the boundaries every host computes alike, so that the jobs
// parked for one reset are listed under one time.
func (pol *policy) resetAt(now, at time.Time) time.Time {
	best := at
	var gap time.Duration = -1
	for _, w := range pol.quota {
		b := calendar.Bounds(calendar.Unit(w.Calendar), now, w.Zone)
		for _, r := range b[1:] {
			d := r.Sub(at)
			if d < 0 {
				d = -d
			}
			if gap < 0 || d < gap {
				best, gap = r, d
			}
		}
	}
	return best
}

// beforeReset is ahead, how far ahead job j may book its turn, cut short of
// the first reset of its policy's calendar quotas (a second early, for the
// hosts' clocks): no turn is booked across a reset; a job refused until it
// is parked (refused).
func (p *Pool) beforeReset(j *job, ahead time.Duration) time.Duration {
	if r, ok := j.pol.nextReset(time.Now()); ok {
		ahead = min(ahead, max(time.Until(r)-time.Second, 0))
	}
	return ahead
}

// parkWave is how many parked jobs a re-plan under pol brings back (replan):
// as many as its calendar quotas grant in a window, the most that can have
// room now (with a key per tenant, each key's quota: up to replanScan), or
// none without one. Each takes a turn: it runs, goes back holding a turn
// booked before the reset (its short limits' pace), or is parked again.
func parkWave(pol *policy) int {
	most := 0
	for _, w := range pol.quota {
		if most == 0 || w.Max < most {
			most = w.Max
		}
	}
	if most > 0 && pol.Key != nil {
		most = replanScan
	}
	return min(most, replanScan)
}

// quotaWait reports whether a refusal of job j with RetryAfter wait is a
// wait for a calendar quota's reset: it ends at or past the first reset (a
// second early, for the hosts' clocks).
func (p *Pool) quotaWait(j *job, wait time.Duration) bool {
	if len(j.pol.quota) == 0 {
		return false
	}
	now := time.Now()
	r, ok := j.pol.nextReset(now)
	return ok && !now.Add(wait).Before(r.Add(-time.Second))
}

// parkNote is what a parked job carries: the reset it waits for and how
// many times it was parked for it.
type parkNote struct {
	until time.Time
	parks int
}

// park is the fate of job j refused until a calendar quota's reset, wait
// from now: back, not bound by the horizon, due at the reset plus its place
// among the jobs parked for it (see the file's comment).
func (p *Pool) park(ctx context.Context, j *job, wait time.Duration) fate {
	now := time.Now()
	until := j.pol.resetAt(now, now.Add(wait))
	n := parkNote{until: until, parks: 1}
	if j.meta.ParkedUntil.Equal(until) {
		n.parks = j.meta.Parks + 1
	}
	j.park = &n
	delay := max(until.Sub(now), wait) + p.parkPlace(ctx, j, until)
	return fate{next: toBack, delay: delay, why: reasonQuota}
}

// parkedTask is job j's task with its park note in its headers, for the
// copy sendBack makes (queue.Client.RequeueTicket keeps the headers it does
// not write itself and reads these into the copy's Meta).
func (j *job) parkedTask() *asynq.Task {
	h := make(map[string]string, len(j.task.Headers())+2)
	for k, v := range j.task.Headers() {
		h[k] = v
	}
	h[queue.HeaderParkedUntil] = fmtInt(j.park.until.UnixMicro())
	h[queue.HeaderParks] = fmtInt(int64(j.park.parks))
	return asynq.NewTaskWithHeaders(j.task.Type(), j.task.Payload(), h)
}
