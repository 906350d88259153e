package workers

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file is how a job sent back to come at a time of its own comes back
// on time. A job of a key over its fair share (Policy.Fair) goes back without
// a turn, to come back at its place in its key's line, which the limiter gave
// it (throttle.ErrOverShare; see refused in job.go). Nothing is booked for
// it, so a job sent away holds nothing that another key could use. A job
// holding a ticket goes back to come at its turn.
//
// asynq keeps due times in whole seconds, so a job asked back for t would
// come back at t's second, up to a second early or late, and the places of a
// key's line, one turn apart, would come back in one lump per second. So the
// copy is asked back a second after its time, as a backstop, and the pool
// moves it to the front of its queue's pending list at its time (front, from
// a timer; see sendBack): it comes back on time, one at a time, ahead of jobs
// that have had no turn yet. If this process dies before the timer fires,
// the backstop brings the job back a second late: never lost.

// frontTimeout bounds the promoter's move of one job.
const frontTimeout = 5 * time.Second

const (
	// shareBackstop is how much later than its time (a place in its key's
	// line, a ticket's turn) a job sent back is due, should the pool's timer
	// not move it then.
	shareBackstop = time.Second
	// shareHold is the longest place a job waits for in the worker rather
	// than going back to its queue: its slot is busy meanwhile, and a slot
	// that waits is one that fetches no other key's job.
	shareHold = 50 * time.Millisecond
	// sharePromote bounds the times the pool keeps a timer for: a backlog
	// of a million jobs sent away at once would otherwise hold a million
	// timers. A job with a place further off comes back at its backstop, a
	// second late, with the others of its second.
	sharePromote = time.Minute
)

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

// queuePrefix is what asynq v0.26's keys of queue qname begin with.
func queuePrefix(qname string) string { return "asynq:{" + qname + "}:" }

// taskKey is the hash in which asynq v0.26 keeps task id of queue qname.
func taskKey(qname, id string) string { return queuePrefix(qname) + "t:" + id }

// front moves task id of queue qname from scheduled to the front of pending,
// in asynq v0.26's key layout; false if it was not scheduled.
func front(ctx context.Context, rdb redis.UniversalClient, qname, id string) (bool, error) {
	prefix := queuePrefix(qname)
	n, err := frontScript.Run(ctx, rdb, []string{taskKey(qname, id), prefix + "pending", prefix + "scheduled"},
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
