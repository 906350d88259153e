package workers

import (
	"context"

	"github.com/sluicehq/sluice/internal/upstream"
)

// This file is the job path's step of the cold start of an adaptive bucket
// (internal/upstream: one job at a time, fleet-wide, asks first while the
// upstream's bucket is cold): a job waits for the probe's claim within its
// wait budget, and holds it (j.probe) until its answer has been reported.
// A warm bucket costs nothing more: the check reads the Limiter's copy of
// the rate (a cold reading is never kept, so the end of a cold start is seen
// at once).

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
	lease, err := p.cfg.Limiter.Hold(wctx, upstream.ProbeKey(j.upstream()), upstream.ProbeClaim)
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

// probeAnswered counts job j's probe at the rate its answer announced
// (upstream.CountProbe).
func (p *Pool) probeAnswered(ctx context.Context, j *job, rate float64) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := upstream.CountProbe(sctx, p.cfg.Limiter, j.upstream(), *j.pol.adaptive, rate); err != nil {
		j.logger().Debug("workers: cannot count the probe at the announced rate", "err", err)
	}
}

// cold reports whether job j's upstream's adaptive bucket has had no answer
// yet; if the store cannot say, it is taken as warm.
func (p *Pool) cold(ctx context.Context, j *job) bool {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return upstream.Cold(sctx, p.cfg.Limiter, j.upstream(), *j.pol.adaptive)
}

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
