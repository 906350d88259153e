package workers

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// This file is where a limit change reaches the jobs already sent back. A
// job sent back holds a turn booked under the old limits (a ticket) and is
// due at it; after a raise its turn under the new limits may be now. So when
// SetPolicy changes a policy, the pool moves the scheduled jobs of that
// policy's task types to their queue's pending list: each comes back at once,
// finds its ticket void (the policy's fingerprint changed, see ticketVoid)
// and books a turn under the new limits, running now if that turn is within
// its wait budget or going back holding the new turn if not. A lowered limit
// costs nothing more than it would anyway: those tickets are void when their
// jobs come back, wherever they are due.
//
// Every worker that applies the change re-plans: a job moved by the first
// and taken by a worker that had not yet applied the change goes back under
// the old turn, and the later worker's re-plan brings it forward again. The
// work is bounded (replanScan tasks looked at per queue and change), so a
// backlog of millions costs a bounded number of round trips; jobs beyond the
// bound keep their due times and take a new turn when they come back.

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
	p.replan(name)
}

// replan moves the scheduled jobs of the task types under policy name to
// their queues' pending lists, in the background; see the file's comment.
// It is a no-op before Start and after Shutdown began.
func (p *Pool) replan(name string) {
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
		moved, err := p.moveScheduled(ctx, types)
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

// moveScheduled moves the scheduled tasks of types, in each of the pool's
// queues, that are due later than replanNear to pending, earliest first, and
// returns how many it moved.
func (p *Pool) moveScheduled(ctx context.Context, types map[string]bool) (int, error) {
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	moved := 0
	var errs []error
	for qname := range p.cfg.Queues {
		ids, err := p.scheduledOf(ctx, insp, qname, types)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return moved, errors.Join(append(errs, ctx.Err())...)
			}
			// Gone meanwhile (a worker took it at its time): nothing to do.
			if err := insp.RunTask(qname, id); err == nil {
				moved++
			}
		}
	}
	return moved, errors.Join(errs...)
}

// scheduledOf lists the ids of queue qname's scheduled tasks of types due
// later than replanNear, earliest first, looking at replanScan tasks at most.
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
			if types[t.Type] && t.NextProcessAt.After(near) {
				ids = append(ids, t.ID)
			}
		}
		if len(tasks) < replanPage {
			break
		}
	}
	return ids, nil
}
