package workers

import (
	"context"

	"github.com/sluicehq/sluice/throttle"
)

// This file is how what a job learns of its upstream reaches its policy's
// adaptive bucket (Policy.Adaptive), and how a lower effective rate reaches
// the jobs that booked turns at the old one. Every call workers makes to
// throttle's adaptive API (Limiter.AdaptiveLimit, Refused, Succeeded, Announced) is here.

// adaptRefused reports an upstream refusal of job j to its upstream's
// adaptive bucket (job.upstream): the fleet's effective rate falls, once per
// overload episode.
func (p *Pool) adaptRefused(ctx context.Context, j *job) {
	a := j.pol.adaptive
	st, lowered, err := p.cfg.Limiter.Refused(context.WithoutCancel(ctx), j.upstream(), *a)
	if err != nil {
		j.logger().Debug("workers: cannot report the refusal to the adaptive rate", "err", err)
		return
	}
	if lowered {
		p.rebookBucket(j.upstream())
		j.logger().Info("workers: upstream refused: the fleet's effective rate for the bucket is lowered",
			"bucket", j.upstream(), "rate", st.Rate, "ceiling", a.Ceiling.Rate, "per", a.Ceiling.Period.String(), "why", st.Reason)
	}
}

// announced makes rate (per the ceiling's period), which the upstream
// announced or its capacity implies (capacity), the effective rate of job
// j's upstream's bucket, never above its ceiling. It returns the effective
// rate after, 0 if the store could not say.
func (p *Pool) announced(ctx context.Context, j *job, rate float64) float64 {
	a := j.pol.adaptive
	st, changed, err := p.cfg.Limiter.Announced(context.WithoutCancel(ctx), j.upstream(), *a, rate)
	if err != nil {
		j.logger().Debug("workers: cannot report the announced quota", "err", err)
		return 0
	}
	if j.probe != nil {
		p.probeAnswered(ctx, j, st.Rate)
	}
	if changed {
		p.rebookBucket(j.upstream())
		j.logger().Info("workers: the upstream announced its quota: the fleet's effective rate for the bucket follows it",
			"bucket", j.upstream(), "rate", st.Rate, "ceiling", a.Ceiling.Rate, "per", a.Ceiling.Period.String())
	}
	return st.Rate
}

// perPeriod is rate, per second, per the ceiling's period of a.
func perPeriod(a throttle.Adaptive, rate float64) float64 {
	if a.Ceiling.Period == 0 {
		return rate
	}
	return rate * a.Ceiling.Period.Seconds()
}

// adaptSucceeded counts a success of job j for its upstream's adaptive bucket.
func (p *Pool) adaptSucceeded(ctx context.Context, j *job) {
	if err := p.cfg.Limiter.Succeeded(context.WithoutCancel(ctx), j.upstream(), *j.pol.adaptive); err != nil {
		j.logger().Debug("workers: cannot report successes to the adaptive rate", "err", err)
	}
}

// rebookBucket wakes the jobs waiting in this pool for turns of bucket key
// booked at an adaptive rate that has since dropped: they give the turns
// back and book anew at the lower rate, instead of spending the upstream's
// quota at the old pace.
func (p *Pool) rebookBucket(key string) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for w := range p.waiters {
		if w.bucket == key {
			w.rebook.Store(true)
			w.cancel()
		}
	}
}

// rateDropped reports whether the adaptive rate of job j's upstream's bucket dropped
// below the rate its turn was booked at while it waited for it: another
// process learned the upstream's limit (an announced quota, a 429) and
// could not wake this one's waiters. The turn is then given up (its tokens
// were counted at the old pace) for one at the new rate. It reads the rate
// through the Limiter, whose copy is at most 250 ms old, so that a
// turn costs no store call more than it did (a drop in the last 250 ms may
// go unseen); if the store cannot answer in time the job keeps its turn.
func (p *Pool) rateDropped(ctx context.Context, j *job) bool {
	if j.pol.adaptive == nil || j.rate <= 0 {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, cooldownCheckTimeout)
	defer cancel()
	rate, err := p.adaptiveRate(sctx, j)
	if err != nil || !dropped(rate, j.rate) {
		return false
	}
	j.logger().Debug("workers: the bucket's adaptive rate dropped while the job waited; taking a new turn", "booked_at", j.rate, "rate", rate)
	return true
}

// adaptiveRate is the effective rate of job j's adaptive bucket now.
func (p *Pool) adaptiveRate(ctx context.Context, j *job) (float64, error) {
	l, _, err := p.cfg.Limiter.AdaptiveLimit(ctx, j.upstream(), *j.pol.adaptive)
	return l.Rate, err
}

// dropped reports whether an adaptive rate now is enough below the rate a
// turn was booked at for the turn to be given up for one at the new rate:
// by more than 5 %. The booked rate is read back from the bucket's T, which
// is rounded to a picosecond, so it may differ from the rate itself in its
// last digits; an exact comparison would give up every turn, forever.
func dropped(now, booked float64) bool { return now < 0.95*booked }

// UpstreamAdaptive returns the bucket whose effective rate the answers of
// pol's upstream set, and its adaptive limit, for a program that shows it
// (Limiter.AdaptiveLimit): with Key and Global, the global bucket (GlobalKey),
// as the upstream's quota is the account every key shares; without Key, the
// first limit's own bucket. ok is false when pol does not adapt, when its
// upstream's bucket is one per key (AdaptKey, or Key without Global), or
// when that bucket is not a token bucket (throttle.Limit).
func UpstreamAdaptive(pol Policy) (key string, a throttle.Adaptive, ok bool) {
	if !pol.Adapt {
		return "", throttle.Adaptive{}, false
	}
	limits, err := limitsOf(pol)
	if err != nil || len(limits) == 0 {
		return "", throttle.Adaptive{}, false
	}
	ceiling := limits[0].Limit
	switch {
	case pol.Key != nil && !isNil(pol.Global) && !pol.AdaptKey:
		ceiling, key = pol.Global, GlobalKey(pol)
	case pol.Key != nil:
		return "", throttle.Adaptive{}, false
	default:
		key = BucketKey(pol, pol.Name, limits[0].Name)
	}
	l, ok := limitOf(ceiling)
	if !ok {
		return "", throttle.Adaptive{}, false
	}
	return key, throttle.Adaptive{Ceiling: l, Floor: pol.AdaptFloor}, true
}
