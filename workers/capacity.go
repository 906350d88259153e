package workers

import (
	"context"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// This file is what an answer that announces a capacity but no rate does to
// the upstream's adaptive bucket. Shopify's call limit (USED/CAPACITY),
// X-RateLimit-Limit beside a reset too short to read a rate from, GitHub's
// and Anthropic's limits beside resets written in whole seconds: each says
// how many requests the upstream's bucket holds, not how fast it refills.
// An adaptive bucket keeps its ceiling's shape as its rate falls (its burst
// is the ceiling's scaled by the rate: throttle.Adaptive), so a burst of
// CAPACITY is the rate ceiling·CAPACITY/burst, and that is the most the
// fleet takes (configured at 200/s burst 20 before an upstream holding 5:
// 50/s burst 5). It only ever lowers the rate: a capacity at or above the
// configured burst says nothing, and a rate the upstream announced (or a
// capacity already applied) stands. Refusals lower the rate further, and
// recovery climbs back up to it, never past it while answers say it.

// capacityRate is the rate, per the ceiling's period, at which a's bucket
// holds q's Limit (backoff.Quota.CapacityRate); 0 if q says a rate
// (announced instead), no limit, or one the configured burst does not
// exceed.
func capacityRate(a throttle.Adaptive, q backoff.Quota) float64 {
	return q.CapacityRate(a.Ceiling.Rate, a.Ceiling.Burst)
}

// capacity applies the capacity q announces to job j's upstream's adaptive
// bucket and returns the effective rate after, per the ceiling's period,
// when the upstream's word bounds it (a rate or a capacity it announced);
// 0 when nothing it said does, or the store cannot say.
func (p *Pool) capacity(ctx context.Context, j *job, q backoff.Quota) float64 {
	a := j.pol.adaptive
	lim, st, err := p.cfg.Limiter.AdaptiveLimit(context.WithoutCancel(ctx), j.upstream(), *a)
	if err != nil {
		return 0
	}
	if st.Reason == adaptHeader {
		return lim.Rate // announced: it stands
	}
	c := capacityRate(*a, q)
	switch {
	case c <= 0:
		return 0
	case lim.Rate <= c: // already under it (refusals)
		return lim.Rate
	}
	return p.announced(ctx, j, c)
}

// adaptHeader is throttle.AdaptState.Reason of a rate set from the
// upstream's announcement.
const adaptHeader = "header"
