package workers

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// This file is how a job holds an in-flight slot (Policy.InFlight): a lease
// on the policy's semaphore, taken before the handler runs and released when
// it returns. A job that takes a turn holds its slot first and then books its
// turn, so that it uses its tokens at their slot: the other order would let
// jobs that got their turns queue for slots and then, as slots come free
// together (answers that come back at once), reach the upstream in a bunch
// past the limit. A job that comes back with a ticket has its turn already:
// it waits for a slot only while its turn stays fresh (Policy.late, as long
// as a ticket may be late). When each happens is job.go's (holdFirst,
// runHolding).

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
	done := p.startWaiting(ctx, j)
	lease, err := p.cfg.Limiter.Hold(wctx, j.sem, j.pol.slots)
	done()
	if err != nil {
		span.RecordError(err)
	}
	return lease, err
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
	p.started(j)
	began := time.Now()
	err = j.rt.h.ProcessTask(hctx, j.task)
	lease.Observe(time.Since(began), overloaded(hctx, err))
	select {
	case <-lease.Lost():
		lost = true
	default:
	}
	return lost, err
}

// overloaded reports whether a handler's err says the upstream is
// overloaded, for an automatic in-flight bound: it refused the request (an
// *UpstreamError: a 429, a 503) or did not answer in time (the handler's
// context ran out, or its own timeout did).
func overloaded(hctx context.Context, err error) bool {
	var up *UpstreamError
	switch {
	case err == nil:
		return false
	case errors.As(err, &up), errors.Is(err, context.DeadlineExceeded), errors.Is(hctx.Err(), context.DeadlineExceeded):
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
