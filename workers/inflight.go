package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// This file is where a job holds its in-flight slot (Policy.InFlight). A
// job that takes a turn holds its slot first and then books its turn, so
// that it uses its tokens at their slot: the other order would let jobs that
// got their turns queue for slots and then, as slots come free together
// (answers that come back at once), reach the upstream in a bunch past the
// limit. A job that comes back with a ticket has its turn already: it waits
// for a slot only while its turn stays fresh (Policy.late, as long as a
// ticket may be late).

// holdFirst takes job j's in-flight slot, if its policy bounds them and it
// holds none yet, waiting up to its wait budget; the job's process releases
// it (letGo) unless its handler ran holding it. It reports whether the job
// went elsewhere instead (no slot: sent back, or archived), with that error.
func (p *Pool) holdFirst(ctx context.Context, j *job) (gone bool, err error) {
	if j.sem == "" || j.lease != nil {
		return false, nil
	}
	lease, err := p.holdSlot(ctx, j, p.budget(ctx, j))
	if err != nil {
		return true, p.noSlot(ctx, j, err)
	}
	j.lease = lease
	return false, nil
}

// runHolding runs job j's handler holding one of its policy's in-flight
// slots, if the policy bounds them; otherwise it just runs it. A job that
// holds none yet (it came back with a ticket for turn) waits for one as
// long as its wait budget and its turn's freshness allow; with none by then
// its turn is spent, and it takes a new one as a job that has none does:
// its slot first, then its turn (acquire).
func (p *Pool) runHolding(ctx context.Context, j *job, turn time.Time) error {
	if j.sem == "" {
		return p.run(ctx, j)
	}
	if j.lease == nil {
		fresh := j.pol.late - max(time.Since(turn), 0)
		lease, err := p.holdSlot(ctx, j, min(p.budget(ctx, j), fresh))
		var limited *throttle.LimitedError
		switch {
		case err == nil:
			j.lease = lease
		case (errors.As(err, &limited) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil && !p.stopping():
			j.logger().Debug("workers: no in-flight slot while the ticket's turn was fresh; taking a new turn")
			return p.acquire(ctx, j)
		default:
			return p.noSlot(ctx, j, err)
		}
	}
	lease := j.lease
	j.lease = nil // runLeased releases it
	lost, err := p.runLeased(ctx, j, lease)
	if lost && err != nil {
		// Its slot may be someone else's by now: the run was cut short for
		// that, which is throttling, not a failure.
		j.logger().Warn("workers: in-flight slot lost while the handler ran; sending the job back", "err", err)
		return p.comeBack(ctx, j, backoffDelay(j.meta.Requeues), time.Time{}, reasonInFlight)
	}
	return p.result(ctx, j, err)
}

// letGo releases job j's in-flight slot if it still holds one: its handler
// did not run (it went back, or was archived).
func (p *Pool) letGo(ctx context.Context, j *job) {
	if j.lease == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := j.lease.Release(rctx); err != nil {
		j.logger().Warn("workers: cannot release the in-flight slot; it comes back when its lease runs out", "err", err)
	}
	j.lease = nil
}

// holdSlot takes an in-flight slot for job j, waiting up to budget; a pool
// that begins to stop ends the wait. With no budget it only tries.
func (p *Pool) holdSlot(ctx context.Context, j *job, budget time.Duration) (*throttle.Lease, error) {
	tctx, span := p.tel.tracer.Start(ctx, "workers.inflight")
	defer span.End()
	if budget <= 0 {
		return p.cfg.Limiter.TryHold(tctx, j.sem, j.pol.slots)
	}
	wctx, cancel := context.WithTimeout(tctx, budget)
	defer cancel()
	stop := context.AfterFunc(p.stopCtx, cancel)
	defer stop()
	done := p.startWaiting(ctx, j.rt)
	lease, err := p.cfg.Limiter.Hold(wctx, j.sem, j.pol.slots)
	done()
	if err != nil {
		span.RecordError(err)
	}
	return lease, err
}

// noSlot handles a job that got no in-flight slot.
func (p *Pool) noSlot(ctx context.Context, j *job, err error) error {
	var limited *throttle.LimitedError
	switch {
	case errors.Is(err, throttle.ErrInvalid):
		return p.archive(ctx, j, permanent(fmt.Errorf("workers: policy %q: %w", j.pol.Name, err)))
	case ctx.Err() != nil:
		p.outcome(ctx, j.rt, outFailed)
		return ctx.Err()
	case p.stopping():
		return p.comeBack(ctx, j, shutdownDelay, time.Time{}, reasonShutdown)
	case errors.As(err, &limited), errors.Is(err, context.DeadlineExceeded):
		// No slot within the budget: when one comes free is anyone's guess,
		// so the job backs off on its requeues.
		d := backoffDelay(j.meta.Requeues)
		if d > p.remaining(j) {
			return p.archive(ctx, j, p.pastHorizon(j, d))
		}
		return p.comeBack(ctx, j, d, time.Time{}, reasonInFlight)
	}
	j.logger().Debug("workers: limiter store unavailable; sending the job back", "err", err)
	return p.comeBack(ctx, j, backoffDelay(j.meta.Requeues), time.Time{}, reasonStore)
}

// runLeased calls job j's handler with a context that ends if lease is lost,
// and releases lease when the handler returns, by panic too. lost says
// whether the lease was lost meanwhile. The goroutine that watches the lease
// has ended when runLeased returns.
func (p *Pool) runLeased(ctx context.Context, j *job, lease *throttle.Lease) (lost bool, err error) {
	hctx, cancel := context.WithCancel(ctx)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Lost():
			cancel()
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		<-watched
		cancel()
		// The handler's context may be over; the release gets one of its own.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer rcancel()
		if rerr := lease.Release(rctx); rerr != nil {
			j.logger().Warn("workers: cannot release the in-flight slot; it comes back when its lease runs out", "err", rerr)
		}
	}()
	err = j.rt.h.ProcessTask(hctx, j.task)
	select {
	case <-lease.Lost():
		lost = true
	default:
	}
	return lost, err
}
