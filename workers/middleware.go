package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// job is one run of one task in this process.
type job struct {
	task    *asynq.Task
	rt      *route
	pol     *policy      // the route's policy when the job began (SetPolicy may change it since); nil: unthrottled
	note    upstreamNote // what the handler observed of the upstream's quota (ObserveResponse)
	granted time.Time    // the slot its tokens were granted for, on the store's clock (Granted); zero if none
	rate    float64      // the adaptive rate the job's turn was booked at (effective); 0 if none
	meta    queue.Meta   // the task's sluice headers; a malformed one is left zero
	retried int          // asynq's retry count of this run
	start   time.Time
	id      string       // asynq's task id
	queue   string       // the queue asynq took the task from
	lg      *slog.Logger // the job's logger, made on first use (logger)
	base    *slog.Logger // the pool's logger

	buckets []throttle.Bucket // the policy's buckets for this task
	key     string            // the task's own bucket: where a cooldown goes
	sem     string            // the task's in-flight semaphore, if its policy has InFlight
	lease   *throttle.Lease   // its slot of sem while held before the handler (see holdFirst)
}

// process is the pool's asynq handler. For a throttled task type it:
//
//   - reads the task's sluice headers (a malformed one is logged and ignored);
//   - derives the buckets (a task whose key cannot be derived is archived);
//   - if the task holds a ticket (queue.HeaderTicket) that the limiter's
//     store issued and no one has redeemed, redeems it, sleeps until its slot
//     and runs the handler without asking for tokens again (see redeem);
//   - otherwise holds an in-flight slot first if the policy bounds them
//     (going back to the queue if none comes free within the wait budget),
//     then reserves the tokens in one call, up to the horizon, and waits for
//     its turn if it comes within the wait budget, or goes back to the queue
//     holding it as a ticket if not (see acquire and inflight.go);
//
// and then handles what the handler returns (see run).
func (p *Pool) process(ctx context.Context, task *asynq.Task) error {
	rt := p.routes[task.Type()]
	if rt == nil {
		p.log.Warn("workers: no handler for task type", "task_type", task.Type())
		return fmt.Errorf("workers: no handler for task type %q", task.Type())
	}
	p.inflight.Add(1)
	defer p.inflight.Done()
	p.stats.active.Add(1)
	defer p.stats.active.Add(-1)
	ctx, span := p.tel.tracer.Start(ctx, "workers.job", rt.tel.span...)
	defer span.End()

	j := p.newJob(ctx, task, rt)
	ctx = context.WithValue(ctx, noteKey{}, &j.note)
	ctx = context.WithValue(ctx, grantedKey{}, &j.granted)
	if j.pol == nil {
		return p.run(ctx, j)
	}
	if err := p.bind(j); err != nil {
		return p.archive(ctx, j, permanent(err))
	}
	defer p.letGo(ctx, j)
	if j.meta.Ticket != "" {
		return p.redeem(ctx, j)
	}
	return p.acquire(ctx, j)
}

// bind works out job j's buckets and in-flight semaphore under j.pol.
func (p *Pool) bind(j *job) error {
	var err error
	if j.buckets, j.key, err = j.pol.buckets(j.task, j.meta); err != nil {
		return err
	}
	j.sem = ""
	if j.pol.InFlight > 0 {
		if j.sem, err = j.pol.inFlightKey(j.key); err != nil {
			return err
		}
	}
	return nil
}

// rebound reports whether job j's policy was replaced (SetPolicy) since it
// began, and if so moves it to the new one: a turn booked under the old
// limits is void, and the job takes a new one.
func (p *Pool) rebound(j *job) (bool, error) {
	cur := j.rt.pol.Load()
	if cur == nil || cur == j.pol || cur.fp == j.pol.fp {
		return false, nil
	}
	j.logger().Debug("workers: the limit changed since the job booked its turn; taking a new one")
	j.pol = cur
	return true, p.bind(j)
}

func (p *Pool) newJob(ctx context.Context, task *asynq.Task, rt *route) *job {
	id, _ := asynq.GetTaskID(ctx)
	qname, _ := asynq.GetQueueName(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	j := &job{task: task, rt: rt, pol: rt.pol.Load(), id: id, queue: qname, retried: retried, start: time.Now(), base: p.log}
	var err error
	if j.meta, err = queue.MetaOf(task); err != nil {
		j.logger().Warn("workers: malformed sluice header, treated as absent", "err", err)
	}
	return j
}

// logger is job j's logger: the pool's, with the task's id, type and queue
// and the policy's name. It is made on first use: most jobs log nothing, and
// a logger's With would cost each of them its allocations.
func (j *job) logger() *slog.Logger {
	if j.lg == nil {
		j.lg = j.base.With("task_id", j.id, "task_type", j.task.Type(), "queue", j.queue, "policy", j.rt.policyName())
	}
	return j.lg
}

// budget is how long job j may wait in this process for its turn: its
// policy's MaxWait, no later than its context's deadline, and 0 once the pool
// is stopping.
func (p *Pool) budget(ctx context.Context, j *job) time.Duration {
	if p.stopping() {
		return 0
	}
	b := j.pol.maxWait
	if dl, ok := ctx.Deadline(); ok {
		b = min(b, time.Until(dl))
	}
	return max(b, 0)
}

// throttledFor is how long job j has been throttled: since it was first sent
// back, or since it was enqueued if it never was, or 0 if neither is known.
func (p *Pool) throttledFor(j *job) time.Duration {
	since := j.meta.ThrottledSince
	if since.IsZero() {
		since = j.meta.EnqueuedAt
	}
	if since.IsZero() {
		return 0
	}
	return max(j.start.Sub(since), 0)
}

// remaining is how much longer job j may be throttled before its horizon.
func (p *Pool) remaining(j *job) time.Duration {
	return p.cfg.Horizon - p.throttledFor(j) - time.Since(j.start)
}

func (p *Pool) pastHorizon(j *job, wait time.Duration) error {
	return &HorizonError{Throttled: p.throttledFor(j) + time.Since(j.start), Horizon: p.cfg.Horizon, Wait: wait}
}

// acquire reserves job j's tokens, unbounded up to its horizon, in one call.
// If its turn comes within the wait budget it waits for it and runs the
// handler; if the pool stops meanwhile the tokens go back and so does the job.
// If its turn is further off, the job goes back to its queue keeping the
// reservation as a ticket, to come back a little before its slot (see
// sendBackWith). If the turn would pass the horizon the job is archived.
func (p *Pool) acquire(ctx context.Context, j *job) error {
	if p.stopping() {
		return p.comeBack(ctx, j, shutdownDelay, time.Time{}, reasonShutdown)
	}
	if gone, err := p.holdFirst(ctx, j); gone {
		return err
	}
	budget := p.budget(ctx, j)
	tctx, span := p.tel.tracer.Start(ctx, "workers.throttle")
	r, err := p.cfg.Limiter.ReserveAll(tctx, j.buckets, max(p.remaining(j), budget))
	if err != nil {
		span.RecordError(err)
		span.End()
		return p.notReserved(ctx, j, err)
	}
	j.rate = r.AdaptiveRate() // the effective rate the turn was booked at, if adaptive
	d := r.Delay()
	span.SetAttributes(attribute.Float64("sluice.wait_s", d.Seconds()))
	if d > budget {
		span.AddEvent("ticket")
		span.End()
		why := reasonBudget
		if p.stopping() {
			why = reasonShutdown
		}
		return p.sendBackWith(ctx, j, r, why)
	}

	if d == 0 {
		// Its turn is now: no wait for a stopping pool or a rebooking to
		// cut short, so none is registered (most jobs of a limit that does
		// not bind, which would each pay a waiter's allocations).
		_ = r.Wait(tctx) // with no delay it only marks the grant taken
		span.End()
		p.waited(ctx, j.rt, 0)
		j.granted = r.Slot()
		return p.runHolding(ctx, j, r.Time())
	}
	wctx, cancel := context.WithCancel(tctx)
	defer cancel()
	w := &waiter{policy: j.rt.name, bucket: j.key, slot: r.Time(), cancel: cancel, done: make(chan struct{})}
	if !p.addWaiter(w) { // the pool began to stop since budget was read
		cancel()
	}
	done := p.startWaiting(ctx, j.rt)
	err = r.Wait(wctx) // if wctx ends first, Wait gives the tokens back
	done()
	p.removeWaiter(w)
	span.End()
	if err != nil {
		if ctx.Err() != nil {
			p.outcome(ctx, j.rt, outFailed)
			return ctx.Err()
		}
		if !p.stopping() {
			if moved, berr := p.rebound(j); berr != nil {
				return p.archive(ctx, j, permanent(berr))
			} else if moved || w.rebook.Load() { // SetPolicy, or a drop of the adaptive rate, woke it: its tokens went back
				return p.acquire(ctx, j)
			}
		}
		return p.comeBack(ctx, j, shutdownDelay, time.Time{}, reasonShutdown)
	}
	// A cooldown may have begun while it slept (a 429 on any host): its turn
	// must not run inside it. A job granted at once was reserved after any
	// cooldown began, and the bucket already held it back.
	if d > 0 {
		if sent, err := p.heedCooldown(ctx, j); sent {
			return err
		}
		if p.rateDropped(ctx, j) {
			return p.acquire(ctx, j)
		}
	}
	p.waited(ctx, j.rt, d)
	j.granted = r.Slot()
	return p.runHolding(ctx, j, r.Time())
}

// notReserved handles a reservation that was refused or failed.
func (p *Pool) notReserved(ctx context.Context, j *job, err error) error {
	var limited *throttle.LimitedError
	switch {
	case errors.As(err, &limited):
		return p.refused(ctx, j, limited, 0)
	case errors.Is(err, throttle.ErrInvalid): // say, a cost header larger than the burst
		return p.archive(ctx, j, permanent(fmt.Errorf("workers: policy %q: %w", j.pol.Name, err)))
	case ctx.Err() != nil:
		p.outcome(ctx, j.rt, outFailed)
		return ctx.Err()
	}
	j.logger().Debug("workers: limiter store unavailable; sending the job back", "err", err)
	return p.comeBack(ctx, j, backoffDelay(j.meta.Requeues), time.Time{}, reasonStore)
}

// refused handles a reservation the limiter refused, for a job that must not
// come back before after (a cooldown; 0 if none). A key over its fair share
// goes back to its place in its key's line (see overShare): that is a turn
// like any other, whatever the horizon. Any other refusal is a turn past the
// budget asked for, which was the time left before the horizon; the job is
// archived only if the wait indeed passes it, and sent back otherwise.
func (p *Pool) refused(ctx context.Context, j *job, limited *throttle.LimitedError, after time.Duration) error {
	wait := max(limited.RetryAfter, after)
	if limited.OverShare {
		return p.overShare(ctx, j, wait)
	}
	if wait > p.remaining(j) {
		return p.archive(ctx, j, p.pastHorizon(j, wait))
	}
	return p.comeBack(ctx, j, wait, time.Time{}, reasonBudget)
}

// redeem runs a job that holds a ticket: a turn booked before it was sent
// back (see ticket.go). It redeems the ticket, so that no other holder of
// the same id can, sleeps until the slot, since asynq may bring it back up to
// a second or so early, and runs the handler without asking for tokens
// again; a job that comes back late runs at once. A ticket that does not
// stand (unknown, expired, redeemed before, or unreadable for a store
// error) gives no turn: the job takes one like any other. A slot further
// off than the job could have been early sends it back again with a new
// ticket for the same slot, as does a pool that stops while it sleeps.
func (p *Pool) redeem(ctx context.Context, j *job) error {
	tk, ok := p.redeemTicket(ctx, j)
	if !ok {
		return p.acquire(ctx, j)
	}
	if void, why := p.ticketVoid(ctx, j, tk.Note); void {
		j.logger().Debug("workers: " + why + " since the ticket was booked; taking a new turn")
		return p.acquire(ctx, j)
	}
	slot := tk.Slot
	wait := time.Until(slot)
	if -wait > j.pol.late {
		// Its tokens were counted at its slot, long ago: run now with the
		// other late ones and they would bunch past the bucket's burst. The
		// turn is given up (its tokens wasted, never granted twice) for a new one.
		j.logger().Debug("workers: ticket too late; taking a new turn", "late", -wait)
		return p.acquire(ctx, j)
	}
	if wait <= 0 {
		if sent, err := p.heedCooldown(ctx, j); sent {
			return err
		}
		p.waited(ctx, j.rt, 0)
		j.granted = tk.At
		return p.runHolding(ctx, j, slot)
	}
	lead := p.lead(j.pol.maxWait)
	if p.stopping() {
		return p.comeBack(ctx, j, max(wait-lead, shutdownDelay), tk.At, reasonShutdown)
	}
	if wait > p.ticketTolerance(ctx, j, lead) {
		return p.comeBack(ctx, j, wait-lead, tk.At, reasonBudget)
	}

	_, span := p.tel.tracer.Start(ctx, "workers.throttle", trace.WithAttributes(
		attribute.Bool("sluice.ticket", true), attribute.Float64("sluice.wait_s", wait.Seconds())))
	// Registered as a waiter, so that a change of limits or a reset of the
	// bucket (SetPolicy, Replan) wakes it to take a new turn, and a stopping
	// pool sends it back holding its ticket.
	wake, stop := context.WithCancel(ctx)
	defer stop()
	w := &waiter{policy: j.rt.name, bucket: j.key, slot: slot, cancel: stop, done: make(chan struct{})}
	if !p.addWaiter(w) {
		stop()
	}
	done := p.startWaiting(ctx, j.rt)
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-wake.Done():
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case p.stopping():
			err = errStopping
		default:
			err = errRebook
		}
	case <-p.stopCtx.Done():
		err = errStopping
	}
	done()
	p.removeWaiter(w)
	span.End()
	switch {
	case err == errStopping:
		return p.comeBack(ctx, j, max(time.Until(slot)-lead, shutdownDelay), tk.At, reasonShutdown)
	case err == errRebook: // its turn is void: a new one, under the limits now
		if _, err := p.rebound(j); err != nil {
			return p.archive(ctx, j, permanent(err))
		}
		return p.acquire(ctx, j)
	case err != nil:
		p.outcome(ctx, j.rt, outFailed)
		return err
	}
	if moved, err := p.rebound(j); err != nil {
		return p.archive(ctx, j, permanent(err))
	} else if moved {
		return p.acquire(ctx, j)
	}
	if sent, err := p.heedCooldown(ctx, j); sent {
		return err
	}
	p.waited(ctx, j.rt, wait)
	j.granted = tk.At
	return p.runHolding(ctx, j, slot)
}

// heedCooldown sends back a job that booked its turn earlier (a ticket, or a
// wait in this process) if its bucket is now in a cooldown (an upstream 429
// or 503 seen by any host): a turn booked before the cooldown must not run
// inside it. The job gives the turn up and comes back after the cooldown to
// take a new one behind it. It costs such a job one store call, bounded by
// cooldownCheckTimeout; if the store cannot answer in time, the job keeps its
// turn, which the bucket already counted.
func (p *Pool) heedCooldown(ctx context.Context, j *job) (sent bool, err error) {
	sctx, cancel := context.WithTimeout(ctx, cooldownCheckTimeout)
	defer cancel()
	left, cerr := p.cfg.Limiter.CooldownLeft(sctx, j.key)
	if cerr != nil {
		j.logger().Debug("workers: cannot read the bucket's cooldown; keeping the turn", "err", cerr)
		return false, nil
	}
	if left <= 0 {
		return false, nil
	}
	trace.SpanFromContext(ctx).AddEvent("turn inside a cooldown")
	return true, p.comeBack(ctx, j, left, time.Time{}, reasonUpstream)
}

var (
	errStopping = errors.New("workers: pool stopping")
	errRebook   = errors.New("workers: the turn is void")
)

// ticketTolerance is how long a job holding a ticket may sleep for its slot:
// its wait budget, or the most a come-back can be early (the lead it was sent
// with plus asynq's truncation of due times to whole seconds), whichever is
// longer; never past its context's deadline.
func (p *Pool) ticketTolerance(ctx context.Context, j *job, lead time.Duration) time.Duration {
	tol := max(p.budget(ctx, j), lead+queue.MinRetryDelay+ticketSlack)
	if dl, ok := ctx.Deadline(); ok {
		tol = min(tol, time.Until(dl))
	}
	return tol
}

// ticketSlack allows for clock steps between a ticket's issue and its use.
const ticketSlack = 250 * time.Millisecond

// run calls the handler and handles its error:
//
//   - an *UpstreamError cools the task's bucket down for the whole fleet and
//     sends the job back with a turn after the cooldown (see upstream);
//   - a queue.ThrottledError sends the job back after its RetryAfter;
//   - any other error goes to asynq unchanged: a failure, retried or archived
//     by the task's MaxRetry.
func (p *Pool) run(ctx context.Context, j *job) error {
	return p.result(ctx, j, j.rt.h.ProcessTask(ctx, j.task))
}

// result handles err, what job j's handler returned; see run.
func (p *Pool) result(ctx context.Context, j *job, err error) error {
	if err == nil {
		p.outcome(ctx, j.rt, outDone)
		if j.pol != nil && j.pol.adaptive != nil {
			p.adaptSucceeded(ctx, j)
			p.applyNote(ctx, j)
		}
		return nil
	}
	var up *UpstreamError
	if errors.As(err, &up) {
		return p.upstream(ctx, j, up)
	}
	if errors.Is(err, queue.ErrThrottled) {
		return p.handlerThrottled(ctx, j, err)
	}
	span := trace.SpanFromContext(ctx)
	span.RecordError(err)
	span.SetStatus(codes.Error, "handler failed")
	p.outcome(ctx, j.rt, outFailed)
	spent := j.meta.HasMaxRetry && j.retried >= j.meta.MaxRetry
	if max, ok := asynq.GetMaxRetry(ctx); ok && !j.meta.HasMaxRetry {
		spent = j.retried >= max
	}
	if spent || errors.Is(err, asynq.SkipRetry) {
		// asynq archives the job: count it, so that the pool's Archived is
		// every job archived in its hands (the metric keeps it a failure).
		j.logger().Warn("workers: handler failed for the last time; asynq archives the job", "err", err)
		p.stats.archived.Add(1)
		if spent && !errors.Is(err, asynq.SkipRetry) {
			// The job's own budget is spent. asynq holds one retry more (see
			// queue.Client.Enqueue), kept for a worker that dies; not for this.
			return fmt.Errorf("%w (its %d retries are spent): %w", err, j.meta.MaxRetry, asynq.SkipRetry)
		}
		return err
	}
	j.logger().Warn("workers: handler failed; asynq retries the job", "err", err, "retried", j.retried)
	return err
}

// upstream handles a handler's *UpstreamError: it puts the task's own bucket
// (not the policy's global one) in cooldown for RetryAfter, or for an
// exponential backoff on the job's requeues when the upstream did not say,
// so that no host takes from it meanwhile; then it reserves this job a turn
// after the cooldown and sends it back holding it. Jobs that hit the 429
// together each get their own later turn, so they come back one at a time.
// None of this is a failure or spends a retry.
func (p *Pool) upstream(ctx context.Context, j *job, up *UpstreamError) error {
	// The rule httplimit.Transport applies too (backoff.Upstream), with the
	// pool's jittered backoff for a refusal without Retry-After.
	d, cool, _ := backoff.Upstream(up.StatusCode, up.RetryAfter, up.RetryAfter > 0, j.meta.Requeues)
	if up.RetryAfter <= 0 {
		d = backoffDelay(j.meta.Requeues)
	}
	trace.SpanFromContext(ctx).AddEvent("upstream refused", trace.WithAttributes(
		attribute.Int("http.response.status_code", up.StatusCode), attribute.Float64("sluice.cooldown_s", d.Seconds())))
	if j.pol != nil && j.pol.adaptive != nil {
		p.applyNote(ctx, j)
		p.adaptRefused(ctx, j)
	}
	if !cool {
		j.logger().Info("workers: upstream unavailable (503 without Retry-After); the job comes back later, the bucket goes on",
			"status", up.StatusCode, "after", d, "reason", up.Reason)
		if d > p.remaining(j) {
			return p.archive(ctx, j, p.pastHorizon(j, d))
		}
		return p.comeBack(ctx, j, d, time.Time{}, reasonUpstream)
	}
	j.logger().Info("workers: upstream refused the job; cooling its bucket down",
		"status", up.StatusCode, "cooldown", d, "reason", up.Reason)
	if j.pol == nil {
		if d > p.remaining(j) {
			return p.archive(ctx, j, p.pastHorizon(j, d))
		}
		return p.comeBack(ctx, j, d, time.Time{}, reasonUpstream)
	}

	// The handler's context may be over; these calls get one of their own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := p.cfg.Limiter.Cooldown(sctx, j.key, j.buckets[0].Limit, d); err != nil {
		j.logger().Debug("workers: limiter store unavailable; cannot put the bucket in cooldown", "err", err)
	} else {
		p.cooledDown(ctx, j.rt)
	}
	rem := p.remaining(j)
	if d > rem {
		return p.archive(ctx, j, p.pastHorizon(j, d))
	}
	r, err := p.cfg.Limiter.ReserveAll(sctx, j.buckets, max(rem, 0))
	var limited *throttle.LimitedError
	switch {
	case errors.As(err, &limited): // over its key's share, most often: not the horizon
		return p.refused(ctx, j, limited, d)
	case err != nil:
		j.logger().Debug("workers: limiter store unavailable; sending the job back without a turn", "err", err)
		return p.comeBack(ctx, j, d, time.Time{}, reasonUpstream)
	}
	j.rate = r.AdaptiveRate()
	return p.sendBackWith(ctx, j, r, reasonUpstream)
}

// storeTimeout bounds the limiter calls made after a handler returned.
const storeTimeout = 5 * time.Second

// cooldownCheckTimeout bounds heedCooldown's store call: the job's turn has
// come, and a slow or dead store must not make it late (the check is a guard;
// the turn is already counted).
const cooldownCheckTimeout = 50 * time.Millisecond

// handlerThrottled sends back a job whose handler returned a
// queue.ThrottledError, to run again after its RetryAfter (or a backoff on
// its requeues for a bare queue.ErrThrottled), without a ticket.
func (p *Pool) handlerThrottled(ctx context.Context, j *job, err error) error {
	d := backoffDelay(j.meta.Requeues)
	var te *queue.ThrottledError
	if errors.As(err, &te) {
		d = te.RetryAfter
	}
	if d > p.remaining(j) {
		return p.archive(ctx, j, p.pastHorizon(j, d))
	}
	j.logger().Debug("workers: handler says come back later", "err", err)
	return p.comeBack(ctx, j, d, time.Time{}, reasonHandler)
}

// archive returns err, which wraps asynq.SkipRetry, so that asynq archives
// the job with err's message as its last error.
func (p *Pool) archive(ctx context.Context, j *job, err error) error {
	j.logger().Warn("workers: archiving job", "err", err)
	span := trace.SpanFromContext(ctx)
	span.RecordError(err)
	span.SetStatus(codes.Error, "archived")
	p.outcome(ctx, j.rt, outArchived)
	return err
}
