package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// This file is where a job that cannot run now goes: back to its queue, as a
// copy made by queue.Client.Requeue that comes back later, while the handler
// returns nil so that asynq drops the original. That spends no retry and never
// archives, whatever the job's MaxRetry.

const (
	// shutdownDelay is how long a job sent back by a stopping pool stays away,
	// so that this pool, still draining, does not take it again.
	shutdownDelay = time.Second
	// maxLead bounds how early a job holding a ticket is brought back.
	maxLead = time.Second
)

// backoffPolicy paces come-backs that have no time of their own: an upstream
// refusal without Retry-After, a limiter store that is down, a bare
// queue.ErrThrottled.
var backoffPolicy = backoff.Exponential{Base: time.Second, Max: 5 * time.Minute, Jitter: backoff.FullJitter}

// backoffDelay is the delay before come-back number requeues+1. It is at least
// queue.MinRetryDelay: asynq keeps due times in whole seconds, so anything
// shorter would come straight back.
func backoffDelay(requeues int) time.Duration {
	return max(backoffPolicy.Delay(requeues), queue.MinRetryDelay)
}

// lead is how much earlier than its slot a job holding a ticket is asked
// back, so that it is not late: at least how late asynq may hand a due job to
// a handler (a forwarder tick plus an idle pool's sleep between fetches), else
// half its wait budget, at most a second. It sleeps the rest on arrival (and
// asynq's whole-second due times may bring it up to a second earlier still).
func (p *Pool) lead(budget time.Duration) time.Duration {
	return max(min(budget/2, maxLead), p.cfg.DelayedTaskCheckInterval+p.cfg.TaskCheckInterval)
}

// sendBackWith sends job j back holding reservation r as its ticket: it comes
// back a little before r's slot and runs then without asking for tokens
// again. Each job throttled this way goes back once, at its own slot, so
// come-backs are spread exactly as the bucket allows.
//
// If sending back fails, r is kept, not cancelled: a failed enqueue may still
// have happened (a timed-out script can run after the client gave up), and a
// copy holding a refunded ticket would run on tokens handed out twice. A lost
// ticket only wastes its tokens.
func (p *Pool) sendBackWith(ctx context.Context, j *job, r *throttle.Reservation, why reason) error {
	delay := r.Delay() - p.lead(j.pol.maxWait)
	if why == reasonShutdown {
		delay = max(delay, shutdownDelay)
	}
	return p.comeBack(ctx, j, delay, r.Time(), why)
}

// comeBack sends job j back to its queue to run after delay, holding a ticket
// for slot unless slot is zero, and returns nil so that asynq drops the
// original.
//
// If the queue's Redis cannot take the copy, comeBack returns a
// queue.ThrottledError instead, and the pool's asynq.Config (queue.IsFailure,
// queue.RetryDelayFunc) sends the original down asynq's retry path: after
// delay, without spending a retry and without counting as a failure. The gap:
// asynq archives a job whose retries are already spent (MaxRetry 0, or its
// last retry) whatever the error, before it asks IsFailure, so such a job is
// archived, with this error as its reason, if the queue's Redis fails just
// then. A job that held a ticket comes back that way with its old ticket
// headers, and since asynq did not count a retry it is honoured again.
func (p *Pool) comeBack(ctx context.Context, j *job, delay time.Duration, slot time.Time, why reason) error {
	_, err := p.requeue(ctx, j, delay, slot, why)
	return err
}

// requeue is comeBack, which also returns the copy's TaskInfo (nil if none
// was made: the error then sends the original down asynq's retry path).
func (p *Pool) requeue(ctx context.Context, j *job, delay time.Duration, slot time.Time, why reason) (*asynq.TaskInfo, error) {
	delay = max(delay, 0)
	if slot.IsZero() {
		// asynq keeps due times in whole seconds: a shorter delay would bring the
		// job straight back. A ticket holder sleeps until its slot instead.
		delay = max(delay, queue.MinRetryDelay)
	}
	trace.SpanFromContext(ctx).AddEvent("sent back", trace.WithAttributes(
		attribute.String("sluice.reason", why.String()),
		attribute.Float64("sluice.delay_s", delay.Seconds()),
		attribute.Bool("sluice.ticket", !slot.IsZero())))
	p.requeued(ctx, j.rt, why)
	fp := ""
	if j.pol != nil {
		fp = ticketMark(j.pol.fp, j.rate)
	}
	info, err := p.client.RequeueTicket(ctx, j.task, delay, slot, fp)
	if err != nil {
		j.logger().Error("workers: queue store (asynq's Redis) unavailable: cannot send the job back; asynq's retry path takes it",
			"reason", why.String(), "delay", delay, "err", err)
		return nil, queue.Throttled(delay, fmt.Sprintf("workers: %s: sending the job back failed: %v", why, err))
	}
	j.logger().Debug("workers: job sent back", "reason", why.String(), "delay", delay, "ticket", !slot.IsZero())
	return info, nil
}
