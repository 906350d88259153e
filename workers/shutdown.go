package workers

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// shutdownSlack is what Run gives Shutdown beyond ShutdownTimeout: asynq puts
// unfinished jobs back and stops its own goroutines after the timeout.
const shutdownSlack = 5 * time.Second

// Shutdown stops the pool and returns when every goroutine it started has
// ended. In order, it:
//
//  1. tells jobs waiting for their turn to stop waiting: a job that waited
//     within its budget gives its tokens back (one job at a time, latest turn
//     first, so that every token goes back) and goes back to its queue, to
//     come back a second later; a job holding a ticket goes back keeping it;
//     either way asynq drops the original, so nothing is retried or archived;
//  2. stops asynq from taking jobs and lets running handlers finish, for up to
//     Config.ShutdownTimeout; asynq then puts the jobs of unfinished handlers
//     back on their queue and cancels their contexts;
//  3. waits for those handlers to return, and stops the pool's own goroutines
//     and its connection to the queues' Redis.
//
// If ctx ends first, Shutdown returns ctx's error while the rest of the
// shutdown goes on; a later call waits for it again. A handler that ignores
// its context's cancellation keeps step 3 waiting. Shutdown before Start just
// releases the connection.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.once.Do(func() { go p.shutdown() })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pool) shutdown() {
	defer close(p.done)
	p.mu.Lock()
	running := p.state == stateRunning
	p.state = stateClosed
	p.mu.Unlock()

	// First, no new jobs: asynq stops pulling, and a job that starts anyway
	// goes back without reserving (a new reservation would stand on the
	// tokens the waiters are about to give back). Then jobs waiting for their
	// turn go back at once: those that hold tokens give them back, latest
	// slot first, then the others.
	p.closing.Store(true)
	if running {
		p.srv.Stop()
	}
	p.drainWaiters()
	p.stop()
	if running {
		p.log.Info("workers: pool shutting down", "waiting", p.stats.waiting.Load())
		p.aborts.Store(time.Now().Add(p.cfg.ShutdownTimeout).UnixNano())
		p.srv.Shutdown()
		// asynq calls no handler after Shutdown, so no Add races this Wait.
		p.inflight.Wait()
		if p.stopped != nil {
			close(p.stopped)
			<-p.status
		}
	}
	p.bg.Wait() // a re-plan ends with stopCtx
	p.promote.close()
	if err := p.rdb.Close(); err != nil {
		p.log.Warn("workers: closing the queues' Redis client", "err", err)
	}
	if running {
		p.log.Info("workers: pool stopped", "stats", p.Stats())
	}
}

// stopping reports whether Shutdown has begun.
func (p *Pool) stopping() bool { return p.closing.Load() }

// waiter is a job waiting in this process for a turn it has reserved.
type waiter struct {
	policy string      // the route's policy name, for SetPolicy
	bucket string      // the job's own bucket, for a drop of its adaptive rate
	rebook atomic.Bool // woken because the bucket's adaptive rate dropped
	slot   time.Time
	cancel context.CancelFunc // ends the wait: the reservation's tokens go back
	done   chan struct{}      // closed when the wait is over, tokens given back or used
}

// addWaiter registers w, unless the pool is stopping.
func (p *Pool) addWaiter(w *waiter) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.draining {
		return false
	}
	p.waiters[w] = struct{}{}
	return true
}

func (p *Pool) removeWaiter(w *waiter) {
	p.wmu.Lock()
	delete(p.waiters, w)
	p.wmu.Unlock()
	close(w.done)
}

// drainWaiters ends the waits of jobs holding reservations one at a time,
// latest slot first. A cancelled reservation gives back only the tokens no
// later reservation stands on (see docs/throttle-design.md), so in that order
// every token this process holds goes back, where cancelling them all at once
// would lose the refunds of all but the latest.
func (p *Pool) drainWaiters() {
	p.wmu.Lock()
	p.draining = true
	ws := make([]*waiter, 0, len(p.waiters))
	for w := range p.waiters {
		ws = append(ws, w)
	}
	p.wmu.Unlock()
	slices.SortFunc(ws, func(a, b *waiter) int { return b.slot.Compare(a.slot) })
	// One refund at a time is one store round trip each; if the store is slow
	// the rest are cancelled together, their refunds partial but bounded.
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	for i, w := range ws {
		w.cancel()
		select {
		case <-w.done:
			continue
		case <-deadline.C:
		}
		for _, w := range ws[i+1:] {
			w.cancel()
		}
		for _, w := range ws[i:] {
			<-w.done
		}
		return
	}
}

// drainTimeout bounds the one-at-a-time refunds of drainWaiters.
const drainTimeout = 2 * time.Second
