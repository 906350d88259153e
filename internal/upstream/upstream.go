// Package upstream is what an upstream's answers do to its adaptive bucket
// that is the same for every caller: the worker pool (workers) and
// httplimit.Transport both ask first while the bucket is cold, count the
// probe at the rate its answer set, and turn an announced quota into the
// rate to announce. Each keeps only what is its own (waiting within a job's
// budget, logging, re-planning booked jobs).
//
// The cold start: while an adaptive bucket is cold (its upstream has not
// answered any process yet, or was forgotten after idling), one caller at a
// time, fleet-wide, may take a token: the probe, which holds a claim in the
// Limiter's store (ProbeClaim on ProbeKey of the bucket) from before its
// token until its answer has been reported. The others wait for the claim,
// and whoever gets it next reads the bucket again: warm, it lets the claim
// go at once and takes its token at the rate the answer set. So the fleet
// sends one request, and its answer sets the rate before the configured
// burst is granted: TCP's slow start, in one round trip. See
// docs/adaptive.md.
package upstream

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// Reasons of throttle.AdaptState: a bucket whose upstream has not answered
// yet, and a rate the upstream announced.
const (
	ReasonCold      = "cold"
	ReasonAnnounced = "header"
)

// ProbeLease is how long a probe's claim outlives its caller's last
// renewal: after it, the next caller waiting becomes the probe.
const ProbeLease = 2 * time.Second

// ProbeClaim is the claim a probe holds: one holder at a time.
var ProbeClaim = throttle.Concurrency{Max: 1, Lease: ProbeLease}

// ProbeKey is the key of bucket's probe claim, beside it (in its Cluster
// slot when the bucket's key has a hash tag).
func ProbeKey(bucket string) string { return bucket + ":probe" }

// Cold reports whether adaptive bucket key has had no answer yet; if the
// store cannot say, it is taken as warm (the caller goes on as without a
// cold start).
func Cold(ctx context.Context, lim *throttle.Limiter, key string, a throttle.Adaptive) bool {
	_, st, err := lim.AdaptiveLimit(ctx, key, a)
	return err == nil && st.Reason == ReasonCold
}

// CountProbe counts the probe of bucket key at the rate its answer set (per
// the ceiling's period): its token was taken at the ceiling's pace, a
// fraction of a turn at that rate, so the bucket is held for one turn at it
// and comes out of it empty, as the upstream's bucket is less the probe;
// otherwise the first burst after it passes the upstream's by the
// difference and draws a refusal. A rate of 0 or at the ceiling holds
// nothing.
func CountProbe(ctx context.Context, lim *throttle.Limiter, key string, a throttle.Adaptive, rate float64) error {
	if rate <= 0 || rate >= a.Ceiling.Rate {
		return nil
	}
	_, err := lim.Cooldown(ctx, key, a, time.Duration(float64(period(a))/rate))
	return err
}

// Target is the rate, per the ceiling's period, that quota q sets on
// adaptive bucket key, and whether it is to be announced (Limiter.Announced):
// the rate q states; or else the capacity q states without a rate
// (backoff.Quota.CapacityRate: the rate at which the ceiling's shape holds
// it), which only ever lowers the rate and does not replace a rate the
// upstream announced. When nothing is to be announced, rate is the
// effective rate if the upstream's word bounds it (an announced rate
// stands, or the rate is already under the capacity), else 0.
func Target(ctx context.Context, lim *throttle.Limiter, key string, a throttle.Adaptive, q backoff.Quota) (rate float64, announce bool, err error) {
	if q.Rate > 0 {
		return q.Rate * period(a).Seconds(), true, nil
	}
	cur, st, err := lim.AdaptiveLimit(ctx, key, a)
	if err != nil {
		return 0, false, err
	}
	if st.Reason == ReasonAnnounced {
		return cur.Rate, false, nil // announced: it stands
	}
	c := q.CapacityRate(a.Ceiling.Rate, a.Ceiling.Burst)
	switch {
	case c <= 0:
		return 0, false, nil
	case cur.Rate <= c: // already under it (refusals)
		return cur.Rate, false, nil
	}
	return c, true, nil
}

// period is a's ceiling's period; 0 means a second.
func period(a throttle.Adaptive) time.Duration {
	if a.Ceiling.Period == 0 {
		return time.Second
	}
	return a.Ceiling.Period
}
