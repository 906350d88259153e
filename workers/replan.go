package workers

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// This file is where a limit change reaches the jobs already sent back. A
// job sent back holds a turn booked under the old limits (a ticket) and is
// due at it; after a raise its turn under the new limits may be now. So when
// SetPolicy changes a policy, the pool moves the scheduled jobs of that
// policy's task types that hold a ticket to the front of their queue's
// pending list (front.lua), earliest turn first: each comes back at once,
// finds its ticket void (the policy's fingerprint changed, see ticketVoid)
// and books a turn under the new limits, running now if that turn is within
// its wait budget or going back holding the new turn if not. A lowered limit
// costs nothing more than it would anyway: those tickets are void when their
// jobs come back, wherever they are due.
//
// Only a change that may let jobs through sooner re-plans (looser): after a
// lowering the old turns are void when their jobs come back, which then take
// later ones anyway. One worker of the fleet re-plans a change: the first to
// claim it in the queues' Redis, a second after it applied it, so that the
// others have too (a job moved before a worker applied the change would go
// back under its old turn). Only jobs holding a ticket move: a job due later
// for a reason of its own (the user's ProcessAt, a handler's "come back in an
// hour", a cooldown) keeps its time. The work is bounded: the jobs the new
// limits can run within replanWindow, earliest turn first, among at most
// replanScan scheduled tasks looked at per queue (of any type). Jobs beyond
// it keep their due times and take a new turn when they come back, so a
// backlog of millions costs a bounded number of round trips per change.

const (
	// replanScan bounds the scheduled tasks a re-plan looks at per queue,
	// earliest due first.
	replanScan = 10000
	// replanPage is how many scheduled tasks one call lists.
	replanPage = 1000
	// replanNear: a job due within this is left where it is; moving it
	// would gain less than the round trips cost.
	replanNear = time.Second
	// replanTimeout bounds one re-plan.
	replanTimeout = 30 * time.Second
	// replanWindow: a re-plan brings forward the jobs the new limits can
	// run within this (see replanWave).
	replanWindow = 5 * time.Second
	// replanSettle is how long a worker lets the others apply a change
	// before it re-plans for the fleet.
	replanSettle = time.Second
	// replanClaim prefixes the key in the queues' Redis by which one
	// worker claims the re-plan of a change: the policy's name and its new
	// fingerprint follow.
	replanClaim = "sluice:replan:"
)

// Replan brings forward the jobs sent back under policy name, as SetPolicy
// does for a change of limits, after something else voided their turns: a
// reset of the policy's bucket (throttle.Limiter.Reset voids the tickets
// issued before it), here or on another host. Each comes back at once and
// takes a turn anew. It returns at once (the work goes on in the background,
// bounded as the file's comment says), and does nothing before Start, after
// Shutdown began, or for a name no task type is registered under.
func (p *Pool) Replan(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateRunning {
		return
	}
	// Jobs waiting here for a turn in the old bucket take one anew too.
	p.wmu.Lock()
	for w := range p.waiters {
		if w.policy == name {
			w.rebook.Store(true)
			w.cancel()
		}
	}
	p.wmu.Unlock()
	p.replan(name, p.names[name], false)
}

// replan moves the scheduled jobs of the task types under policy name to
// their queues' pending lists, in the background; see the file's comment.
// pol is the policy now. With once, after replanSettle (for the other
// workers to apply the same change), only the first worker of the fleet to
// claim the change in the queues' Redis does it. It is a no-op before Start
// and after Shutdown began; p.mu is held.
func (p *Pool) replan(name string, pol *policy, once bool) {
	types := make(map[string]bool)
	for typ, rt := range p.routes {
		if rt.name == name {
			types[typ] = true
		}
	}
	if len(types) == 0 || p.stopping() {
		return
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		ctx, cancel := context.WithTimeout(p.stopCtx, replanTimeout)
		defer cancel()
		if once {
			t := time.NewTimer(replanSettle)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			claimed, err := p.rdb.SetNX(ctx, replanClaim+name+":"+pol.fp, 1, replanTimeout).Result()
			if err != nil || !claimed {
				return // another worker re-plans (or the queues' Redis is down: the jobs take new turns when they come back)
			}
		}
		moved, err := p.moveScheduled(ctx, types, replanWave(pol))
		switch {
		case err != nil:
			p.log.Warn("workers: re-planning the jobs sent back under the old limits failed; they take a new turn when they come back",
				"policy", name, "moved", moved, "err", err)
		case moved > 0:
			p.log.Info("workers: jobs sent back under the old limits brought forward to take a turn under the new ones",
				"policy", name, "moved", moved)
		}
	}()
}

// replanWave is how many jobs a re-plan brings forward under pol: what its
// tighter bucket can grant within replanWindow (its burst, and its rate over
// the window), at most replanScan. The jobs beyond it keep their due times.
func replanWave(pol *policy) int {
	wave := func(p throttle.Policy) float64 {
		n, w := throttle.QuotaOf(p)
		if w <= 0 {
			return float64(n)
		}
		return float64(n) + float64(n)*replanWindow.Seconds()/w.Seconds()
	}
	k := math.Inf(1)
	for _, l := range pol.limits {
		k = min(k, wave(l.Limit))
	}
	if pol.global != nil {
		k = min(k, wave(pol.global))
	}
	return int(min(math.Ceil(k), replanScan))
}

// looser reports whether pol may let a job through sooner than old: a
// faster or larger bucket, a limit or a global bucket gone or faster, more
// in flight.
// A change that is not looser needs no re-plan: the turns booked under old
// are void when their jobs come back, which then take later ones anyway.
func looser(old, pol *policy) bool {
	faster := func(a, b throttle.Policy) bool {
		na, wa := throttle.QuotaOf(a)
		nb, wb := throttle.QuotaOf(b)
		if wa <= 0 || wb <= 0 {
			return na > nb
		}
		return na > nb || float64(na)/wa.Seconds() > float64(nb)/wb.Seconds()
	}
	for _, was := range old.limits {
		i := slices.IndexFunc(pol.limits, func(l NamedLimit) bool { return l.Name == was.Name })
		if i < 0 || faster(pol.limits[i].Limit, was.Limit) {
			return true // a limit gone, or faster
		}
	}
	switch {
	case old.global != nil && (pol.global == nil || faster(pol.global, old.global)),
		old.bounded() && (!pol.bounded() || pol.InFlightAuto || pol.slots.Max > old.slots.Max):
		return true
	}
	return false
}

// moveScheduled moves the scheduled tasks of types holding a ticket, in each
// of the pool's queues, that are due later than replanNear to the front of
// pending, earliest due at the very front, and returns how many it moved.
func (p *Pool) moveScheduled(ctx context.Context, types map[string]bool, most int) (int, error) {
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	moved := 0
	var errs []error
	for qname := range familyQueues(p.cfg.Queues) {
		ids, err := p.scheduledOf(ctx, insp, qname, types)
		if err != nil {
			errs = append(errs, err)
		}
		ids = ids[:min(len(ids), most)]
		// front pushes each to the end asynq pops next: the latest first,
		// so that the earliest ends up first in line.
		slices.Reverse(ids)
		for _, id := range ids {
			if ctx.Err() != nil {
				return moved, errors.Join(append(errs, ctx.Err())...)
			}
			// Gone meanwhile (a worker took it at its time): nothing to do.
			ok, err := front(ctx, p.rdb, qname, id)
			if err != nil {
				errs = append(errs, err)
				break
			}
			if ok {
				moved++
			}
		}
	}
	return moved, errors.Join(errs...)
}

// scheduledOf lists the ids of queue qname's scheduled tasks of types that
// hold a ticket and are due later than replanNear, earliest first, looking
// at replanScan tasks at most.
func (p *Pool) scheduledOf(ctx context.Context, insp *asynq.Inspector, qname string, types map[string]bool) ([]string, error) {
	var ids []string
	near := time.Now().Add(replanNear)
	for page := 1; page*replanPage <= replanScan; page++ {
		if ctx.Err() != nil {
			return ids, ctx.Err()
		}
		tasks, err := insp.ListScheduledTasks(qname, asynq.PageSize(replanPage), asynq.Page(page))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return nil, nil
		}
		if err != nil {
			return ids, err
		}
		for _, t := range tasks {
			if types[t.Type] && t.Headers[queue.HeaderTicket] != "" && t.NextProcessAt.After(near) {
				ids = append(ids, t.ID)
			}
		}
		if len(tasks) < replanPage {
			break
		}
	}
	return ids, nil
}
