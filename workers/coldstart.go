package workers

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// This file is the cold start of an adaptive bucket: it asks first. While
// the upstream's bucket is cold (no job of the fleet has had an answer from
// it yet, or the fleet forgot it after idling an hour), one job at a time,
// fleet-wide, may take a turn: the probe, which holds a claim in the
// limiter's store (a Concurrency of one on the bucket's probe key) from
// before its turn until its answer has been reported. The others wait for
// the claim; whoever gets it next reads the bucket again, and unless it is
// still cold (the probe had no answer: the handler failed, the job went
// back, or its process died and the claim's lease ran out) lets it go at
// once and takes its turn at the rate the answer set. So the fleet sends
// one request, and its answer (an announced quota, a refusal, or a success
// at the ceiling) sets the rate before the configured burst is granted:
// TCP's slow start, in one round trip. A warm bucket costs nothing more:
// the check reads the Limiter's copy of the rate (a cold reading is never
// kept, so the end of a cold start is seen at once).

const (
	// probeLease is how long a probe's claim outlives its job: after it,
	// the next job waiting becomes the probe.
	probeLease = 2 * time.Second
	// probeSuffix names a bucket's probe key, beside it.
	probeSuffix = ":probe"
)

var probeClaim = throttle.Concurrency{Max: 1, Lease: probeLease}

// askFirst is the cold start's step of a job taking a turn: if its
// upstream's adaptive bucket is cold, it waits, up to its wait budget, for
// the claim to probe it, and keeps it (j.probe) if the bucket is still cold
// then. It returns false with the job's fate only if the job's context
// ended; any other way the job goes on to its turn (a store that cannot
// hold claims, or a wait budget spent before an answer, leave it as
// without a cold start).
func (p *Pool) askFirst(ctx context.Context, j *job) (fate, bool) {
	if j.pol.adaptive == nil || j.probe != nil || !p.cold(ctx, j) {
		return fate{}, true
	}
	wctx, cancel := context.WithTimeout(ctx, p.budget(ctx, j))
	defer cancel()
	stop := context.AfterFunc(p.stopCtx, cancel)
	defer stop()
	done := p.startWaiting(ctx, j)
	lease, err := p.cfg.Limiter.Hold(wctx, j.upstream()+probeSuffix, probeClaim)
	done()
	if err != nil {
		if ctx.Err() != nil {
			return gone(ctx.Err()), false
		}
		j.logger().Debug("workers: no answer to the cold start's probe within the wait budget; taking a turn", "err", err)
		return fate{}, true
	}
	j.probe = lease
	if !p.cold(ctx, j) {
		p.endProbe(ctx, j) // answered while this one waited
	} else {
		j.logger().Debug("workers: the upstream's bucket is cold: this job asks first", "bucket", j.upstream())
	}
	return fate{}, true
}

// probeAnswered counts the probe of job j at the rate its answer announced
// (per the ceiling's period): its token was taken at the ceiling's pace, a
// fraction of a turn at the announced rate, so the bucket is held for one
// turn at that rate and comes out of it empty, as the upstream's bucket is
// less the probe; otherwise the first burst after it passes the upstream's
// by the difference and draws a 429.
func (p *Pool) probeAnswered(ctx context.Context, j *job, rate float64) {
	a := j.pol.adaptive
	if rate <= 0 || rate >= a.Ceiling.Rate {
		return
	}
	per := a.Ceiling.Period
	if per == 0 {
		per = time.Second
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := p.cfg.Limiter.Cooldown(sctx, j.upstream(), *a, time.Duration(float64(per)/rate)); err != nil {
		j.logger().Debug("workers: cannot count the probe at the announced rate", "err", err)
	}
}

// cold reports whether job j's upstream's adaptive bucket has had no answer
// yet; if the store cannot say, it is taken as warm.
func (p *Pool) cold(ctx context.Context, j *job) bool {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_, st, err := p.cfg.Limiter.AdaptiveLimit(sctx, j.upstream(), *j.pol.adaptive)
	return err == nil && st.Reason == coldReason
}

// coldReason is throttle.AdaptState.Reason of a bucket whose upstream has
// not answered yet.
const coldReason = "cold"

// endProbe lets job j's probe claim go, if it holds one: its answer, if it
// had one, has been reported (the job's end), or the bucket is warm.
func (p *Pool) endProbe(ctx context.Context, j *job) {
	if j.probe == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := j.probe.Release(rctx); err != nil {
		j.logger().Debug("workers: cannot release the cold start's claim; it ends with its lease", "err", err)
	}
	j.probe = nil
}
