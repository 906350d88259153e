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

// This file is a job's life in this process, from asynq handing it to the
// pool to the pool handing it back, in the order it is lived. process moves
// the job from step to step; each step returns the job's fate: the next step,
// or an end. settle decides and records every end, as asynq's processor ends
// every task in one place (handleFailedMessage: retry or archive).
//
//	step         when                                           fate
//	dequeued     sent back already (asynq hands it over again:
//	             a worker lost with it, its copy made)          copied
//	             an unthrottled type                            run
//	             no bucket key can be derived from the task,
//	             or its cost cannot be read or taken (ErrCost)  archive
//	             it holds a ticket                              redeem
//	             otherwise                                      take a turn
//	redeem       no ticket, or void (the limit changed, the
//	             adaptive rate dropped), or too late            take a turn
//	             its slot further off, or the pool stopping     back, keeping its ticket
//	             its slot now or soon: sleep until it           run
//	               woken by a change of limits or a reset       take a turn
//	               a cooldown began since it was booked         back after the cooldown
//	take a turn  its upstream's adaptive bucket cold: wait for
//	             the fleet's probe to be answered, or be it     (coldstart.go)
//	             no in-flight slot within the wait budget       back (archive past the horizon)
//	             its turn further off than the budget           back, holding it as a ticket
//	             its turn within the budget: wait for it        run
//	               woken by a change of limits or a lower rate  take a turn
//	               a cooldown began meanwhile                   back after the cooldown
//	             over its key's fair share, its place near      place
//	             its policy's costs settled (NamedLimit.SettleFrom),
//	             which books no turn ahead: its tokens not there
//	               now, but within the budget                   place (unbooked)
//	               further off                                  back, without a ticket (archive past the horizon)
//	             over its key's fair share                      back to its place (archive past the horizon)
//	             refused until a calendar quota's reset         parked: back after the reset, never
//	                                                            archived for it (quota.go)
//	             refused otherwise                              back (archive past the horizon)
//	             the limiter's store down, the pool stopping    back
//	place        its place has come, or a job's charge gave
//	             tokens back (costs settled)                    take a turn
//	run          no in-flight slot while a ticket's turn is
//	             fresh                                          take a turn
//	             the handler returned nil                       done, charged
//	                                                            what it used (charge)
//	             an *UpstreamError: the bucket cools down       back, holding a turn after it (archive past the horizon)
//	             a queue.ThrottledError                         back after its RetryAfter (archive past the horizon)
//	             an error, its in-flight slot lost meanwhile    back
//	             any other error                                failed: asynq retries or archives it
//	any          its context ended                              gone: asynq has it
//	             its policy cannot take it (a cost over its
//	             burst, no bucket key under a changed policy)   archive
//
// A job goes back as a copy (sendBack) and asynq drops the original, so
// throttling spends no retry and archives nothing, whatever the job's
// MaxRetry. The only throttle that archives is the horizon: a job that would
// come back from a throttle's wait past Config.Horizon (settle).

// job is one run of one task in this process.
type job struct {
	task    *asynq.Task
	rt      *route
	pol     *policy               // the route's policy when the job began (SetPolicy may change it since); nil: unthrottled
	note    upstreamNote          // what the handler observed of the upstream's quota (ObserveResponse)
	used    usageNote             // the answer the handler observed, to read what it used (ObserveUsage)
	res     *throttle.Reservation // the turn it runs on, if it took one here (not a ticket): charge settles it
	granted time.Time             // the slot its tokens were granted for, on the store's clock (Granted); zero if none
	rate    float64               // the adaptive rate the job's turn was booked at (effective); 0 if none
	retook  bool                  // it gave up a turn it woke too late for (acquire)
	meta    queue.Meta            // the task's sluice headers; a malformed one is left zero
	retried int                   // asynq's retry count of this run
	start   time.Time
	id      string       // asynq's task id
	queue   string       // the queue asynq took the task from
	lg      *slog.Logger // the job's logger, made on first use (logger)
	base    *slog.Logger // the pool's logger

	buckets []throttle.Bucket // the policy's buckets for this task
	key     string            // the task's own bucket
	up      int               // the index in buckets of the upstream's: where its cooldowns and announcements go
	sem     string            // the task's in-flight semaphore, if its policy has InFlight
	lease   *throttle.Lease   // its slot of sem while held before the handler (see holdFirst)
	probe   *throttle.Lease   // its claim to ask a cold upstream first, until its answer is reported (coldstart.go)
	park    *parkNote         // the reset it is parked for, when its fate is to be parked (quota.go)
}

// fate is what becomes of a job next: a step of its life, or an end.
type fate struct {
	next  next
	delay time.Duration // toBack: how long it stays away; toPlace: how long it waits here
	slot  time.Time     // toBack: the turn it keeps as a ticket (zero: none); toRun: the slot of its turn
	why   reason        // toBack: why it goes back
	bound bool          // toBack: a throttle's wait, archived instead if it ends past the horizon
	err   error         // toArchive: the reason; toFailed, toGone: what asynq gets
}

type next int

const (
	toTurn  next = iota // take a turn: its in-flight slot, then its tokens (acquire)
	toPlace             // wait here for its place in its key's line, then take a turn (place)
	toRun               // run the handler: its turn is now (runHolding)

	// The ends, which settle decides and records.
	toDone    // the handler succeeded
	toFailed  // the handler failed: asynq retries the job, or archives it
	toGone    // its context ended: asynq has the job already
	toBack    // back to its queue, to come back after delay
	toCopied  // sent back already: its copy carries the job (superseded)
	toArchive // archived by the pool
)

// back is the fate of a job sent back for why, to come back after delay.
func back(delay time.Duration, why reason) fate { return fate{next: toBack, delay: delay, why: why} }

// backOrArchive is back, for a throttle's wait: the job is archived instead
// if it would come back past its horizon.
func backOrArchive(delay time.Duration, why reason) fate {
	return fate{next: toBack, delay: delay, why: why, bound: true}
}

// holding is f, with the job keeping its turn at slot as a ticket.
func (f fate) holding(slot time.Time) fate { f.slot = slot; return f }

func archived(err error) fate { return fate{next: toArchive, err: err} }
func gone(err error) fate     { return fate{next: toGone, err: err} }

// takeTurn is the fate of a job that takes a turn (anew).
var takeTurn = fate{next: toTurn}

// runAt is the fate of a job whose turn, at slot, is now.
func runAt(slot time.Time) fate { return fate{next: toRun, slot: slot} }

// process is the pool's asynq handler: it takes a job through its life (see
// the file's comment) and returns what settle decides.
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
	if j.pol != nil && j.pol.settles {
		ctx = context.WithValue(ctx, usageKey{}, &j.used)
	}
	f := runAt(time.Time{})
	if p.superseded(ctx, j) {
		f = fate{next: toCopied}
	} else if j.pol != nil {
		if pu := j.meta.ParkedUntil; !pu.IsZero() && time.Now().Before(pu.Add(parkSpread+parkForget)) {
			p.unpark(ctx, j) // it comes back from a park, listed until then (quota.go)
		}
		defer p.letGo(ctx, j)
		defer func() {
			if j.probe != nil { // it probed a cold bucket (coldstart.go)
				p.endProbe(ctx, j)
			}
		}()
		f = p.begin(ctx, j)
	}
	for {
		switch f.next {
		case toTurn:
			f = p.acquire(ctx, j)
		case toPlace:
			f = p.place(ctx, j, f.delay)
		case toRun:
			f = p.runHolding(ctx, j, f.slot)
		default:
			return p.settle(ctx, j, f)
		}
	}
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
		j.lg = j.base.With("task_id", j.id, "task_type", j.task.Type(), "queue", j.queue, "policy", j.rt.name)
	}
	return j.lg
}

// upstream is the key of the bucket job j's upstream's refusals and
// announcements apply to: its own, or Global (see Policy.AdaptKey).
func (j *job) upstream() string { return j.buckets[j.up].Key }

// begin is a throttled job's first step: a task whose bucket key cannot be
// derived, or whose cost cannot be read or taken, is archived; one holding a
// ticket redeems it; any other takes a turn.
func (p *Pool) begin(ctx context.Context, j *job) fate {
	if err := p.bind(j); err != nil {
		return archived(permanent(err))
	}
	if j.meta.Ticket != "" {
		return p.redeem(ctx, j)
	}
	return takeTurn
}

// bind works out job j's buckets (one per limit of its policy, and the
// global one), the tokens it takes from each, and its in-flight semaphore
// under j.pol.
func (p *Pool) bind(j *job) error {
	var err error
	if j.buckets, j.key, err = j.pol.buckets(j.task, j.meta); err != nil {
		return err
	}
	j.up = j.pol.upstreamOf(j.buckets)
	j.sem = ""
	if j.pol.bounded() {
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

// redeem is the step of a job that holds a ticket: a turn booked before it
// was sent back (see ticket.go). It redeems the ticket, so that no other
// holder of the same id can, sleeps until the slot, since asynq may bring it
// back up to a second or so early, and runs the handler without asking for
// tokens again; a job that comes back late runs at once. A ticket that does
// not stand (unknown, expired, redeemed before, or unreadable for a store
// error) gives no turn: the job takes one like any other. A slot further off
// than the job could have been early sends it back again with its ticket for
// the same slot, as does a pool that stops while it sleeps.
func (p *Pool) redeem(ctx context.Context, j *job) fate {
	tk, ok := p.redeemTicket(ctx, j)
	if !ok {
		return takeTurn
	}
	if void, why := p.ticketVoid(ctx, j, tk.Note); void {
		j.logger().Debug("workers: " + why + " since the ticket was booked; taking a new turn")
		return takeTurn
	}
	slot := tk.Slot
	wait := time.Until(slot)
	if -wait > j.pol.late {
		// Its tokens were counted at its slot, long ago: run now with the
		// other late ones and they would bunch past the bucket's burst. The
		// turn is given up (its tokens wasted, never granted twice) for a new one.
		j.logger().Debug("workers: ticket too late; taking a new turn", "late", -wait)
		return takeTurn
	}
	if wait <= 0 {
		if f, sent := p.heedCooldown(ctx, j); sent {
			return f
		}
		p.waited(ctx, j.rt, 0)
		j.granted = tk.At
		return runAt(slot)
	}
	lead := p.lead(j.pol.maxWait)
	if p.stopping() {
		return back(max(wait-lead, shutdownDelay), reasonShutdown).holding(tk.At)
	}
	if wait > p.ticketTolerance(ctx, j, lead) {
		return back(wait-lead, reasonBudget).holding(tk.At)
	}

	_, span := p.tel.tracer.Start(ctx, "workers.throttle", trace.WithAttributes(
		attribute.Bool("sluice.ticket", true), attribute.Float64("sluice.wait_s", wait.Seconds())))
	// Registered as a waiter, so that a change of limits or a reset of the
	// bucket (SetPolicy, Replan) wakes it to take a new turn, and a stopping
	// pool sends it back holding its ticket.
	wake, stop := context.WithCancel(ctx)
	defer stop()
	w := &waiter{policy: j.rt.name, bucket: j.upstream(), slot: slot, cancel: stop, done: make(chan struct{})}
	if !p.addWaiter(w) {
		stop()
	}
	done := p.startWaiting(ctx, j)
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
		return back(max(time.Until(slot)-lead, shutdownDelay), reasonShutdown).holding(tk.At)
	case err == errRebook: // its turn is void: a new one, under the limits now
		if _, err := p.rebound(j); err != nil {
			return archived(permanent(err))
		}
		return takeTurn
	case err != nil:
		return gone(err)
	}
	if moved, err := p.rebound(j); err != nil {
		return archived(permanent(err))
	} else if moved {
		return takeTurn
	}
	if f, sent := p.heedCooldown(ctx, j); sent {
		return f
	}
	p.waited(ctx, j.rt, wait)
	j.granted = tk.At
	return runAt(slot)
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

// acquire is the step of a job taking a turn. It holds the job's in-flight
// slot first, if its policy bounds them (see inflight.go), then reserves its
// tokens, unbounded up to its horizon, in one call. If its turn comes within
// the wait budget it waits for it, and runs; if the pool stops meanwhile the
// tokens go back and so does the job, and if a change of limits or a drop
// of the adaptive rate wakes it, the tokens go back and it takes a new turn.
// If its turn is further off, the job goes back to its queue keeping the
// reservation as a ticket, to come back a little before its slot (see
// sendBackWith). A refusal is the limiter's answer (see refused). A job of
// a policy whose costs are settled books no turn ahead: it takes its tokens
// if they are there now, and is refused otherwise.
func (p *Pool) acquire(ctx context.Context, j *job) fate {
	j.res = nil
	if p.stopping() {
		return back(shutdownDelay, reasonShutdown)
	}
	if j.pol.adaptive != nil { // a cold bucket asks its upstream first (coldstart.go)
		if f, ok := p.askFirst(ctx, j); !ok {
			return f
		}
	}
	if f, held := p.holdFirst(ctx, j); !held {
		return f
	}
	budget := p.budget(ctx, j)
	tctx, span := p.tel.tracer.Start(ctx, "workers.throttle")
	ahead := p.beforeReset(j, max(p.remaining(j), budget))
	if j.pol.settles {
		// A turn booked ahead would stand on the bookings of the jobs
		// running now, and their charge could give nothing back (see
		// charge): the job takes its tokens only when they are there, and
		// waits for them unbooked (place).
		ahead = 0
	}
	r, err := p.cfg.Limiter.ReserveAll(tctx, j.buckets, ahead)
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
		return p.sendBackWith(j, r, why)
	}

	if d == 0 {
		// Its turn is now: no wait for a stopping pool or a rebooking to
		// cut short, so none is registered (most jobs of a limit that does
		// not bind, which would each pay a waiter's allocations). It was
		// reserved after any cooldown began: the bucket held it back.
		_ = r.Wait(tctx) // with no delay it only marks the grant taken
		span.End()
		p.waited(ctx, j.rt, 0)
		j.granted, j.res = r.Slot(), r
		return runAt(r.Time())
	}
	wctx, cancel := context.WithCancel(tctx)
	defer cancel()
	w := &waiter{policy: j.rt.name, bucket: j.upstream(), slot: r.Time(), cancel: cancel, done: make(chan struct{})}
	if !p.addWaiter(w) { // the pool began to stop since budget was read
		cancel()
	}
	done := p.startWaiting(ctx, j)
	err = r.Wait(wctx) // if wctx ends first, Wait gives the tokens back
	done()
	p.removeWaiter(w)
	span.End()
	if err != nil {
		if ctx.Err() != nil {
			return gone(ctx.Err())
		}
		if !p.stopping() {
			if moved, berr := p.rebound(j); berr != nil {
				return archived(permanent(berr))
			} else if moved || w.rebook.Load() { // SetPolicy, or a drop of the adaptive rate, woke it: its tokens went back
				return takeTurn
			}
		}
		return back(shutdownDelay, reasonShutdown)
	}
	// A cooldown may have begun while it slept (a 429 on any host): its turn
	// must not run inside it.
	if f, sent := p.heedCooldown(ctx, j); sent {
		return f
	}
	if p.rateDropped(ctx, j) {
		return takeTurn
	}
	// A turn reached long after its slot (the process stalled: a loaded
	// host, a pause) would go out with every turn that came due
	// meanwhile, together, past the upstream's burst: as a late ticket
	// does, it gives the turn up (its tokens spent, never granted twice)
	// and takes a new one; once, so that a host slow every time still runs.
	if staleTurn(j, r.Time(), time.Now()) {
		j.logger().Debug("workers: the job woke long after its turn; taking a new one", "late", time.Since(r.Time()))
		return takeTurn
	}
	p.waited(ctx, j.rt, d)
	j.granted, j.res = r.Slot(), r
	return runAt(r.Time())
}

// staleTurn reports whether job j, awake at now for its turn at slot (on
// this process's clock), is later than its policy honours a ticket
// (policy.late) and has not given up a turn for that before; it marks that
// it has.
func staleTurn(j *job, slot, now time.Time) bool {
	if now.Sub(slot) <= j.pol.late || j.retook {
		return false
	}
	j.retook = true
	return true
}

// holdFirst takes job j's in-flight slot, if its policy bounds them and it
// holds none yet, waiting up to its wait budget; process releases it (letGo)
// unless the handler ran holding it. With no slot, held is false and f is
// the job's fate (see noSlot).
func (p *Pool) holdFirst(ctx context.Context, j *job) (f fate, held bool) {
	if j.sem == "" || j.lease != nil {
		return fate{}, true
	}
	lease, err := p.holdSlot(ctx, j, p.budget(ctx, j))
	if err != nil {
		return p.noSlot(ctx, j, err), false
	}
	j.lease = lease
	return fate{}, true
}

// noSlot is the fate of a job that got no in-flight slot.
func (p *Pool) noSlot(ctx context.Context, j *job, err error) fate {
	var limited *throttle.LimitedError
	switch {
	case errors.Is(err, throttle.ErrInvalid):
		return archived(permanent(fmt.Errorf("workers: policy %q: %w", j.pol.Name, err)))
	case ctx.Err() != nil:
		return gone(ctx.Err())
	case p.stopping():
		return back(shutdownDelay, reasonShutdown)
	case errors.As(err, &limited), errors.Is(err, context.DeadlineExceeded):
		// No slot within the budget: when one comes free is anyone's guess,
		// so the job backs off on its requeues.
		return backOrArchive(backoffDelay(j.meta.Requeues), reasonInFlight)
	}
	j.logger().Debug("workers: limiter store unavailable; sending the job back", "err", err)
	return back(backoffDelay(j.meta.Requeues), reasonStore)
}

// notReserved is the fate of a job whose reservation was refused or failed.
func (p *Pool) notReserved(ctx context.Context, j *job, err error) fate {
	var limited *throttle.LimitedError
	switch {
	case errors.As(err, &limited):
		return p.refused(ctx, j, limited, 0)
	case errors.Is(err, throttle.ErrInvalid): // say, a cost header larger than the burst
		return archived(permanent(fmt.Errorf("workers: policy %q: %w", j.pol.Name, err)))
	case ctx.Err() != nil:
		return gone(ctx.Err())
	}
	j.logger().Debug("workers: limiter store unavailable; sending the job back", "err", err)
	return back(backoffDelay(j.meta.Requeues), reasonStore)
}

// refused is the fate of a job whose reservation the limiter refused, for a
// job that must not come back before after (a cooldown; 0 if none). A key
// over its fair share goes to its place in its key's line (see share.go):
// that is a turn like any other, whatever the horizon; a place within
// shareHold and the wait budget is waited for here. Any other refusal is a
// turn past the budget asked for, which was the time left before the
// horizon: settle archives the job only if the wait indeed passes it.
func (p *Pool) refused(ctx context.Context, j *job, limited *throttle.LimitedError, after time.Duration) fate {
	wait := max(limited.RetryAfter, after)
	if !limited.OverShare && p.quotaWait(j, wait) {
		return p.park(ctx, j, wait)
	}
	if !limited.OverShare {
		if j.pol.settles && wait <= p.budget(ctx, j) && wait <= p.remaining(j) {
			return fate{next: toPlace, delay: wait} // its tokens, unbooked (see acquire)
		}
		return backOrArchive(wait, reasonBudget)
	}
	trace.SpanFromContext(ctx).AddEvent("over its share", trace.WithAttributes(attribute.Float64("sluice.place_s", wait.Seconds())))
	if wait <= shareHold && wait <= p.budget(ctx, j) && wait <= p.remaining(j) {
		return fate{next: toPlace, delay: wait}
	}
	return backOrArchive(wait, reasonShare)
}

// place is the step of a job waiting here for its place in its key's line,
// d from now, or, for a policy whose costs are settled, for its tokens,
// unbooked: d from now, or sooner if a job's charge gives tokens back; then
// it takes a turn.
func (p *Pool) place(ctx context.Context, j *job, d time.Duration) fate {
	t := time.NewTimer(d)
	defer t.Stop()
	var gaveBack <-chan struct{}
	if j.pol.settles {
		gaveBack = j.rt.gaveBack
	}
	select {
	case <-t.C:
		return takeTurn
	case <-gaveBack:
		return takeTurn
	case <-ctx.Done():
		return gone(ctx.Err())
	case <-p.stopCtx.Done():
		return back(shutdownDelay, reasonShutdown)
	}
}

// sendBackWith is the fate of a job sent back holding reservation r as its
// ticket: it comes back a little before r's slot and runs then without
// asking for tokens again. Each job throttled this way goes back once, at
// its own slot, so come-backs are spread exactly as the bucket allows.
//
// r is never cancelled, even if sending back fails: a failed enqueue may
// still have happened (a timed-out script can run after the client gave up),
// and a copy holding a refunded turn would run on tokens handed out twice. A
// lost ticket only wastes its tokens.
func (p *Pool) sendBackWith(j *job, r *throttle.Reservation, why reason) fate {
	delay := r.Delay() - p.lead(j.pol.maxWait)
	if why == reasonShutdown {
		delay = max(delay, shutdownDelay)
	}
	return back(delay, why).holding(r.Slot())
}

// heedCooldown sends back a job that booked its turn earlier (a ticket, or a
// wait in this process) if its own bucket or its upstream's is now in a
// cooldown (an upstream 429 or 503 seen by any host, an operator's): a turn
// booked before the cooldown must not run inside it. The job gives the turn
// up and comes back after the cooldown to take a new one behind it. It costs
// such a job one store call (two when its upstream's bucket is Global),
// bounded by cooldownCheckTimeout; if the store cannot answer in time, the
// job keeps its turn, which the bucket already counted.
func (p *Pool) heedCooldown(ctx context.Context, j *job) (f fate, sent bool) {
	sctx, cancel := context.WithTimeout(ctx, cooldownCheckTimeout)
	defer cancel()
	left, err := p.cfg.Limiter.CooldownLeft(sctx, j.key)
	if up := j.upstream(); err == nil && up != j.key {
		// An operator may cool a key's own bucket; the upstream cools Global.
		var upLeft time.Duration
		upLeft, err = p.cfg.Limiter.CooldownLeft(sctx, up)
		left = max(left, upLeft)
	}
	if err != nil {
		j.logger().Debug("workers: cannot read the bucket's cooldown; keeping the turn", "err", err)
		return fate{}, false
	}
	if left <= 0 {
		return fate{}, false
	}
	trace.SpanFromContext(ctx).AddEvent("turn inside a cooldown")
	return back(left, reasonUpstream), true
}

// cooldownCheckTimeout bounds heedCooldown's store call: the job's turn has
// come, and a slow or dead store must not make it late (the check is a guard;
// the turn is already counted).
const cooldownCheckTimeout = 50 * time.Millisecond

// runHolding is the step of a job whose turn is now, at turn: it runs the
// handler, holding one of its policy's in-flight slots if the policy bounds
// them. A job that holds none yet (it came back with a ticket for its turn)
// waits for one as long as its wait budget and its turn's freshness allow;
// with none by then its turn is spent, and it takes a new one as a job that
// has none does: its slot first, then its turn.
func (p *Pool) runHolding(ctx context.Context, j *job, turn time.Time) fate {
	if j.sem == "" {
		p.started(j)
		return p.result(ctx, j, j.rt.h.ProcessTask(ctx, j.task))
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
			return takeTurn
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
		return back(backoffDelay(j.meta.Requeues), reasonInFlight)
	}
	return p.result(ctx, j, err)
}

// result is the fate of a job whose handler returned err:
//
//   - nil: done; what the handler saw of the upstream's quota, and its
//     success, go to an adaptive bucket, and the job's turn is charged
//     what the answer says it used (charge);
//   - an *UpstreamError cools the task's bucket down for the whole fleet and
//     sends the job back with a turn after the cooldown (see upstream);
//   - a queue.ThrottledError sends the job back after its RetryAfter (or a
//     backoff on its requeues for a bare queue.ErrThrottled), without a
//     ticket;
//   - any other error goes to asynq unchanged: a failure, retried or
//     archived by the task's MaxRetry.
func (p *Pool) result(ctx context.Context, j *job, err error) fate {
	p.warnMalformed(j)
	if err == nil {
		if j.pol != nil && j.pol.adaptive != nil {
			// The announcement first: a cold bucket's first answer is
			// the one the fleet waits for (coldstart.go), and reported
			// first, the success would end the cold start at the
			// ceiling for the moment before the announcement, in which
			// other processes would take turns at it.
			p.applyNote(ctx, j)
			p.adaptSucceeded(ctx, j)
		}
		if j.pol != nil && j.pol.settles { // charged what it really used (charge.go)
			p.charge(ctx, j)
		}
		return fate{next: toDone}
	}
	var up *UpstreamError
	if errors.As(err, &up) {
		return p.upstream(ctx, j, up)
	}
	if errors.Is(err, queue.ErrThrottled) {
		d := backoffDelay(j.meta.Requeues)
		var te *queue.ThrottledError
		if errors.As(err, &te) {
			d = te.RetryAfter
		}
		j.logger().Debug("workers: handler says come back later", "err", err)
		return backOrArchive(d, reasonHandler)
	}
	return fate{next: toFailed, err: err}
}

// upstream is the fate of a job whose handler returned an *UpstreamError: it
// puts the upstream's bucket (the task's own, or with Key and Global the
// global one, unless Policy.AdaptKey) in cooldown for RetryAfter, or for an
// exponential backoff on the job's requeues when the upstream did not say,
// so that no host takes from it meanwhile; then it reserves this job a turn
// after the cooldown, which it goes back holding.
// Jobs that hit the 429 together each get their own later turn, so they come
// back one at a time. None of this is a failure or spends a retry.
func (p *Pool) upstream(ctx context.Context, j *job, up *UpstreamError) fate {
	// The rule httplimit.Transport applies too (backoff.UpstreamRule), with
	// the pool's jittered backoff for a refusal without Retry-After.
	d, cool, _ := backoff.UpstreamRule{}.Answer(up.answer(), j.meta.Requeues)
	if up.RetryAfter <= 0 {
		d = backoffDelay(j.meta.Requeues)
	}
	p.count(j.rt, cRefused)
	trace.SpanFromContext(ctx).AddEvent("upstream refused", trace.WithAttributes(
		attribute.Int("http.response.status_code", up.StatusCode), attribute.Float64("sluice.cooldown_s", d.Seconds())))
	if j.pol != nil && j.pol.adaptive != nil && !p.applyNote(ctx, j) {
		// A quota spent at a rate the upstream said is its reset's wait,
		// not an overload: the rate stands (applyNote).
		p.adaptRefused(ctx, j)
	}
	if !cool {
		j.logger().Info("workers: upstream unavailable (503 without Retry-After); the job comes back later, the bucket goes on",
			"status", up.StatusCode, "after", d, "reason", up.Reason)
		return backOrArchive(d, reasonUpstream)
	}
	j.logger().Info("workers: upstream refused the job; cooling its bucket down",
		"status", up.StatusCode, "cooldown", d, "reason", up.Reason)
	if j.pol == nil {
		return backOrArchive(d, reasonUpstream)
	}

	// The handler's context may be over; these calls get one of their own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := p.cfg.Limiter.Cooldown(sctx, j.upstream(), j.buckets[j.up].Limit, d); err != nil {
		j.logger().Debug("workers: limiter store unavailable; cannot put the bucket in cooldown", "err", err)
	} else {
		p.cooledDown(ctx, j.rt)
	}
	rem := p.remaining(j)
	if d > rem {
		return backOrArchive(d, reasonUpstream) // past the horizon: settle archives it
	}
	r, err := p.cfg.Limiter.ReserveAll(sctx, j.buckets, p.beforeReset(j, max(rem, 0)))
	var limited *throttle.LimitedError
	switch {
	case errors.As(err, &limited): // over its key's share, most often: not the horizon
		return p.refused(ctx, j, limited, d)
	case err != nil:
		j.logger().Debug("workers: limiter store unavailable; sending the job back without a turn", "err", err)
		return back(d, reasonUpstream)
	}
	j.rate = r.AdaptiveRate()
	return p.sendBackWith(j, r, reasonUpstream)
}

// storeTimeout bounds the limiter calls made after a handler returned.
const storeTimeout = 5 * time.Second

// settle ends job j's life in this process as f says, records how it ended,
// and returns what asynq is to do with the task: nil to drop it (done, or a
// copy is on its queue in its place), or an error for asynq to retry or
// archive it by. It is the one place a job's end is decided: a job sent
// back for a throttle's wait is archived instead if it would come back
// past its horizon, and a throttled job is never handed to asynq's retry
// or archive path while it can still be sent back (see sendBack).
func (p *Pool) settle(ctx context.Context, j *job, f fate) error {
	if f.next == toBack && f.bound && f.delay > p.remaining(j) {
		f = archived(p.pastHorizon(j, f.delay))
	}
	switch f.next {
	case toDone:
		p.outcome(ctx, j.rt, outDone)
		return nil
	case toBack:
		return p.sendBack(ctx, j, f.delay, f.slot, f.why)
	case toCopied:
		j.logger().Info("workers: dropping a job asynq handed over again: it was sent back before, and its copy carries it")
		return nil
	case toGone:
		p.outcome(ctx, j.rt, outFailed)
		return f.err
	case toArchive:
		// f.err wraps asynq.SkipRetry: asynq archives the job with its
		// message as the last error.
		j.logger().Warn("workers: archiving job", "err", f.err)
		span := trace.SpanFromContext(ctx)
		span.RecordError(f.err)
		span.SetStatus(codes.Error, "archived")
		p.outcome(ctx, j.rt, outArchived)
		return f.err
	}
	// toFailed: the handler failed.
	err := f.err
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
		p.asynqArchived(j.rt)
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
// back, or since it was enqueued if it never was, or 0 if neither is known;
// a job parked for a calendar quota's reset counts from the reset (or from
// now, brought back before it): the park does not count (quota.go).
func (p *Pool) throttledFor(j *job) time.Duration {
	since := j.meta.ThrottledSince
	if since.IsZero() {
		since = j.meta.EnqueuedAt
	}
	if pu := j.meta.ParkedUntil; !pu.IsZero() && pu.After(since) {
		since = pu
		if pu.After(j.start) {
			since = j.start
		}
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
