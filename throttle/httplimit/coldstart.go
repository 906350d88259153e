package httplimit

import (
	"context"

	"github.com/sluicehq/sluice/backoff"
	up "github.com/sluicehq/sluice/internal/upstream"
	"github.com/sluicehq/sluice/throttle"
)

// This file is the Transport's step of the cold start of an adaptive bucket
// (internal/upstream, on the same claim as the worker pools: one request at
// a time, fleet-wide, asks first while the bucket is cold), and what an
// announced quota does to the bucket.

// askFirst returns the probe's claim if bucket key is adaptive and cold:
// this request asks first. It waits for the claim as long as ctx allows; if
// ctx ends or the store cannot hold claims, the request goes on as without
// a cold start (its token's wait meets the same end).
func (t *Transport) askFirst(ctx context.Context, key string) *throttle.Lease {
	if t.Adapt == nil || !t.cold(ctx, key) {
		return nil
	}
	lease, err := t.Limiter.Hold(ctx, up.ProbeKey(key), up.ProbeClaim)
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
	return up.Cold(cctx, t.Limiter, key, *t.Adapt)
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

// announce applies the quota of requests q to adaptive bucket key: its
// rate, or else the capacity it says (backoff.Quota.CapacityRate: the rate
// at which the ceiling's shape holds it, only ever lower, and not while a
// rate the upstream announced stands). It returns the effective rate after,
// per the ceiling's period, when the upstream's word bounds it; 0 if not.
func (t *Transport) announce(ctx context.Context, key string, q backoff.Quota, probe bool) float64 {
	a := *t.Adapt
	rate, announce, err := up.Target(ctx, t.Limiter, key, a, q)
	if err != nil || !announce {
		return rate
	}
	st, _, err := t.Limiter.Announced(ctx, key, a, rate)
	if err != nil {
		return 0
	}
	if probe {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cooldownTimeout)
		defer cancel()
		_ = up.CountProbe(cctx, t.Limiter, key, a, st.Rate)
	}
	return st.Rate
}
