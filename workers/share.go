package workers

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// This file is where a job of a key over its fair share goes (Policy.Fair):
// back to its queue without a turn, to come back at its place in its key's
// line, which the limiter gave it (throttle.ErrOverShare). Nothing is booked
// for it, so a job sent away holds nothing that another key could use.
//
// asynq keeps due times in whole seconds, so a job asked back for t would
// come back at t's second, up to a second early or late, and the places of a
// key's line, one turn apart, would come back in one lump per second. So the
// copy is asked back a second after its place, as a backstop, and the pool
// moves it to the front of its queue's pending list at its place (front, from
// a timer): it comes back on time, one at a time, ahead of jobs that have
// had no turn yet. Tickets come back the same way (see requeue). If this process dies before
// the timer fires, the backstop brings the job back a second late: never lost.

// frontTimeout bounds the promoter's move of one job.
const frontTimeout = 5 * time.Second

const (
	// shareBackstop is how much later than its place a job sent away over its
	// share is due, should the pool's timer not move it at its place.
	shareBackstop = time.Second
	// shareHold is the longest place a job waits for in the worker rather
	// than going back to its queue: its slot is busy meanwhile, and a slot
	// that waits is one that fetches no other key's job.
	shareHold = 50 * time.Millisecond
	// sharePromote bounds the places the pool keeps a timer for: a backlog
	// of a million jobs sent away at once would otherwise hold a million
	// timers. A job with a place further off comes back at its backstop, a
	// second late, with the others of its second.
	sharePromote = time.Minute
)

// overShare handles a job whose key is over its share: place is its place in
// its key's line, from now.
func (p *Pool) overShare(ctx context.Context, j *job, place time.Duration) error {
	trace.SpanFromContext(ctx).AddEvent("over its share", trace.WithAttributes(attribute.Float64("sluice.place_s", place.Seconds())))
	if place > p.remaining(j) {
		return p.archive(ctx, j, p.pastHorizon(j, place))
	}
	if place <= shareHold && place <= p.budget(ctx, j) {
		t := time.NewTimer(place)
		defer t.Stop()
		select {
		case <-t.C:
			return p.acquire(ctx, j)
		case <-ctx.Done():
			p.outcome(ctx, j.rt, outFailed)
			return ctx.Err()
		case <-p.stopCtx.Done():
			return p.comeBack(ctx, j, shutdownDelay, time.Time{}, reasonShutdown)
		}
	}
	info, err := p.requeue(ctx, j, place+shareBackstop, time.Time{}, reasonShare)
	if err != nil || info == nil {
		return err
	}
	if place <= sharePromote {
		p.promote.at(place, p.rdb, info.Queue, info.ID)
	}
	return nil
}

// promoter moves jobs sent back to come at a time of their own (a ticket's
// slot, a place in their key's line) to the front of their queue's pending
// list at that time (front.lua).
type promoter struct {
	mu     sync.Mutex
	timers map[*time.Timer]struct{}
	closed bool
	wg     sync.WaitGroup // a timer set, until it fired and moved its job, or was stopped
}

//go:embed lua/front.lua
var frontLua string

var frontScript = redis.NewScript(frontLua)

// front moves task id of queue qname from scheduled to the front of pending,
// in asynq v0.26's key layout; false if it was not scheduled.
func front(ctx context.Context, rdb redis.UniversalClient, qname, id string) (bool, error) {
	prefix := "asynq:{" + qname + "}:"
	n, err := frontScript.Run(ctx, rdb, []string{prefix + "t:" + id, prefix + "pending", prefix + "scheduled"},
		id, time.Now().UnixNano()).Int()
	return n == 1, err
}

// at moves task id of queue qname to pending after d, unless the pool has
// stopped by then (the backstop brings it back).
func (pr *promoter) at(d time.Duration, rdb redis.UniversalClient, qname, id string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return
	}
	pr.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer pr.wg.Done()
		pr.mu.Lock()
		delete(pr.timers, t)
		closed := pr.closed
		pr.mu.Unlock()
		if !closed {
			// It may be gone: a worker whose timer fired late took it at its
			// backstop. Either way the job is in asynq's hands.
			ctx, cancel := context.WithTimeout(context.Background(), frontTimeout)
			defer cancel()
			_, _ = front(ctx, rdb, qname, id)
		}
	})
	if pr.timers == nil {
		pr.timers = make(map[*time.Timer]struct{})
	}
	pr.timers[t] = struct{}{}
}

// close stops the timers not yet fired (their jobs come back at their
// backstops) and waits for the moves of those that have.
func (pr *promoter) close() {
	pr.mu.Lock()
	pr.closed = true
	for t := range pr.timers {
		if t.Stop() {
			pr.wg.Done()
		}
	}
	pr.timers = nil
	pr.mu.Unlock()
	pr.wg.Wait()
}
