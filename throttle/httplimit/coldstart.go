package httplimit

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// This file is the Transport's cold start, the worker pool's
// (workers/coldstart.go) on the same claim: while an adaptive bucket is cold
// (its upstream has not answered any process yet, or was forgotten after
// idling), one request at a time, fleet-wide, may take a token: the probe,
// which holds a claim in the Limiter's store (a Concurrency of one on the
// bucket's probe key, the key the pools use too) from before its token
// until its answer has been reported. The others wait for the claim, and
// whoever gets it next reads the bucket again: warm, it lets the claim go
// at once and takes its token at the rate the answer set. So the fleet
// sends one request, and its answer sets the rate before the configured
// burst is granted.

const (
	// probeLease is how long a probe's claim outlives its request: after
	// it, the next request waiting becomes the probe.
	probeLease = 2 * time.Second
	// probeSuffix names a bucket's probe key, beside it (as workers does).
	probeSuffix = ":probe"
	// adaptCold and adaptHeader are throttle.AdaptState.Reason of a bucket
	// whose upstream has not answered yet, and of a rate the upstream
	// announced.
	adaptCold   = "cold"
	adaptHeader = "header"
)

var probeClaim = throttle.Concurrency{Max: 1, Lease: probeLease}

// askFirst returns the probe's claim if bucket key is adaptive and cold:
// this request asks first. It waits for the claim as long as ctx allows; if
// ctx ends or the store cannot hold claims, the request goes on as without
// a cold start (its token's wait meets the same end).
func (t *Transport) askFirst(ctx context.Context, key string) *throttle.Lease {
	if t.Adapt == nil || !t.cold(ctx, key) {
		return nil
	}
	lease, err := t.Limiter.Hold(ctx, key+probeSuffix, probeClaim)
	if err != nil {
		return nil
	}
	if !t.cold(ctx, key) { // answered while this one waited
		t.endProbe(ctx, lease)
		return nil
	}
	return lease
}

// cold reports whether adaptive bucket key has had no answer yet; if the
// store cannot say, it is taken as warm.
func (t *Transport) cold(ctx context.Context, key string) bool {
	cctx, cancel := context.WithTimeout(ctx, cooldownTimeout)
	defer cancel()
	_, st, err := t.Limiter.AdaptiveLimit(cctx, key, *t.Adapt)
	return err == nil && st.Reason == adaptCold
}

// endProbe lets a probe's claim go, if there is one.
func (t *Transport) endProbe(ctx context.Context, lease *throttle.Lease) {
	if lease == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cooldownTimeout)
	defer cancel()
	_ = lease.Release(cctx) // else it ends with its lease
}

// probeAnswered counts the probe of bucket key at the rate its answer set
// (per the ceiling's period): its token was taken at the ceiling's pace, so
// the bucket is held for one turn at that rate and comes out of it empty,
// as the upstream's bucket is less the probe.
func (t *Transport) probeAnswered(ctx context.Context, key string, rate float64) {
	a := *t.Adapt
	if rate <= 0 || rate >= a.Ceiling.Rate {
		return
	}
	per := a.Ceiling.Period
	if per == 0 {
		per = time.Second
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cooldownTimeout)
	defer cancel()
	_, _ = t.Limiter.Cooldown(cctx, key, a, time.Duration(float64(per)/rate))
}

// announce applies the quota of requests q to adaptive bucket key: its
// rate, or else the capacity it says (backoff.Quota.CapacityRate: the rate
// at which the ceiling's shape holds it, only ever lower, and not while a
// rate the upstream announced stands). It returns the effective rate after,
// per the ceiling's period, when the upstream's word bounds it; 0 if not.
func (t *Transport) announce(ctx context.Context, key string, q backoff.Quota, probe bool) float64 {
	a := *t.Adapt
	per := a.Ceiling.Period
	if per == 0 {
		per = time.Second
	}
	rate := q.Rate * per.Seconds()
	if rate <= 0 {
		lim, st, err := t.Limiter.AdaptiveLimit(ctx, key, a)
		switch {
		case err != nil:
			return 0
		case st.Reason == adaptHeader:
			return lim.Rate // announced: it stands
		}
		rate = q.CapacityRate(a.Ceiling.Rate, a.Ceiling.Burst)
		if rate <= 0 {
			return 0
		}
		if lim.Rate <= rate { // already under it
			return lim.Rate
		}
	}
	st, _, err := t.Limiter.Announced(ctx, key, a, rate)
	if err != nil {
		return 0
	}
	if probe {
		t.probeAnswered(ctx, key, st.Rate)
	}
	return st.Rate
}
