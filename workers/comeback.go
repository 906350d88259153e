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
)

// This file is how a job that cannot run now goes back to its queue (job.go
// decides when): as a copy made by queue.Client.RequeueTicket that comes
// back later, while the handler returns nil so that asynq drops the
// original. That spends no retry and never archives, whatever the job's
// MaxRetry.

const (
	// shutdownDelay is how long a job sent back by a stopping pool stays away,
	// so that this pool, still draining, does not take it again.
	shutdownDelay = time.Second
	// maxLead bounds how early a job holding a ticket is brought back.
	maxLead = time.Second
)

// superseded reports whether job j, handed over again by asynq (retried: its
// worker was lost with it, or its handler failed), was sent back already: the
// copy sendBack made of it (queue.Meta.CopyID) is on its queue, or kept among
// the completed tasks for queue.CopyRetention. A worker killed after sending
// a job back and before asynq heard the job was done leaves both; run again
// here, the job would run twice. Any error reads as no copy: the job runs
// (at least once, never lost).
func (p *Pool) superseded(ctx context.Context, j *job) bool {
	if j.retried == 0 {
		return false
	}
	n, err := p.rdb.Exists(ctx, taskKey(j.queue, j.meta.CopyID(j.id))).Result()
	return err == nil && n == 1
}

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

// sendBack sends job j back to its queue to run after delay, holding a
// ticket for slot unless slot is zero, and returns nil so that asynq drops
// the original. The ticket is issued first (see issueTicket), then the copy
// is enqueued carrying it: a ticket whose copy never gets enqueued expires
// unused. A copy that comes at a time of its own (a ticket's turn, a place
// in its key's line) is due shareBackstop later, and the pool moves it to
// pending at its time (see share.go).
//
// The worker keeps the job until the copy is on its queue: if the queue's
// Redis cannot take it, sendBack tries again, with backoff, while it holds
// the job. It never hands a throttled job to asynq's retry or archive path
// while it can still send it back, since asynq archives a job whose retries
// are spent (MaxRetry 0, or its last retry) on any error, before it asks
// IsFailure. It gives up only when it must, leaving the job to asynq:
//
//   - when the pool's shutdown nears its ShutdownTimeout, it stops trying
//     and waits: asynq then puts the original back on its queue as it was
//     (no retry spent, never archived) and ends the handler's context;
//   - near its context's deadline, a job with retries left goes down
//     asynq's retry path, after delay, without spending a retry (a
//     queue.ThrottledError: see queue.IsFailure); one with none left keeps
//     trying until the deadline, where asynq decides as for any job;
//   - when its context ends, asynq has decided already.
//
// sendBackRetry paces the attempts to send a job back while the queue's Redis
// cannot take it.
var sendBackRetry = backoff.Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.FullJitter}

// sendBackSlack is how long before its context's deadline, or before asynq's
// shutdown puts back the jobs of unfinished handlers, a job stops trying to
// send itself back: an attempt then could land after asynq has already
// dealt with the original, and the job would run twice.
const sendBackSlack = time.Second

func (p *Pool) sendBack(ctx context.Context, j *job, delay time.Duration, slot time.Time, why reason) error {
	ticket := ""
	if !slot.IsZero() {
		if ticket = p.issueTicket(ctx, j, slot); ticket == "" {
			slot = time.Time{}
		}
	}
	delay = max(delay, 0)
	// asynq keeps due times in whole seconds, truncated: a ticket holder
	// would come back up to a second early and sleep in a worker slot, and
	// with enough of them the pool's slots fill with sleepers while the
	// tickets due next wait in the queue and come late. So, as a job sent
	// away over its share, the copy is due a second after its time, as a
	// backstop, and the pool moves it to pending at its time (promoter).
	backstop := why == reasonShare || ticket != "" && why != reasonShutdown && delay <= sharePromote
	promote := backstop && delay <= sharePromote
	at := delay
	if backstop {
		delay += shareBackstop
	}
	if ticket == "" {
		// asynq keeps due times in whole seconds: a shorter delay would bring the
		// job straight back. A ticket holder sleeps until its slot instead.
		delay = max(delay, queue.MinRetryDelay)
	}
	trace.SpanFromContext(ctx).AddEvent("sent back", trace.WithAttributes(
		attribute.String("sluice.reason", why.String()),
		attribute.Float64("sluice.delay_s", delay.Seconds()),
		attribute.Bool("sluice.ticket", ticket != "")))
	p.requeued(ctx, j.rt, why)
	due := time.Now().Add(delay)
	for attempt := 0; ; attempt++ {
		d := max(time.Until(due), 0)
		if ticket == "" {
			d = max(d, queue.MinRetryDelay)
		}
		task := j.task
		if why == reasonQuota && j.park != nil {
			task = j.parkedTask() // with the reset it waits for (quota.go)
		}
		info, err := p.client.RequeueTicket(ctx, task, d, slot, ticket)
		if err == nil {
			if attempt > 0 {
				j.logger().Info("workers: job sent back once the queue store answered", "reason", why.String(), "attempts", attempt+1)
			}
			j.logger().Debug("workers: job sent back", "reason", why.String(), "delay", d, "ticket", ticket != "")
			if promote && info != nil { // nil: the copy was there already
				p.promote.at(max(time.Until(due)-delay+at, 0), p.rdb, info.Queue, info.ID)
			}
			return nil
		}
		if attempt == 0 {
			j.logger().Warn("workers: queue store (asynq's Redis) unavailable: cannot send the job back; the worker keeps it and tries again",
				"reason", why.String(), "delay", d, "err", err)
		}
		pause := sendBackRetry.Delay(attempt)
		// The next attempt must be over by then.
		end := time.Now().Add(pause + queue.RequeueTimeout + sendBackSlack)
		if at := p.abortAt(); !at.IsZero() && end.After(at) {
			j.logger().Error("workers: the pool stops and the queue store still cannot take the job; asynq puts it back on its queue", "err", err)
			<-ctx.Done() // asynq ends it once it has put the original back
			p.outcome(ctx, j.rt, outFailed)
			return ctx.Err()
		}
		if dl, ok := ctx.Deadline(); ok && end.After(dl) && p.retriesLeft(ctx, j) {
			j.logger().Error("workers: the job's deadline nears and the queue store still cannot take it; asynq's retry path takes it",
				"reason", why.String(), "delay", d, "err", err)
			return queue.Throttled(d, fmt.Sprintf("workers: %s: sending the job back failed: %v", why, err))
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			j.logger().Error("workers: the job's context ended while the queue store could not take it; asynq has it", "err", err)
			p.outcome(ctx, j.rt, outFailed)
			return ctx.Err()
		}
	}
}

// retriesLeft reports whether asynq would retry job j rather than archive it
// if its handler failed now.
func (p *Pool) retriesLeft(ctx context.Context, j *job) bool {
	most, ok := asynq.GetMaxRetry(ctx)
	return ok && j.retried < most
}

// abortAt is when asynq's shutdown puts back the jobs of unfinished handlers
// and ends their contexts; zero before Shutdown calls it.
func (p *Pool) abortAt() time.Time {
	if ns := p.aborts.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
